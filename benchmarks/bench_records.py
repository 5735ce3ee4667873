"""Record-format throughput: shallow verify (walk + CRC32C) and deep iteration, against raw CRC32C and kafka-python.

    python3 benchmarks/bench_records.py [--size-mb N] [--deep-mb N]

Builds two segments of roughly N MiB in memory (batches of ~16 KiB and of ~1 KiB), written to a temp file so the
file path (mmap) is what is measured. Prints GB/s next to a single crc32c call over the same bytes in the same run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from crc32c import crc32c

from kafkalog.records import build_batch, read_batches, scan_batches
from kafkalog.verify import verify_log_file


def make_segment(size: int, batch_bytes: int) -> bytes:
    """A segment of ``size`` bytes made of one template batch shape with increasing offsets."""
    rec_value = os.urandom(90)
    per_batch = max(1, batch_bytes // 110)
    template = [(b"key-%05d" % i, rec_value, [("h", b"x")] if i % 4 == 0 else []) for i in range(per_batch)]
    parts = []
    total = 0
    offset = 0
    while total < size:
        raw = build_batch(template, base_offset=offset, timestamp=1_700_000_000_000 + offset)
        parts.append(raw)
        total += len(raw)
        offset += per_batch
    return b"".join(parts)


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def loop_floor(data: bytes) -> tuple[float, float]:
    """Per-batch cost (ns) of the two Python-level steps no pure-Python scan can avoid: following the length chain
    (one ``unpack_from`` per batch) and one ``crc32c`` call on a memoryview slice per batch (incl. the CRC work)."""
    import struct

    size_of = struct.Struct(">8xi").unpack_from
    mv = memoryview(data)
    starts = []

    def walk():
        starts.clear()
        add, pos, last = starts.append, 0, len(mv) - 17
        while pos <= last:
            add(pos)
            pos += 12 + size_of(mv, pos)[0]

    walk()
    stops = starts[1:] + [len(mv)]

    def crcs():
        for s, e in zip(starts, stops, strict=True):
            crc32c(mv[s + 21 : e])

    n = len(starts)
    return best_of(walk) / n * 1e9, best_of(crcs) / n * 1e9


def kafka_python_records(data: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    mr = MemoryRecords(data)
    n = 0
    while (batch := mr.next_batch()) is not None:
        for _ in batch:
            n += 1
    return n


def kafka_python_shallow(data: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    mr = MemoryRecords(data)
    n = 0
    while (batch := mr.next_batch()) is not None:
        if not batch.validate_crc():
            raise SystemExit("kafka-python: bad crc")
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1024, help="segment size for the shallow runs (MiB)")
    ap.add_argument("--deep-mb", type=int, default=32, help="segment size for the deep runs (MiB)")
    args = ap.parse_args()
    size = args.size_mb << 20
    with tempfile.TemporaryDirectory() as tmp:
        for label, batch_bytes in (("16 KiB", 16 * 1024), ("1 KiB", 1024)):
            data = make_segment(size, batch_bytes)
            path = os.path.join(tmp, f"seg-{batch_bytes}.log")
            with open(path, "wb") as f:
                f.write(data)
            n_batches = len(scan_batches(data, check_crc=False))
            mv = memoryview(data)
            gb = len(data) / 1e9
            t_raw = best_of(lambda mv=mv: crc32c(mv))
            t_scan = best_of(lambda path=path: scan_batches(path))
            t_scan_mem = best_of(lambda data=data: scan_batches(data))
            t_verify = best_of(lambda path=path: verify_log_file(path, include_batches=False))
            t_verify_b = best_of(lambda path=path: verify_log_file(path))
            t_verify_iter = best_of(lambda path=path: sum(b.crc_valid for b in verify_log_file(path).batches), repeat=2)
            t_verify_dict = best_of(lambda path=path: verify_log_file(path).to_dict(), repeat=2)
            t_reader = best_of(lambda path=path: sum(1 for b in read_batches(path) if b.is_valid()), repeat=1)
            walk_ns, crc_ns = loop_floor(data)
            print(f"== {label} batches: {len(data) / 2**20:.0f} MiB, {n_batches} batches ==")
            print(f"  raw crc32c (one call)          {gb / t_raw:8.2f} GB/s")
            print(f"  scan_batches, in memory        {gb / t_scan_mem:8.2f} GB/s  ({100 * t_raw / t_scan_mem:.0f}% of raw crc32c)")
            print(f"  scan_batches, file (mmap)      {gb / t_scan:8.2f} GB/s  ({100 * t_raw / t_scan:.0f}% of raw crc32c)")
            print(f"  verify_log_file (no batches)   {gb / t_verify:8.2f} GB/s")
            print(f"  verify_log_file (batches)      {gb / t_verify_b:8.2f} GB/s  (columns; BatchReport made on access)")
            print(f"  ... + iterate every batch      {gb / t_verify_iter:8.2f} GB/s")
            print(f"  ... + to_dict()                {gb / t_verify_dict:8.2f} GB/s")
            print(f"  read_batches + is_valid()      {gb / t_reader:8.2f} GB/s")
            print(f"  floor: length walk {walk_ns:.0f} ns/batch, crc32c call {crc_ns:.0f} ns/batch "
                  f"(raw crc32c alone {t_raw / n_batches * 1e9:.0f} ns/batch)")
            small = data[: args.deep_mb << 20]
            small = small[: scan_batches(small, check_crc=False).valid_bytes]
            t_kp_shallow = best_of(lambda small=small: kafka_python_shallow(small), repeat=1)
            print(f"  kafka-python next_batch+crc    {len(small) / 1e9 / t_kp_shallow:8.2f} GB/s  (on {len(small) >> 20} MiB)")
            n_recs = sum(b.record_count for b in read_batches(small))
            t_deep = best_of(lambda small=small: sum(len(b.records()) for b in read_batches(small)), repeat=2)
            t_kp = best_of(lambda small=small: kafka_python_records(small), repeat=1)
            assert kafka_python_records(small) == n_recs
            print(f"  deep records() (ours)          {n_recs / t_deep / 1e6:8.2f} M records/s")
            print(f"  deep kafka-python              {n_recs / t_kp / 1e6:8.2f} M records/s  (ours {t_kp / t_deep:.1f}x)")
            del data, mv


if __name__ == "__main__":
    main()

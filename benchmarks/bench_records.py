"""Record-format throughput: shallow verify (walk + CRC32C), deep iteration and columnar decoding, against raw
CRC32C, kafka-python and Apache Kafka's own code run on the same file in the same run (``../shared/kafka-oracle``,
``kafka-oracle bench``; without Java the figures of ../shared/performance-anchors.md are printed as a labelled
fallback).

    python3 benchmarks/bench_records.py [--size-mb N] [--deep-mb N] [--sections shallow,columns,compressed]
    python3 benchmarks/bench_records.py --sections rss [--rss-mb 1024]

shallow: two segments of roughly N MiB (batches of ~16 KiB and of ~1 KiB), written to a temp file so the file path
is what is measured; GB/s next to a single crc32c call over the same bytes and Kafka's shallow read + CRC check of the
same file, in the same run.
columns: ``read_record_columns`` (compiled and pure-Python paths) on uncompressed 16 KiB batches of ~100 B and of
1 KiB values, records/s next to ``records()``, kafka-python and Kafka's deep iteration of the same file (``--turns N``:
N alternating Kafka/ours runs, medians printed).
compressed: lz4 and zstd batches: columnar decode time against decompressing the same batches alone with
``decompress`` (the reference of the 1.5x target) and against the codec floor (cramjam into a reused buffer); those
three are timed in turns (``--repeat`` turns, best of each kept) so load bursts hit them alike; beside them the
fresh memory floor, faulting in as many bytes of new huge-page memory as the whole-segment call returns, and
decompression with every output kept (what the whole-segment call, which keeps all its columns, is also given
against).
``--clock cpu`` times the runs in this process by its CPU time instead of wall time.
``--crc-paths avx2,sse42`` runs the chosen sections once per CRC32C path of the compiled core (``auto``: the best this
CPU runs; the fast path forced on and off in one run); ``--walk-paths avx2,portable`` likewise for the compiled record
walk (``KAFKALOG_WALK_PATH``); every section header names the CPU model, the load, both paths and the raw CRC32C
reference (the crc32c package and the path itself on 16 MiB in memory).
headers: the compiled decoder on records with three ASCII headers each, beside the same records without.
rss: peak RSS of a child process decoding a ``--rss-mb`` segment with ``iter_record_columns`` (slow: writes it).
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cramjam
import numpy as np
from crc32c import crc32c

from kafkalog.records import (
    CompressionType,
    build_batch,
    decompress,
    iter_record_columns,
    read_batches,
    read_record_columns,
    scan_batches,
)
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, _lz4_blocks
from kafkalog.records.native import compiled
from kafkalog.verify import verify_log_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_reference  # noqa: E402


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


#: the clock of every timing (``--clock``): wall time, or this process's CPU time, which other jobs on a shared
#: machine disturb less (it still counts cache and memory contention, not time spent descheduled)
CLOCK = time.perf_counter


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = CLOCK()
        fn()
        best = min(best, CLOCK() - t)
    return best


def best_of_each(fns: list, repeat: int = 5) -> list[float]:
    """Best time of each of ``fns``, run in turns (a-b-c, a-b-c, ...) so a burst of load on the machine falls on
    all of them rather than on whichever was being timed then: ratios between them stay comparable."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = CLOCK()
            fn()
            best[i] = min(best[i], CLOCK() - t)
    return best


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


_RAW = os.urandom(16 << 20)


def crc_reference() -> str:
    """CPU model, the compiled core's CRC32C path and the raw CRC32C rates (crc32c package, that path) on 16 MiB in
    memory: printed next to each figure, since the figures depend on them."""
    t_pkg = best_of(lambda: crc32c(_RAW), repeat=5)
    line = (f"[cpu: {cpu_model()}; load {os.getloadavg()[0]:.2f}; raw CRC32C of 16 MiB: crc32c package "
            f"{len(_RAW) / t_pkg / 1e9:.2f} GB/s")
    if compiled is None:
        return line + "; compiled core not built]"
    path = compiled.crc_path()
    t_c = best_of(lambda: compiled.hw_crc32c(_RAW), repeat=5)
    return (line + f", C path {path} {len(_RAW) / t_c / 1e9:.2f} GB/s (paths here: {','.join(compiled.crc_paths())}); "
            f"record walk path {compiled.walk_path()} (paths here: {','.join(compiled.walk_paths())})]")


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


def verify_fresh(path: str, tmp: str) -> float:
    """verify_log_file on a new copy of ``path`` (in the page cache, never mapped): only the verify is timed."""
    fresh = os.path.join(tmp, "fresh.log")
    with open(path, "rb") as src, open(fresh, "wb") as dst:
        while chunk := src.read(16 << 20):
            dst.write(chunk)
    t = CLOCK()
    verify_log_file(fresh)
    dt = CLOCK() - t
    os.unlink(fresh)
    return dt


def best_time(fn, repeat: int = 3) -> float:
    """Best of ``fn()``'s own returned timings (for runs that must exclude their setup)."""
    return min(fn() for _ in range(repeat))


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


def make_value_segment(size: int, value_bytes: int, *, batch_bytes: int = 16 * 1024,
                       compression: CompressionType = CompressionType.NONE, compressible: bool = False) -> bytes:
    """~``size`` bytes of batches of ~``batch_bytes`` holding records with ``value_bytes`` values (random, or text-like
    for the codecs), a short key and a header on every 4th record."""
    per_batch = max(1, batch_bytes // (value_bytes + 20))
    if compressible:
        words = b"kafka log segment record value offset timestamp header producer "
        values = [(words * (value_bytes // len(words) + 2))[i % 7 : i % 7 + value_bytes] for i in range(per_batch)]
    else:
        values = [os.urandom(value_bytes) for _ in range(per_batch)]
    template = [(b"key-%05d" % i, values[i], [("h", b"x")] if i % 4 == 0 else []) for i in range(per_batch)]
    parts, total, offset = [], 0, 0
    while total < size:
        raw = build_batch(template, base_offset=offset, timestamp=1_700_000_000_000 + offset, compression=compression)
        parts.append(raw)
        total += len(raw)
        offset += per_batch
    return b"".join(parts)


def bench_columns(deep_mb: int, turns: int = 1) -> None:
    """Columnar decode of uncompressed batches against records(), kafka-python and Apache Kafka's deep iteration of
    the same file in the same run (``turns`` alternating Kafka/ours runs; the median of each is printed)."""
    print("== columnar decode, uncompressed 16 KiB batches ==")
    print("  " + crc_reference())
    for value_bytes in (100, 1024):
        data = make_value_segment(deep_mb << 20, value_bytes)
        n = sum(b.record_count for b in read_batches(data))
        kafka_rates: list[float] = []
        ours: dict[str, list[float]] = {}
        timed = {
            "read_record_columns(path).to_arrow()": lambda p: read_record_columns(p).to_arrow(),
            "iter_record_columns(path), every chunk": lambda p: sum(len(c) for c in iter_record_columns(p)),
            "read_record_columns(path)": lambda p: read_record_columns(p),
            "... binary_view=True, .to_arrow()": lambda p: read_record_columns(p, binary_view=True).to_arrow(),
            "... binary_view=True, iter, every chunk":
                lambda p: sum(len(c) for c in iter_record_columns(p, binary_view=True)),
            # Kafka's deep figure is streamingIterator over FileRecords, which checks no CRC; ours above do
            "... verify_crc=False, .to_arrow() (Kafka's job)":
                lambda p: read_record_columns(p, verify_crc=False).to_arrow(),
        }
        with tempfile.NamedTemporaryFile(suffix=".log") as f:
            f.write(data)
            f.flush()
            t_col = best_of(lambda data=data: read_record_columns(data), repeat=5)
            for _ in range(turns):
                kafka = kafka_reference.bench_file(f.name)
                if kafka is not None:
                    assert kafka.records == n, (kafka.records, n)
                    kafka_rates.append(kafka.deep_records_per_s)
                for label, fn in timed.items():
                    ours.setdefault(label, []).append(n / best_of(lambda f=f, fn=fn: fn(f.name), repeat=5))
        t_pure = best_of(lambda data=data: read_record_columns(data, implementation="python"), repeat=1)
        t_recs = best_of(lambda data=data: sum(len(b.records()) for b in read_batches(data)), repeat=2)
        t_kp = best_of(lambda data=data: kafka_python_records(data), repeat=1)
        kafka_rate = statistics.median(kafka_rates) / 1e6 if kafka_rates else None
        fb = kafka_reference.fallback("deep_records_per_s_100b" if value_bytes == 100 else "deep_records_per_s_1k")
        print(f"  -- {value_bytes} B values: {len(data) >> 20} MiB, {n} records"
              f"{f', median of {turns} alternating turns' if turns > 1 else ''} --  {crc_reference()}")
        if kafka_rate is not None:
            print(f"  Apache Kafka deep iteration (same file, same run)  {kafka_rate:8.2f} M records/s  "
                  "(streamingIterator: no CRC check; ours check every batch's CRC unless verify_crc=False)")
        for label, rates in ours.items():
            print(kafka_reference.ratio_line(label, statistics.median(rates) / 1e6, kafka_rate, "M records/s",
                                             fallback_value=fb / 1e6))
        print(f"  read_record_columns (compiled, bytes)        {n / t_col / 1e6:9.2f} M records/s  "
              f"({t_kp / t_col:.1f}x kafka-python)")
        print(f"  read_record_columns (pure Python)            {n / t_pure / 1e6:9.2f} M records/s")
        print(f"  read_batches + records()                     {n / t_recs / 1e6:9.2f} M records/s")
        print(f"  kafka-python (same run)                      {n / t_kp / 1e6:9.2f} M records/s")


def decompress_all(codec: CompressionType, bodies: list) -> int:
    """Decompress every batch body once, keeping none of the output (its size is returned)."""
    total = 0
    for body in bodies:
        total += len(decompress(codec, body))
    return total


def codec_floor(codec: CompressionType, bodies: list):
    """The codec library alone, the floor under any decoder: cramjam decompressing every block (lz4; split
    beforehand) or frame (zstd) into one reused buffer, without framing checks or output objects."""
    out = bytearray(DEFAULT_MAX_DECOMPRESSED_SIZE >> 6)
    if codec is CompressionType.LZ4:
        blocks = [b for body in bodies for b, stored, _ in _lz4_blocks(body, False) if not stored]
        return lambda: [cramjam.lz4.decompress_block_into(b, out) for b in blocks]
    return lambda: [cramjam.zstd.decompress_into(b, out) for b in bodies]


def fresh_memory_floor(nbytes: int, repeat: int) -> float:
    """Best time to fault in ``nbytes`` of fresh private anonymous memory advised for huge pages (one write per 4 KiB
    page), as the compiled builder maps its large columns: the kernel's page clearing that any decode returning that
    many bytes of new columns pays, whatever its own speed."""

    def touch() -> None:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            m.madvise(mmap.MADV_HUGEPAGE)
        a = np.frombuffer(m, dtype=np.uint8)
        a[::4096] = 1
        del a
        m.close()

    return best_of(touch, repeat)


def bench_compressed(deep_mb: int, args_repeat: int = 5) -> None:
    """Columnar decode of compressed batches against decompressing the same batches alone."""
    print("== columnar decode, compressed batches of ~64 KiB before compression (~100 B text-like values) ==")
    for codec in (CompressionType.LZ4, CompressionType.ZSTD):
        data = make_value_segment(deep_mb << 20, 100, batch_bytes=64 * 1024, compression=codec, compressible=True)
        batches = list(read_batches(data))
        bodies = [b.raw[61:] for b in batches]
        n = sum(b.record_count for b in batches)
        t_dec, t_floor, t_iter = best_of_each([
            lambda bodies=bodies, codec=codec: decompress_all(codec, bodies),
            codec_floor(codec, bodies),
            lambda data=data: sum(len(c) for c in iter_record_columns(data)),
        ], repeat=args_repeat)  # fmt: skip
        # apart: its 0.3 GB of output would take the block pool the chunks reuse from one turn to the next
        t_col = best_of(lambda data=data: read_record_columns(data), repeat=args_repeat)
        # the same batches decompressed with every output kept, as the whole-segment call keeps its columns
        t_keep = best_of(lambda bodies=bodies, codec=codec: [decompress(codec, b) for b in bodies], repeat=args_repeat)
        col_bytes = sum(a.nbytes for a in read_record_columns(data).arrays.values())
        t_fresh = fresh_memory_floor(col_bytes, args_repeat)
        t_recs = best_of(lambda batches=batches: [b.records() for b in batches], repeat=2)
        print(f"  {codec.kafka_name}: {len(data) >> 20} MiB compressed, {n} records, {len(batches)} batches")
        print(f"    decompression alone (decompress)   {n / t_dec / 1e6:8.2f} M records/s")
        print(f"    codec floor (cramjam, reused out)  {n / t_floor / 1e6:8.2f} M records/s")
        print(f"    decompression, outputs kept        {n / t_keep / 1e6:8.2f} M records/s")
        print(f"    read_record_columns (total)        {n / t_col / 1e6:8.2f} M records/s  "
              f"({t_col / t_dec:.2f}x decompression alone, {t_col / t_keep:.2f}x decompression keeping every output)")
        print(f"    iter_record_columns chunks (total) {n / t_iter / 1e6:8.2f} M records/s  "
              f"({t_iter / t_dec:.2f}x decompression alone, {t_iter / t_floor:.2f}x codec floor)")
        print(f"    fresh memory floor ({col_bytes >> 20} MiB)     {t_fresh * 1e9 / n:8.2f} ns/record  "
              f"(faulting in the whole call's columns; chunks + this: {(t_iter + t_fresh) / t_dec:.2f}x)")
        print(f"    records() per batch                {n / t_recs / 1e6:8.2f} M records/s")


def bench_headers(repeat: int = 15) -> None:
    """Records carrying the headers tracing and schema registries add (three ASCII keys of 9-12 bytes): the
    compiled decoder's per-header work, against the same records without headers, in the same run."""
    print("== columnar decode, ~100 B values with 3 headers (traceparent, content-type, schema-id) ==")
    hdrs = [("traceparent", b"00-" + b"a" * 52), ("content-type", b"application/json"), ("schema-id", b"42")]
    for label, headers in (("no headers", []), ("3 headers", hdrs)):
        recs = [(b"key-%d" % j, b"v" * 100, headers) for j in range(100)]
        data = b"".join(build_batch(recs, base_offset=i * 100) for i in range(2000))
        t = best_of(lambda data=data: read_record_columns(data), repeat=repeat)
        print(f"  {label:<12} {t * 1e9 / 200_000:6.1f} ns/record  ({len(data) >> 20} MiB, 200,000 records)")


# VmHWM (this process image's peak RSS, file pages of mappings included); ru_maxrss would carry the parent's peak
_HWM = "int(next(x for x in open('/proc/self/status') if x.startswith('VmHWM')).split()[1])"
_RSS_CHILD = f"""
import sys, time
from kafkalog.records import iter_record_columns
t = time.perf_counter()
n = 0
reader = iter_record_columns(sys.argv[1])
for chunk in reader:
    n += len(chunk)
dt = time.perf_counter() - t
print(n, dt, {_HWM}, reader.error)
"""


def bench_rss(rss_mb: int) -> None:
    """Peak RSS of a fresh process decoding a ``rss_mb`` segment in chunks (ru_maxrss includes mapped file pages)."""
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.log")
        chunk = make_value_segment(64 << 20, 1024)
        with open(path, "wb") as f:
            for _ in range(max(1, rss_mb // 64)):
                f.write(chunk)  # same offsets repeated: the decoder does not care, sizes are what matter
        size = os.path.getsize(path)
        base = subprocess.run([sys.executable, "-c", f"import kafkalog.records, numpy; print({_HWM})"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        out = subprocess.run([sys.executable, "-c", _RSS_CHILD, path], capture_output=True, text=True, check=True)
        n, dt, maxrss, err = out.stdout.split(maxsplit=3)
        print(f"== peak RSS decoding a {size >> 20} MiB segment with iter_record_columns (1 KiB values) ==")
        print(f"  {int(n)} records in {float(dt):.1f} s ({int(n) / float(dt) / 1e6:.2f} M records/s), error={err.strip()}")
        print(f"  peak RSS {int(maxrss) / 1024:.0f} MB (target < 300 MB; interpreter + imports alone "
              f"{int(base.stdout) / 1024:.0f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1024, help="segment size for the shallow runs (MiB)")
    ap.add_argument("--deep-mb", type=int, default=32, help="segment size for the deep and columnar runs (MiB)")
    ap.add_argument("--rss-mb", type=int, default=1024, help="segment size for the peak-RSS run (MiB)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time every run by wall clock or by this process's CPU time (less noisy on a shared machine)")
    ap.add_argument("--repeat", type=int, default=5, help="compressed section: turns of each timing (best kept)")
    ap.add_argument("--turns", type=int, default=1,
                    help="columns and shallow: alternating Kafka/ours turns (the medians are printed; 3 for targets)")
    ap.add_argument("--crc-paths", default="auto",
                    help="comma list of CRC32C paths to run the sections with, in turn (auto: the best this CPU runs)")
    ap.add_argument("--walk-paths", default="auto",
                    help="comma list of record walk paths to run the sections with, in turn (auto: the best)")
    ap.add_argument("--sections", default="shallow,columns,compressed",
                    help="comma list of shallow, columns, compressed, headers, rss")  # fmt: skip
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock}; load average at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    paths = ", ".join(compiled.crc_paths()) if compiled else "none (not built)"
    walks = ", ".join(compiled.walk_paths()) if compiled else "none (not built)"
    print(f"cpu: {cpu_model()}; CRC32C paths here: {paths}; record walk paths here: {walks}")
    sections = set(args.sections.split(","))
    for crc_path, walk_path in ((c, w) for c in args.crc_paths.split(",") for w in args.walk_paths.split(",")):
        if compiled is not None:
            print(f"=== CRC32C path {compiled.set_crc_path(crc_path)}, record walk path "
                  f"{compiled.set_walk_path(walk_path)} ===")
            os.environ["KAFKALOG_CRC32C_PATH"] = compiled.crc_path()  # child processes (rss) too
            os.environ["KAFKALOG_WALK_PATH"] = compiled.walk_path()
        if "columns" in sections:
            bench_columns(args.deep_mb, args.turns)
        if "compressed" in sections:
            bench_compressed(args.deep_mb, args.repeat)
        if "headers" in sections:
            bench_headers()
        if "rss" in sections:
            bench_rss(args.rss_mb)
        if "shallow" in sections:
            bench_shallow(args.size_mb << 20, args.deep_mb, args.turns)


def bench_shallow(size: int, deep_mb: int, turns: int = 1) -> None:
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
            kafka_gbps, verify_gbps = [], []
            kafka = None
            for _ in range(turns):
                kafka = kafka_reference.bench_file(path)
                if kafka is not None:
                    kafka_gbps.append(kafka.shallow_gbps)
                verify_gbps.append(gb / best_of(lambda path=path: verify_log_file(path, include_batches=False)))
            t_verify = gb / statistics.median(verify_gbps)
            t_fresh = best_time(lambda path=path, tmp=tmp: verify_fresh(path, tmp))
            t_verify_mem = best_of(lambda mv=mv: verify_log_file(mv))
            os.environ["KAFKALOG_NO_EXTENSIONS"] = "1"
            t_verify_pure = best_of(lambda path=path: verify_log_file(path))
            del os.environ["KAFKALOG_NO_EXTENSIONS"]
            t_verify_b = best_of(lambda path=path: verify_log_file(path))
            t_verify_iter = best_of(lambda path=path: sum(b.crc_valid for b in verify_log_file(path).batches), repeat=2)
            t_verify_dict = best_of(lambda path=path: verify_log_file(path).to_dict(), repeat=2)
            t_reader = best_of(lambda path=path: sum(1 for b in read_batches(path) if b.is_valid()), repeat=1)
            walk_ns, crc_ns = loop_floor(data)
            print(f"== {label} batches: {len(data) / 2**20:.0f} MiB, {n_batches} batches ==  {crc_reference()}")
            print(f"  raw crc32c (one call)          {gb / t_raw:8.2f} GB/s")
            print(f"  scan_batches, in memory        {gb / t_scan_mem:8.2f} GB/s  ({100 * t_raw / t_scan_mem:.0f}% of raw crc32c)")
            print(f"  scan_batches, file (mmap)      {gb / t_scan:8.2f} GB/s  ({100 * t_raw / t_scan:.0f}% of raw crc32c)")
            k_shallow = statistics.median(kafka_gbps) if kafka_gbps else None
            if kafka is not None:
                print(f"  Apache Kafka shallow (same file, same run)   {k_shallow:8.2f} GB/s  "
                      f"(its raw CRC32C in memory: {kafka.crc32c_gbps:.2f} GB/s)")
            fb = kafka_reference.fallback("shallow_gbps_16k" if batch_bytes > 1024 else "shallow_gbps_1k")
            print(kafka_reference.ratio_line("verify_log_file(path) (no batches)", gb / t_verify, k_shallow, "GB/s",
                                             fallback_value=fb, width=29)
                  + f"  [{t_raw / t_verify:.2f}x raw crc32c]")
            print(f"  verify_log_file, fresh file    {gb / t_fresh:8.2f} GB/s  ({t_raw / t_fresh:.2f}x raw crc32c; "
                  "a copy written just before, never mapped)")
            print(f"  verify_log_file, bytes         {gb / t_verify_mem:8.2f} GB/s  ({t_raw / t_verify_mem:.2f}x raw crc32c)")
            print(f"  verify_log_file, pure Python   {gb / t_verify_pure:8.2f} GB/s  ({t_raw / t_verify_pure:.2f}x raw "
                  "crc32c; KAFKALOG_NO_EXTENSIONS=1)")
            print(f"  verify_log_file (batches)      {gb / t_verify_b:8.2f} GB/s  (columns; BatchReport made on access)")
            print(f"  ... + iterate every batch      {gb / t_verify_iter:8.2f} GB/s")
            print(f"  ... + to_dict()                {gb / t_verify_dict:8.2f} GB/s")
            print(f"  read_batches + is_valid()      {gb / t_reader:8.2f} GB/s")
            print(f"  floor: length walk {walk_ns:.0f} ns/batch, crc32c call {crc_ns:.0f} ns/batch "
                  f"(raw crc32c alone {t_raw / n_batches * 1e9:.0f} ns/batch)")
            small = data[: deep_mb << 20]
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

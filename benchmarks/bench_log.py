"""Benchmark: Log overhead over a bare LogSegment, and partition open time (clean vs unclean).

    python benchmarks/bench_log.py [--batches N] [--segments N] [--segment-bytes N] [--value-bytes N]

The full read of a cleanly opened log is timed twice: the first read checks each inactive segment's indexes on
first use, the second (same bytes, nothing left to check) is its reference.

Open figures come with segments/s and MB/s and, as the reference for this filesystem, the cost of creating one new
small file: every recovered segment writes one producer snapshot (a new inode), as Kafka's recovery does.

Apache Kafka's loader (``kafka-oracle bench-load``, clean and unclean from offset 0) opens the same partition in
the same run: ``kafka_open_*`` and ``open_*_vs_kafka_x`` (Kafka's time / ours; > 1 means faster than Kafka).
Without Java those lines are left out and one line says why.

Figures are wall-clock on the current machine; they are for comparison between runs, not thresholds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.log import Log
from kafkalog.records import build_batch
from kafkalog.segment.log_segment import LogSegment

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_reference  # noqa: E402

T0 = 1_700_000_000_000


def _batches(n: int, records: int = 10, value: int = 100) -> list[bytes]:
    out, offset = [], 0
    for _ in range(n):
        out.append(build_batch([(b"k", b"v" * value)] * records, base_offset=offset, timestamp=T0))
        offset += records
    return out


def _read_all(log: Log) -> int:
    """Read the whole log as a consumer does (1 MiB fetches); returns the bytes read."""
    pos, got = 0, 0
    while pos < log.log_end_offset:
        chunk = log.read(pos, 1 << 20)
        got += sum(c.size_in_bytes for c in chunk)
        pos = chunk[-1].last_offset + 1
    return got


def bench_append_read(n: int) -> dict[str, float]:
    batches = _batches(n)
    total = sum(map(len, batches))
    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "s").mkdir()
        seg = LogSegment.open(Path(tmp) / "s", 0)
        t = time.perf_counter()
        for b in batches:
            seg.append(b)
        res["segment_append_MBps"] = total / (time.perf_counter() - t) / 1e6
        t = time.perf_counter()
        pos_offset, got = 0, 0
        while pos_offset < n * 10:
            chunk = seg.read(pos_offset, 1 << 20)
            got += sum(c.size_in_bytes for c in chunk)
            pos_offset = chunk[-1].last_offset + 1
        res["segment_read_MBps"] = got / (time.perf_counter() - t) / 1e6
        seg.close()

        log = Log.open(Path(tmp) / "t-0", {"segment.bytes": str(1 << 30)}, clock=lambda: T0)
        t = time.perf_counter()
        for b in batches:
            log.append_as_follower(b)
        res["log_follower_append_MBps"] = total / (time.perf_counter() - t) / 1e6
        t = time.perf_counter()
        got = _read_all(log)
        res["log_read_MBps"] = got / (time.perf_counter() - t) / 1e6
        log.close()

        log = Log.open(Path(tmp) / "u-0", {"segment.bytes": str(1 << 30)}, clock=lambda: T0)
        recs = [(b"k", b"v" * 100)] * 10
        t = time.perf_counter()
        for _ in range(n):
            log.append_as_leader(recs, timestamp=T0)
        res["log_leader_append_MBps"] = total / (time.perf_counter() - t) / 1e6
        log.close()
    res["append_overhead_ratio"] = res["segment_append_MBps"] / res["log_follower_append_MBps"]
    res["read_overhead_ratio"] = res["segment_read_MBps"] / res["log_read_MBps"]
    return res


def file_create_us(directory: Path, n: int = 300) -> float:
    """Microseconds to create (and write 100 bytes to) one new file in ``directory``."""
    d = directory / "create-ref"
    d.mkdir()
    t = time.perf_counter()
    for i in range(n):
        with open(d / f"{i}.tmp", "wb") as f:
            f.write(b"x" * 100)
    el = time.perf_counter() - t
    shutil.rmtree(d)
    return el / n * 1e6


def bench_open(segments: int, segment_bytes: int = 2000, value_bytes: int = 100, repeat: int = 2) -> dict[str, float]:
    res: dict[str, float] = {}
    cfg = {"segment.bytes": str(segment_bytes), "index.interval.bytes": "200"}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t-0"
        log = Log.open(src, cfg, clock=lambda: T0)
        offset = 0
        while len(log.segments) < segments:
            log.append_as_follower(build_batch([(b"k", b"v" * value_bytes)] * 5, base_offset=offset, timestamp=T0))
            offset += 5
        log.flush()
        log.close()
        total = sum(p.stat().st_size for p in src.glob("*.log"))
        res["file_create_reference_us"] = file_create_us(Path(tmp))
        for mode, clean in (("clean", True), ("unclean_from_0", False)):
            best = float("inf")
            for r in range(repeat):
                d = Path(tmp) / f"{mode}{r}-0"
                shutil.copytree(src, d)
                t = time.perf_counter()
                opened = Log.open(d, cfg, clean_shutdown=clean, recovery_point=0, clock=lambda: T0)
                best = min(best, time.perf_counter() - t)
                assert opened.log_end_offset == offset
                opened.close()
                shutil.rmtree(d)
            res[f"open_{segments}_segments_{mode}_s"] = best
            res[f"open_{mode}_segments_per_s"] = segments / best
            res[f"open_{mode}_MBps"] = total / best / 1e6
        # Apache Kafka's loader on the same partition in the same run (bench-load takes a log dir of partitions)
        kafka_dir = Path(tmp) / "kafka-logdir"
        shutil.copytree(src, kafka_dir / "t-0")
        for mode, kafka_mode, extra in (("clean", "clean", ()), ("unclean_from_0", "unclean", ("--ignore-checkpoints",))):
            out = kafka_reference.bench_load(kafka_dir, mode=kafka_mode, rounds=max(3, repeat),
                                             extra=(*extra, *(a for k, v in cfg.items() for a in ("--config", f"{k}={v}"))))
            if out is None:
                continue
            res[f"kafka_open_{mode}_s"] = out["best_s"]
            res[f"kafka_open_{mode}_MBps"] = total / out["best_s"] / 1e6
            res[f"open_{mode}_vs_kafka_x"] = out["best_s"] / res[f"open_{segments}_segments_{mode}_s"]
        shutil.rmtree(kafka_dir)
        # After a clean open, the first read of each inactive segment checks its indexes (KIP-263, on first use);
        # the second full read, of the same bytes, is the reference.
        d = Path(tmp) / "reread-0"
        shutil.copytree(src, d)
        opened = Log.open(d, cfg, clean_shutdown=True, clock=lambda: T0)
        for label in ("first_read_after_clean_open_MBps", "second_read_MBps"):
            t = time.perf_counter()
            got = _read_all(opened)
            res[label] = got / (time.perf_counter() - t) / 1e6
        opened.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20_000)
    ap.add_argument("--segments", type=int, default=1000)
    ap.add_argument("--segment-bytes", type=int, default=2000, help="segment.bytes of the opened log")
    ap.add_argument("--value-bytes", type=int, default=100, help="record value size (5 records per batch)")
    ap.add_argument("--open-only", action="store_true", help="skip the append/read figures")
    args = ap.parse_args()
    figures = {} if args.open_only else bench_append_read(args.batches)
    figures.update(bench_open(args.segments, args.segment_bytes, args.value_bytes))
    for k, v in figures.items():
        print(f"{k:40s} {v:10.3f}")


if __name__ == "__main__":
    main()

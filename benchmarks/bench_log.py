"""Benchmark: Log overhead over a bare LogSegment, and partition open time (clean vs unclean).

    python benchmarks/bench_log.py [--batches N] [--segments N]

Figures are wall-clock on the current machine; they are for comparison between runs, not thresholds.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from kafkalog.log import Log
from kafkalog.records import build_batch
from kafkalog.segment import LogSegment

T0 = 1_700_000_000_000


def _batches(n: int, records: int = 10, value: int = 100) -> list[bytes]:
    out, offset = [], 0
    for _ in range(n):
        out.append(build_batch([(b"k", b"v" * value)] * records, base_offset=offset, timestamp=T0))
        offset += records
    return out


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
        pos_offset, got = 0, 0
        while pos_offset < log.log_end_offset:
            chunk = log.read(pos_offset, 1 << 20)
            got += sum(c.size_in_bytes for c in chunk)
            pos_offset = chunk[-1].last_offset + 1
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


def bench_open(segments: int) -> dict[str, float]:
    res: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "t-0"
        log = Log.open(src, {"segment.bytes": "2000", "index.interval.bytes": "200"}, clock=lambda: T0)
        offset = 0
        while len(log.segments) < segments:
            log.append_as_follower(build_batch([(b"k", b"v" * 100)] * 5, base_offset=offset, timestamp=T0))
            offset += 5
        log.flush()
        log.close()
        for mode, clean in (("clean", True), ("unclean_from_0", False)):
            d = Path(tmp) / f"{mode}-0"
            shutil.copytree(src, d)
            t = time.perf_counter()
            opened = Log.open(d, {"segment.bytes": "2000", "index.interval.bytes": "200"}, clean_shutdown=clean,
                              recovery_point=0, clock=lambda: T0)
            res[f"open_{segments}_segments_{mode}_s"] = time.perf_counter() - t
            assert opened.log_end_offset == offset
            opened.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20_000)
    ap.add_argument("--segments", type=int, default=1000)
    args = ap.parse_args()
    for k, v in {**bench_append_read(args.batches), **bench_open(args.segments)}.items():
        print(f"{k:40s} {v:10.3f}")


if __name__ == "__main__":
    main()

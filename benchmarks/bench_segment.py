"""Segment append throughput next to a plain sequential write of the same bytes, measured in the same run.

    python3 benchmarks/bench_segment.py [--size-mb 512] [--batch-kb 64] [--dir /tmp]

Both sides write the same pre-built batches one at a time into a fresh file, then fsync once; the ratio is the
figure that matters (issue 3's target: segment append >= 50% of the plain write).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from kafkalog.log.config import LogConfig
from kafkalog.records import build_batch
from kafkalog.segment.log_segment import LogSegment


def make_batches(total_bytes: int, batch_bytes: int) -> list[bytes]:
    value = os.urandom(1024)
    per = max(1, batch_bytes // 1100)
    batches = []
    offset = 0
    while sum(len(b) for b in batches) < total_bytes:
        batches.append(build_batch([(b"key", value)] * per, base_offset=offset))
        offset += per
    return batches


def plain_write(path: Path, batches: list[bytes]) -> float:
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        for b in batches:
            f.write(b)
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def segment_append(directory: Path, batches: list[bytes]) -> float:
    config = LogConfig.from_properties({"segment.bytes": 2**30, "segment.index.bytes": 10 * 1024 * 1024})
    t0 = time.perf_counter()
    seg = LogSegment.open(directory, 0, config=config)
    for b in batches:
        seg.append(b)
    seg.flush()
    elapsed = time.perf_counter() - t0
    seg.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--batch-kb", type=int, default=64)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    batches = make_batches(args.size_mb << 20, args.batch_kb << 10)
    total = sum(len(b) for b in batches)
    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-seg-", dir=args.dir))
    try:
        best_plain = best_seg = float("inf")
        for i in range(3):
            p = work / f"plain-{i}.bin"
            best_plain = min(best_plain, plain_write(p, batches))
            p.unlink()
            d = work / f"seg-{i}"
            d.mkdir()
            best_seg = min(best_seg, segment_append(d, batches))
            shutil.rmtree(d)
        gb = total / 1e9
        print(f"data: {total / 2**20:.0f} MiB in {len(batches)} batches of ~{total // len(batches) // 1024} KiB")
        print(f"plain sequential write (reference): {gb / best_plain:6.2f} GB/s")
        print(f"LogSegment.append:                  {gb / best_seg:6.2f} GB/s  "
              f"({best_plain / best_seg * 100:.0f}% of the plain write; target >= 50%)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

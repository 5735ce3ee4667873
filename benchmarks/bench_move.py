"""KIP-113 replica move: throughput next to a plain file copy of the same bytes, and the append pause at the swap.

One partition of ``--mb`` MiB (``--segment-mb`` segments) is written through a LogManager in dir A. Then, in the
same run and on the same filesystem:

1. ``shutil.copyfile`` of every file of the partition dir into a scratch dir (the baseline: what ``cp`` costs);
2. ``alter_replica_log_dir`` to dir B while a thread keeps appending through the manager; every append's latency
   is recorded, so the longest one (the swap pause, as a producer sees it) is reported next to the mover's own
   ``pause_ms`` (time the partition lock was held for the swap).

Both copies read a warm page cache (the log was just written); the numbers compare the copy paths, not disks.

    python benchmarks/bench_move.py --mb 1024
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalog.log.config import LogConfig  # noqa: E402
from kafkalog.manager import LogManager  # noqa: E402


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=512, help="partition size in MiB")
    ap.add_argument("--segment-mb", type=int, default=64)
    ap.add_argument("--root", default=None, help="where to create the dirs (default: a temp dir)")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-move-", dir=args.root))
    a, b, scratch = root / "a", root / "b", root / "copy"
    cfg = LogConfig.from_properties({"segment.bytes": args.segment_mb << 20})
    value = os.urandom(1000)
    records = [(f"k{i}".encode(), value) for i in range(100)]
    try:
        with LogManager([a, b], log_config=cfg, properties={"file.delete.delay.ms": 0}) as m:
            m.get_or_create_log("t", 0)
            assert m.log_dir_of("t", 0) == str(a)
            t0 = time.perf_counter()
            while m.get_log("t", 0).size < args.mb << 20:
                m.append("t", 0, records)
            m.flush("t", 0)
            write_s = time.perf_counter() - t0
            src = a / "t-0"
            total = _dir_bytes(src)
            print(f"partition: {total / 2**20:.0f} MiB in {len(list(src.glob('*.log')))} segments "
                  f"(written in {write_s:.1f} s)")

            scratch.mkdir()
            t0 = time.perf_counter()
            for p in src.iterdir():
                if p.is_file():
                    shutil.copyfile(p, scratch / p.name)
            fd = os.open(scratch, os.O_RDONLY)
            for p in scratch.iterdir():
                with open(p, "rb+") as f:
                    os.fsync(f.fileno())
            os.fsync(fd)
            os.close(fd)
            copy_s = time.perf_counter() - t0
            shutil.rmtree(scratch)
            print(f"plain copy (shutil.copyfile + fsync): {total / copy_s / 1e9:.2f} GB/s ({copy_s:.2f} s)")

            latencies: list[float] = []
            stop = threading.Event()
            small = [(b"k", b"x" * 100)]

            def appender() -> None:
                while not stop.is_set():
                    s = time.perf_counter()
                    m.append("t", 0, small)
                    latencies.append(time.perf_counter() - s)

            th = threading.Thread(target=appender)
            th.start()
            t0 = time.perf_counter()
            progress = m.alter_replica_log_dir("t", 0, str(b), wait=True)
            move_s = time.perf_counter() - t0
            time.sleep(0.05)
            stop.set()
            th.join()
            assert progress.state == "completed", progress
            assert m.log_dir_of("t", 0) == str(b)
            moved = progress.bytes_copied
            lat = sorted(latencies)
            print(f"move (alter_replica_log_dir, {len(latencies)} concurrent appends): "
                  f"{moved / move_s / 1e9:.2f} GB/s ({moved / 2**20:.0f} MiB in {move_s:.2f} s), "
                  f"{progress.restarts} restarts")
            print(f"swap: partition lock held {progress.pause_ms:.1f} ms; longest append {lat[-1] * 1000:.1f} ms, "
                  f"p99 {lat[int(len(lat) * 0.99)] * 1000:.2f} ms, median {lat[len(lat) // 2] * 1000:.3f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark: salvage recovery and the loader's plan against Kafka's recovery on the same damaged partition.

    python benchmarks/bench_salvage.py [--segments N] [--segment-bytes N]

A partition of N segments gets one byte flipped in a batch of its middle segment. Timed on fresh copies:
``plan_recovery`` (unclean, from offset 0; read-only), ``salvage_partition(dry_run=True)`` (reads every segment,
including past the damage), ``salvage_partition`` (quarantine, rewrite of one segment, rebuild by an unclean load
from offset 0), and as the reference measured in the same run Kafka's recovery (``Log.open`` after a crash, from
offset 0), which stops at the damage and deletes the later segments, so it reads about half as much.
Figures are wall-clock on the current machine; for comparison between runs, not thresholds.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from kafkalog.log import Log
from kafkalog.log.recovery_plan import plan_recovery
from kafkalog.log.salvage import salvage_partition
from kafkalog.records import build_batch

T0 = 1_700_000_000_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=20)
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    args = ap.parse_args()
    cfg = {"segment.bytes": str(args.segment_bytes), "index.interval.bytes": "4096"}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "logdir" / "t-0"
        log = Log.open(src, cfg, clock=lambda: T0)
        offset = 0
        while len(log.segments) < args.segments:
            log.append_as_follower(build_batch([(b"k", b"v" * 200)] * 10, base_offset=offset, timestamp=T0))
            offset += 10
        log.flush()
        log.close()
        logs = sorted(src.glob("*.log"))
        victim = logs[len(logs) // 2]
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
        total = sum(p.stat().st_size for p in logs)
        figures: dict[str, float] = {"partition_MB": total / 1e6}

        def copy(name: str) -> Path:
            d = Path(tmp) / name / "logdir" / "t-0"
            shutil.copytree(src, d)
            return d

        steps = [
            ("kafka_recovery_reference_s", lambda d: Log.open(d, cfg, clean_shutdown=False, recovery_point=0).close()),
            ("plan_recovery_s", lambda d: plan_recovery(d, None, clean_shutdown=False)),
            ("salvage_dry_run_s", lambda d: salvage_partition(d, dry_run=True)),
            ("salvage_s", lambda d: salvage_partition(d, quarantine_dir=d.parent.parent / "q")),
        ]
        for label, run in steps:
            best = float("inf")
            for r in range(2):
                d = copy(f"{label}{r}")
                t = time.perf_counter()
                run(d)
                best = min(best, time.perf_counter() - t)
            figures[label] = best
        figures["salvage_MBps"] = total / figures["salvage_s"] / 1e6
    for k, v in figures.items():
        print(f"{k:32s} {v:10.3f}")


if __name__ == "__main__":
    main()

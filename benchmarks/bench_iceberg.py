"""``kafkalog iceberg sync`` against ``kafkalog spark export`` of the same archive, and an incremental sync of 1%
new data against a full one (issue 40's targets: a full sync <= 1.25x the export, the 1% sync <= 10% of a full).

Sections (all timed in turns, best of ``--rounds``, the load printed with each figure):
* ``cli``: the two commands as an operator runs them, whole process (a sync this size runs in one process; the
  export starts Spark);
* ``spark``: in one warm ``local[2]`` session, ``sync(spark=...)`` (tasks write the data files, the driver commits)
  against ``export_archive`` (tasks write Parquet);
* ``incremental``: in one process, with imports warm, a full in-process sync into an empty table against a sync
  of the same table after 1% more records arrived (one new segment per partition).

    python3 benchmarks/bench_iceberg.py --partitions 8 --segments 8 --segment-mb 2 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_bench_common import generate, load_average  # noqa: E402

from kafkalog.archive.discovery import discover_segments  # noqa: E402
from kafkalog.log.stable_offset import partition_tail  # noqa: E402

KAFKALOG = str(Path(sys.executable).with_name("kafkalog"))


def add_one_percent(logdir: Path) -> int:
    """Append a segment of ~1% of each partition's bytes (random values, like the archive's); returns bytes."""
    import random

    from kafkalog.records import CompressionType, build_batch
    from kafkalog.segment.log_segment import LogSegment

    rng = random.Random(1)
    added = 0
    by_dir: dict[str, list] = {}
    for item in discover_segments([logdir]):
        by_dir.setdefault(item.partition_dir, []).append(item)
    for pdir, items in by_dir.items():
        target = sum(i.size_bytes for i in items) // 100
        offset = partition_tail(items).log_end
        seg = LogSegment.open(Path(pdir), offset)
        size = 0
        while size < target:
            recs = [(f"key-{j}".encode(), rng.randbytes(180), [("h", b"v")]) for j in range(16)]
            batch = build_batch(recs, base_offset=offset, compression=CompressionType.NONE, producer_id=-1)
            seg.append(batch)
            offset += 16
            size += len(batch)
        seg.close()
        added += size
    return added


def _run(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def cli_section(logdir: Path, work: Path, rounds: int) -> None:
    best = {"sync": float("inf"), "export": float("inf")}
    for r in range(rounds):
        for name in ("sync", "export") if r % 2 == 0 else ("export", "sync"):
            out = work / f"cli-{name}"
            shutil.rmtree(out, ignore_errors=True)
            if name == "sync":
                cmd = [KAFKALOG, "iceberg", "sync", str(logdir), "--table", "bench.t", "--warehouse", str(out)]
            else:
                cmd = [KAFKALOG, "spark", "export", str(logdir), "--out", str(out)]
            took = _run(cmd)
            best[name] = min(best[name], took)
            print(f"  cli {name}: {took:.2f}s (load {load_average():.2f})", flush=True)
    print(f"cli: sync {best['sync']:.2f}s, spark export {best['export']:.2f}s: sync/export = "
          f"{best['sync'] / best['export']:.2f}x (load {load_average():.2f})", flush=True)  # fmt: skip


def spark_section(logdir: Path, work: Path, rounds: int) -> None:
    from kafkalog.iceberg import sync
    from kafkalog.spark import export_archive, get_session

    spark = get_session("local[2]", "bench-iceberg")
    runs: dict[str, list[float]] = {"sync": [], "export": []}
    try:
        for r in range(rounds + 1):  # the first round warms the workers and is not counted
            for name in ("sync", "export") if r % 2 == 0 else ("export", "sync"):
                out = work / f"spark-{name}"
                shutil.rmtree(out, ignore_errors=True)
                t = time.perf_counter()
                parts = ""
                if name == "sync":
                    res = sync([str(logdir)], "bench.t", warehouse=str(out), spark=spark)
                    parts = " (" + ", ".join(f"{k} {v:.2f}s" for k, v in res.timings.items()) + ")"
                else:
                    export_archive(spark, [str(logdir)], str(out))
                took = time.perf_counter() - t
                if r:
                    runs[name].append(took)
                print(f"  spark {name}: {took:.2f}s{parts}{'' if r else ' (warm-up)'} (load {load_average():.2f})",
                      flush=True)  # fmt: skip
    finally:
        spark.stop()
    for what, pick in (("best", min), ("median", statistics.median)):
        s, e = pick(runs["sync"]), pick(runs["export"])
        print(f"spark local[2], warm, {what} of {rounds}: sync {s:.2f}s, export_archive {e:.2f}s: sync/export = "
              f"{s / e:.2f}x (load {load_average():.2f})", flush=True)  # fmt: skip


def incremental_section(logdir: Path, work: Path, rounds: int) -> None:
    from kafkalog.iceberg import sync

    grown = work / "grown"
    shutil.copytree(logdir, grown)
    added = add_one_percent(grown)
    sync([str(logdir)], "bench.t", warehouse=str(work / "warm"))  # imports warm
    best = {"full": float("inf"), "incremental": float("inf")}
    for _ in range(rounds):
        base = work / "inc-base"
        shutil.rmtree(base, ignore_errors=True)
        t = time.perf_counter()
        full = sync([str(logdir)], "bench.t", warehouse=str(base))
        best["full"] = min(best["full"], time.perf_counter() - t)
        t = time.perf_counter()
        inc = sync([str(grown)], "bench.t", warehouse=str(base))
        best["incremental"] = min(best["incremental"], time.perf_counter() - t)
        print(f"  full {full.rows} rows, then +{inc.rows} rows ({added} bytes): incremental {inc.timings} "
              f"(load {load_average():.2f})", flush=True)  # fmt: skip
    print(f"incremental 1%: {best['incremental']:.2f}s vs full {best['full']:.2f}s = "
          f"{100 * best['incremental'] / best['full']:.1f}% (load {load_average():.2f})", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--segment-mb", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sections", default="incremental,cli,spark")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-iceberg-"))
    try:
        total, _ = generate(work, args.partitions, args.segments, int(args.segment_mb * (1 << 20)), values="random")
        logdir = work / "logdir"
        print(f"archive: {args.partitions} partitions x {args.segments} segments, {total / 1e6:.0f} MB, "
              f"{os.cpu_count()} cpus, load {load_average():.2f}", flush=True)  # fmt: skip
        sections = {"cli": cli_section, "spark": spark_section, "incremental": incremental_section}
        for name in args.sections.split(","):
            sections[name.strip()](logdir, work, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

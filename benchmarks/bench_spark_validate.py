"""Where ``kafkalog spark validate`` of a small archive spends its wall time, against the in-process library loop.

    python benchmarks/bench_spark_validate.py [--root DIR | --partitions 10 --segments 5 --segment-kib 256]
        [--masters local[2],local[1]] [--rounds 2] [--continuity driver,job]

Each round runs the command as an operator does, in a fresh process (``kafkalog spark validate ROOT --out TMP
--master M --timings --json``), and prints its phases (``start``: interpreter and imports up to the command;
``plan``: the driver lists the segments; ``import_pyspark``; ``java``; ``session``: JVM and SparkSession;
``check_job``: the validation job, the session's first, which also starts the Python workers; ``continuity``;
``reports``; ``stop``) with the wall time the parent measured. ``--continuity job`` runs the same command with
partition continuity as a second Spark job (what archives of more than ``DRIVER_CONTINUITY_MAX_DIRS`` partition
dirs, or remote ones, get), ``driver`` as small local archives get it. The reference is the library loop in this
process over the same segments and partition dirs (``verify_segment`` then ``verify_partition``), timed in the
same rounds. Without ``--root`` an archive is generated with ``spark_bench_common.generate`` (Kafka's indexes) in a temp
dir. The load average is printed with each run: on a shared box it moves every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafkalog.archive.discovery import discover_segments  # noqa: E402
from kafkalog.verify import verify_partition, verify_segment  # noqa: E402

_CHILD = """
import sys
import kafkalog.spark.validate as v
if sys.argv[1] == "job":
    v.DRIVER_CONTINUITY_MAX_DIRS = 0
from kafkalog_cli.main import main
sys.argv = ["kafkalog", "spark", "validate", *sys.argv[2:]]
main()
"""


def library_loop(root: str) -> float:
    """What ``kafkalog verify`` does over the archive, in this process: every segment, then every partition dir."""
    t = time.perf_counter()
    by_dir: dict[str, list] = {}
    for item in discover_segments([root]):
        by_dir.setdefault(item.partition_dir, []).append(verify_segment(item))
    parts = [verify_partition(reports) for reports in by_dir.values()]
    assert parts and all(p.status in ("ok", "gap") for p in parts), [p.problems for p in parts][:3]
    return time.perf_counter() - t


def spark_validate(root: str, master: str, continuity: str, out: str) -> tuple[float, dict]:
    """One ``kafkalog spark validate --timings --json`` in a child process: (wall seconds, the summary object)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, continuity, root, "--out", out, "--master", master,
                           "--timings", "--json"], capture_output=True, text=True, timeout=1800)  # fmt: skip
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"spark validate exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=None, help="an archive to validate (default: generate one)")
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--segments", type=int, default=5)
    ap.add_argument("--segment-kib", type=int, default=256)
    ap.add_argument("--masters", default="local[2],local[1]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--continuity", default="driver", help="comma list of driver, job")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kafkalog-bench-validate-"))
    try:
        root = args.root
        if root is None:
            from spark_bench_common import generate

            generate(work / "archive", args.partitions, args.segments, args.segment_kib * 1024)
            root = str(work / "archive" / "logdir")
        items = discover_segments([root])
        size = sum(i.size_bytes for i in items)
        dirs = len({i.partition_dir for i in items})
        print(f"archive {root}: {len(items)} segments, {dirs} partition dirs, {size / 1e6:.1f} MB; "
              f"{os.cpu_count()} CPUs")  # fmt: skip
        library_loop(root)  # page cache and imports
        for master in args.masters.split(","):
            for continuity in args.continuity.split(","):
                for r in range(args.rounds):
                    lib = library_loop(root)
                    wall, summary = spark_validate(root, master, continuity, str(work / "out"))
                    load = os.getloadavg()[0]
                    phases = " ".join(f"{k} {v:.2f}" for k, v in summary["timings"].items())
                    print(f"{master} continuity={continuity} round {r + 1}: wall {wall:.2f}s [{phases}]; "
                          f"library loop {lib:.3f}s; load {load:.1f}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

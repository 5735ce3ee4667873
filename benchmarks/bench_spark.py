"""Benchmark the Spark validation job and the DataSource against the single-process library loop.

    python benchmarks/bench_spark.py [--partitions 200] [--segments 5] [--segment-kib 1024] [--rounds 3] [--dir DIR]

Generates an archive (``partitions`` x ``segments`` segments written through ``LogSegment.append`` with
``build_batch`` batches, so indexes are Kafka's), then in one run: validates it with the library loop in this
process, with Spark ``local[1]`` and ``local[2]``; scans it with the DataSource with and without an offset filter.
Prints GB/s, segments/s, the 1->2 core speed-up and Spark's per-core throughput as a ratio of the library loop.
Targets: local[2] >= 1.8x local[1]; per-core Spark >= 80% of the single-process loop.
Timing: one throwaway validation job per session first (JVM, Python workers, imports), then ``--rounds`` rounds of
(library loop in this process, the CLI ``kafkalog verify --json`` in a child process, an empty job with the same
task count, the validation job); best of each is reported, per-core ratios are given best against best within the
same session and as the median of per-round ratios, and the load average is printed (on a shared box other
processes' load moves every figure). ``--dir DIR`` keeps the archive and reuses it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog.discovery import discover_segments  # noqa: E402
from kafkalog.records import CompressionType, build_batch  # noqa: E402
from kafkalog.segment import LogSegment  # noqa: E402
from kafkalog.verify import verify_segment  # noqa: E402


def generate(root: Path, partitions: int, segments: int, segment_bytes: int) -> tuple[int, int]:
    """Write the archive; returns (total bytes, total batches). Batches are built once and re-based."""
    records_per_batch = 16
    templates = []
    for i, codec in enumerate([CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4, CompressionType.NONE]):
        recs = [
            (f"key-{i}-{j}".encode(), (f"value-{i}-{j}-" * 12).encode(), [("h", b"v")])
            for j in range(records_per_batch)
        ]
        templates.append(build_batch(recs, base_offset=0, compression=codec, producer_id=-1))
    logdir = root / "logdir"
    logdir.mkdir(parents=True)
    total = batches = total_0 = batches_0 = 0
    for p in range(partitions):
        pdir = logdir / f"bench-{p}"
        if p > 0:  # partitions are independent logs: copies of the first one are just as valid (and faster)
            shutil.copytree(logdir / "bench-0", pdir)
            total += total_0
            batches += batches_0
            continue
        pdir.mkdir()
        offset = 0
        for _s in range(segments):
            seg = LogSegment.open(pdir, offset)
            size = 0
            k = 0
            while size < segment_bytes:
                t = bytearray(templates[k % len(templates)])
                struct.pack_into(">q", t, 0, offset)  # baseOffset is outside the CRC: re-basing keeps it valid
                seg.append(bytes(t))
                offset += records_per_batch
                size += len(t)
                k += 1
            batches += k
            total += size
            seg.close()
        total_0, batches_0 = total, batches
    return total, batches


def library_loop(items) -> float:
    t = time.perf_counter()
    bad = [s for s in (verify_segment(i) for i in items) if s.status != "ok"]
    assert not bad, bad[:3]
    return time.perf_counter() - t


def cli_verify(root: str) -> float:
    """The single-process CLI the way an operator runs it (``kafkalog verify ROOT --json``), process start
    included: the figure the issue compares Spark against (the library loop above is the stricter baseline)."""
    import subprocess

    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from kafkalog_cli.main import main; main()", "verify", "--json", root],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stderr[-500:]
    return took


def _load() -> float:
    return os.getloadavg()[0]


def spark_runs(
    root: str, master: str, offset_filter: int, metrics_root: Path, scan_roots: list[str], rounds: int, scan: bool,
    with_cli: bool = True,
) -> dict:
    """Validation job timings (best of ``rounds``), each round also timing the library loop in this process right
    before it, so both see the same machine load; DataSource scans when ``scan``."""
    from kafkalog.spark import get_session, register, validate_archive
    from kafkalog.spark.datasource import read_scan_metrics
    from kafkalog.spark.validate import _n_tasks

    spark = get_session(master, f"bench-{master}")
    register(spark)
    items = discover_segments(root)
    n_tasks = _n_tasks(items, spark.sparkContext.defaultParallelism)
    try:
        validate_archive(spark, root).select("status").collect()  # throwaway job: Python workers, imports, JIT
        out: dict = {"tasks": n_tasks, "validate": [], "lib": [], "cli": [], "load": [], "empty": []}

        def ident(batches):
            yield from batches

        for _ in range(rounds):
            out["load"].append(_load())
            out["lib"].append(library_loop(items))
            if with_cli:
                out["cli"].append(cli_verify(root))
            t = time.perf_counter()
            spark.range(0, n_tasks, 1, n_tasks).mapInArrow(ident, "id long").collect()
            out["empty"].append(time.perf_counter() - t)
            t = time.perf_counter()
            rows = validate_archive(spark, root).select("status").collect()  # the job only: discovery included
            out["validate"].append(time.perf_counter() - t)
            assert len(rows) == len(items) and all(r.status == "ok" for r in rows)
        if scan:
            for name, flt in (("scan_full", None), ("scan_filtered", offset_filter)):
                best = None
                for k in range(2):
                    mdir = metrics_root / f"{name}-{k}"
                    shutil.rmtree(mdir, ignore_errors=True)  # a kept --dir holds the last run's metrics
                    df = spark.read.format("kafkalog").option("metricsDir", str(mdir)).load(scan_roots)
                    if flt is not None:
                        df = df.filter(f"offset >= {flt}")
                    t = time.perf_counter()
                    n = df.selectExpr("count(*) AS n", "sum(length(value)) AS v").collect()[0].n
                    s = time.perf_counter() - t
                    if best is None or s < best[0]:
                        best = (s, n, read_scan_metrics(str(mdir)))
                s, n, m = best
                out[f"{name}_s"], out[f"{name}_rows"] = s, n
                out[f"{name}_batches"], out[f"{name}_bytes"] = m["batches_read"], m["bytes_read"]
        return out
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--segments", type=int, default=5)
    ap.add_argument("--segment-kib", type=int, default=1024)
    ap.add_argument("--scan-partitions", type=int, default=10, help="partition dirs the DataSource scan reads")
    ap.add_argument("--rounds", type=int, default=3, help="timed validation jobs per master (best is reported)")
    ap.add_argument(
        "--dir", default=None, help="where to generate (default: a temp dir, removed afterwards); kept and reused"
    )
    args = ap.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafkalog-bench-"))
    done = base / "archive" / f"done-{args.partitions}x{args.segments}x{args.segment_kib}"
    try:
        t = time.perf_counter()
        if done.exists():
            total, batches = (int(x) for x in done.read_text().split())
            how = "reused"
        else:
            shutil.rmtree(base / "archive", ignore_errors=True)
            total, batches = generate(base / "archive", args.partitions, args.segments, args.segment_kib * 1024)
            done.write_text(f"{total} {batches}")
            how = f"generated in {time.perf_counter() - t:.1f}s"
        n_seg = args.partitions * args.segments
        print(f"archive: {n_seg} segments, {total / 1e9:.3f} GB, {batches} batches ({how}); {os.cpu_count()} CPUs")
        root = str(base / "archive" / "logdir")
        library_loop(discover_segments(root))  # warm the page cache
        records_per_partition = batches // args.partitions * 16
        offset_filter = int(records_per_partition * 0.9)
        scan_roots = [os.path.join(root, f"bench-{p}") for p in range(min(args.scan_partitions, args.partitions))]
        r1 = spark_runs(root, "local[1]", offset_filter, base / "m1", scan_roots, args.rounds, False)
        r2 = spark_runs(root, "local[2]", offset_filter, base / "m2", scan_roots, args.rounds, True)

        def rate(s: float) -> str:
            return f"{total / s / 1e9:.3f} GB/s, {n_seg / s:.0f} segments/s ({s:.2f}s)"

        def secs(xs: list[float]) -> str:
            return "/".join(f"{x:.2f}" for x in xs)

        lib_s = min(r1["lib"] + r2["lib"])
        s1, s2 = min(r1["validate"]), min(r2["validate"])
        print(f"load average during runs: local[1] {secs(r1['load'])}, local[2] {secs(r2['load'])}")
        print(f"library loop (1 process): {rate(lib_s)}   [runs {secs(r1['lib'] + r2['lib'])}]")
        print(f"spark local[1]:           {rate(s1)}   [{r1['tasks']} tasks; runs {secs(r1['validate'])}]")
        print(f"spark local[2]:           {rate(s2)}   [{r2['tasks']} tasks; runs {secs(r2['validate'])}]")
        print(
            f"spark fixed cost (empty job, same task count): local[1] {min(r1['empty']):.2f}s, "
            f"local[2] {min(r2['empty']):.2f}s"
        )
        print(f"speed-up local[1] -> local[2]: {s1 / s2:.2f}x (target >= 1.8x)")
        # Per-core ratios against the baselines timed in the same rounds (same load): best against best, and the
        # median of the per-round ratios (each Spark job against the loop run right before it), which one lucky
        # or unlucky run on a shared box cannot move.
        import statistics

        def per_core(base: str, r: dict, cores: int) -> tuple[float, float]:
            best = min(r[base]) / (min(r["validate"]) * cores)
            rounds = statistics.median(b / (v * cores) for b, v in zip(r[base], r["validate"], strict=True))
            return best, rounds

        for base, label in (("lib", "library loop"), ("cli", "CLI `kafkalog verify`")):
            (b1, m1), (b2, m2) = per_core(base, r1, 1), per_core(base, r2, 2)
            print(f"per-core spark / {label}: local[1] {b1:.0%} best, {m1:.0%} median of rounds; "
                  f"local[2] {b2:.0%} best, {m2:.0%} median of rounds (target >= 80%)")
        print(f"CLI `kafkalog verify --json` (1 process, start included): {rate(min(r1['cli'] + r2['cli']))}")
        print(
            f"datasource scan (local[2], {len(scan_roots)} partitions): full {r2['scan_full_rows']} rows in "
            f"{r2['scan_full_s']:.2f}s ({r2['scan_full_rows'] / r2['scan_full_s']:.0f} rows/s, "
            f"{r2['scan_full_bytes'] / r2['scan_full_s'] / 1e6:.1f} MB/s); offset >= {offset_filter}: "
            f"{r2['scan_filtered_rows']} rows in {r2['scan_filtered_s']:.2f}s "
            f"({r2['scan_filtered_rows'] / r2['scan_filtered_s']:.0f} rows/s)"
        )
        print(
            f"pushdown: batches read {r2['scan_filtered_batches']}/{r2['scan_full_batches']} = "
            f"{r2['scan_filtered_batches'] / r2['scan_full_batches']:.3f}, bytes read "
            f"{r2['scan_filtered_bytes'] / r2['scan_full_bytes']:.3f} of the full scan"
        )
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())

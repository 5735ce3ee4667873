"""Benchmark the Spark validation job and the DataSource against the single-process library loop.

    python benchmarks/bench_spark.py [--partitions 200] [--segments 5] [--segment-kib 1024] [--dir DIR]

Generates an archive (``partitions`` x ``segments`` segments written through ``LogSegment.append`` with
``build_batch`` batches, so indexes are Kafka's), then in one run: validates it with the library loop in this
process, with Spark ``local[1]`` and ``local[2]``; scans it with the DataSource with and without an offset filter.
Prints GB/s, segments/s, the 1->2 core speed-up and Spark's per-core throughput as a ratio of the library loop.
Targets: local[2] >= 1.8x local[1]; per-core Spark >= 80% of the single-process loop.
Timings exclude JVM start-up but include Python worker start-up (one warm-up job per session runs first).
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


def library_loop(root: str) -> float:
    t = time.perf_counter()
    bad = [s for s in (verify_segment(i) for i in discover_segments(root)) if s.status != "ok"]
    assert not bad, bad[:3]
    return time.perf_counter() - t


def spark_runs(
    root: str, master: str, offset_filter: int, metrics_root: Path, scan_roots: list[str]
) -> dict[str, float]:
    from kafkalog.spark import get_session, register, validate_archive
    from kafkalog.spark.datasource import read_scan_metrics

    spark = get_session(master, f"bench-{master}")
    register(spark)
    try:
        validate_archive(spark, root).count()  # warm-up: Python workers, JIT
        out: dict[str, float] = {}
        t = time.perf_counter()
        rows = validate_archive(spark, root).select("status").collect()
        out["validate_s"] = time.perf_counter() - t
        assert all(r.status == "ok" for r in rows)
        if master == "local[2]":
            for name, flt in (("scan_full", None), ("scan_filtered", offset_filter)):
                mdir = metrics_root / name
                df = spark.read.format("kafkalog").option("metricsDir", str(mdir)).load(scan_roots)
                if flt is not None:
                    df = df.filter(f"offset >= {flt}")
                t = time.perf_counter()
                n = df.selectExpr("count(*) AS n", "sum(length(value)) AS v").collect()[0].n
                out[f"{name}_s"] = time.perf_counter() - t
                out[f"{name}_rows"] = n
                m = read_scan_metrics(str(mdir))
                out[f"{name}_batches"] = m["batches_read"]
                out[f"{name}_bytes"] = m["bytes_read"]
        return out
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--segments", type=int, default=5)
    ap.add_argument("--segment-kib", type=int, default=1024)
    ap.add_argument("--scan-partitions", type=int, default=10, help="partition dirs the DataSource scan reads")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir, removed afterwards)")
    args = ap.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafkalog-bench-"))
    try:
        t = time.perf_counter()
        total, batches = generate(base / "archive", args.partitions, args.segments, args.segment_kib * 1024)
        n_seg = args.partitions * args.segments
        print(f"archive: {n_seg} segments, {total / 1e9:.3f} GB, {batches} batches (generated in "
              f"{time.perf_counter() - t:.1f}s)")
        root = str(base / "archive" / "logdir")
        library_loop(root)  # warm the page cache
        lib_s = min(library_loop(root) for _ in range(2))
        records_per_partition = batches // args.partitions * 16
        offset_filter = int(records_per_partition * 0.9)
        scan_roots = [os.path.join(root, f"bench-{p}") for p in range(min(args.scan_partitions, args.partitions))]
        r1 = spark_runs(root, "local[1]", offset_filter, base / "m1", scan_roots)
        r2 = spark_runs(root, "local[2]", offset_filter, base / "m2", scan_roots)

        def rate(s: float) -> str:
            return f"{total / s / 1e9:.3f} GB/s, {n_seg / s:.0f} segments/s ({s:.2f}s)"

        print(f"library loop (1 process): {rate(lib_s)}")
        print(f"spark local[1]:           {rate(r1['validate_s'])}")
        print(f"spark local[2]:           {rate(r2['validate_s'])}")
        speedup = r1["validate_s"] / r2["validate_s"]
        per_core_1 = lib_s / r1["validate_s"]
        per_core_2 = lib_s / (r2["validate_s"] * 2)
        print(f"speed-up local[1] -> local[2]: {speedup:.2f}x (target >= 1.8x)")
        print(f"per-core spark / library loop: local[1] {per_core_1:.0%}, local[2] {per_core_2:.0%} (target >= 80%)")
        print(
            f"datasource scan (local[2], {len(scan_roots)} partitions): full {r2['scan_full_rows']} rows in {r2['scan_full_s']:.2f}s "
            f"({r2['scan_full_rows'] / r2['scan_full_s']:.0f} rows/s, {r2['scan_full_bytes'] / r2['scan_full_s'] / 1e6:.1f} MB/s); offset >= {offset_filter}: "
            f"{r2['scan_filtered_rows']} rows in {r2['scan_filtered_s']:.2f}s"
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

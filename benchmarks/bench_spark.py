"""Benchmark the Spark validation job and the DataSource against the single-process library loop.

    python benchmarks/bench_spark.py [--partitions 200] [--segments 5] [--segment-kib 1024] [--rounds 3] [--dir DIR]
        [--sections classic,scan,remote,bigremote,cluster,export,tiny] [--scan-partitions 10] [--big-mib 64]
        [--values repeated|random]

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

``--sections`` picks what runs (default ``classic``, the above); the others use ``--scan-partitions`` partition
dirs of the same archive, best of ``--rounds``:

* ``scan``: DataSource scans (``count`` and ``sum(length(value))``, or ``count``) on ``local[1]`` with the full
  schema (default task spread and the former 8 tasks) and with user-specified schemas (``SCAN_READS``), against the
  in-process columnar decoder over the same segments (``iter_record_columns`` + ``to_arrow``, all columns and value
  only), and against Spark's own Parquet scan of the same records (written once by the bench, same aggregates).
  Each DataSource time is split into the tasks' Python time (the ``scan_seconds`` metric), the same read's
  one-record query (planning, job, task start-up) and the rest (Arrow transfer to the JVM, row conversion,
  aggregation). The Arrow floor is a Python DataSource that yields the very Arrow batches ours yields, read back
  from memory-mapped IPC files with no decoding: what Spark's Python DataSource path (pyspark runs it as
  ``mapInArrow`` and hands the JVM rows, never columnar batches) costs before any reader does any work.
* ``remote``: the validation job and the DataSource full scan on ``local[2]`` reading the archive from moto's S3
  server on 127.0.0.1 against the same partition dirs on local disk.
* ``bigremote``: one ``--big-mib`` segment (random values) in moto's S3 server, a DataFrame full scan on
  ``local[2]`` read whole (one task, the default ``maxPartitionBytes``) against split in two byte ranges
  (``maxPartitionBytes`` half the segment and 1 MiB), in turns, with the driver's planning time of each.
* ``cluster``: the same two jobs on a standalone cluster (master + 2 one-core workers from the pyspark package,
  127.0.0.1) against ``local[2]``.
* ``export``: on ``local[2]``, ``export_archive`` (tasks write Parquet with pyarrow) against the DataSource then
  ``df.write.parquet`` of the same records, both with ``topic=/partition=`` dirs and both flat; then queries
  (count + sum(length(value)), and a point filter ``topic = ... AND offset = X``) on the export against the same
  queries on the archive through the DataSource. Issue 29's goals: export <= 0.5x the DataSource+write.parquet
  time, queries on the export >= 2x faster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_bench_common import aggregates, best_of, generate, in_turns, library_loop, load_average  # noqa: E402

from kafkalog.archive.discovery import discover_segments  # noqa: E402


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
            out["load"].append(load_average())
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
                    df = spark.read.format("kafkalog").option("metricsDir", str(mdir))
                    if flt is not None:  # the range option prunes; a filter() is not pushed down
                        df = df.option("startingOffsets", str(flt))
                    df = df.load(scan_roots)
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


#: the DataSource reads the scan section times: (label, user-specified schema or None, options, aggregate)
SCAN_READS = [
    ("full schema", None, {}, "count+sum"),
    ("full schema, minPartitions=8", None, {"minPartitions": "8"}, "count+sum"),
    ("schema 'value binary'", "value binary", {}, "count+sum"),
    ("schema 'offset long, value binary'", "offset long, value binary", {}, "count+sum"),
    ("schema 'offset long'", "offset long", {}, "count"),
    ("full schema", None, {}, "count"),
]


#: user-specified schemas the Arrow floor is measured with (None: the full schema)
FLOOR_SCHEMAS = [None, "offset long, value binary"]


def _floor_source():
    """A Python DataSource that only hands Spark Arrow batches already built (memory-mapped IPC files, one per
    input partition): the least any Python DataSource can cost in this Spark. Defined here, in ``__main__``, so
    cloudpickle ships it to the Python workers by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ArrowFloorReader(DataSourceReader):
        def __init__(self, files: list[str]) -> None:
            self.files = files

        def partitions(self):
            return [InputPartition(f) for f in self.files]

        def read(self, partition):
            import pyarrow as pa

            with pa.memory_map(partition.value) as src:
                reader = pa.ipc.open_file(src)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class ArrowFloorSource(DataSource):
        # Spark plans every Python DataSource in workers of PySpark's own daemon: like kafkalog's DataSource, the
        # floor quiets their exit on a socket the JVM closed (kafkalog/spark/daemon.py), or the bench's output
        # would show the BrokenPipeError tracebacks the library's commands no longer print.
        def __init__(self, options) -> None:
            from kafkalog.spark.daemon import quiet_stock_daemon

            quiet_stock_daemon()
            super().__init__(options)

        @classmethod
        def name(cls) -> str:
            return "kafkalog_arrow_floor"

        def schema(self):
            from kafkalog.spark.datasource import SCHEMA

            return SCHEMA

        def reader(self, schema):
            from kafkalog.spark.daemon import quiet_stock_daemon

            quiet_stock_daemon()
            return ArrowFloorReader(json.loads(self.options["files"]))

    return ArrowFloorSource


def _floor_files(scan_roots: list[str], schema, workdir: Path, parallelism: int) -> list[str]:
    """Our reader's own Arrow batches for ``schema``, one IPC file per input partition it plans."""
    import pyarrow as pa

    from kafkalog.spark.datasource import KafkaLogReader

    reader = KafkaLogReader({"paths": json.dumps(scan_roots)}, schema, parallelism)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    files = []
    for i, part in enumerate(reader.partitions()):
        path = workdir / f"part-{i}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, reader.out_schema) as w:
            for batch in reader.read(part):
                w.write_batch(batch)
        files.append(str(path))
    return files


def scan_section(scan_roots: list[str], parquet_dir: Path, rounds: int) -> None:
    """DataSource on local[1] (full schema and user-specified schemas) vs the in-process columnar rate vs Spark's
    Parquet scan of the same records; the tasks' own Python time (``scan_seconds``) and a one-record query of the
    same plan (Spark's fixed cost) split each DataSource time."""
    import pyarrow.compute as pc

    from kafkalog.records import iter_record_columns
    from kafkalog.spark import get_session, register
    from kafkalog.spark.datasource import KafkaLogReader, read_scan_metrics

    items = discover_segments(scan_roots)
    load_start = load_average()

    def columnar(columns=None) -> tuple[int, int]:
        n = v = 0
        for item in items:
            reader = iter_record_columns(item.path, max_records=8192)
            for chunk in reader:
                t = chunk.to_arrow(columns)
                n += t.num_rows
                v += int(pc.sum(pc.binary_length(t["value"])).as_py() or 0)
            reader.close()
        return n, v

    c_s, (c_n, c_v) = best_of(columnar, rounds)
    cv_s, _ = best_of(lambda: columnar(["value"]), rounds)
    spark = get_session("local[1]", "bench-scan")
    register(spark)
    results = []
    try:
        ds = spark.read.format("kafkalog").load(scan_roots)
        aggregates(ds)  # warm: workers, imports
        for label, schema, options, agg in SCAN_READS:
            mdir = parquet_dir.parent / "scan-metrics"
            r = spark.read.format("kafkalog").options(**options).option("metricsDir", str(mdir))
            t = time.perf_counter()
            df = (r.schema(schema) if schema else r).load(scan_roots)  # built once, like the Parquet DataFrame
            load_s = time.perf_counter() - t

            def run(df=df, agg=agg, mdir=mdir):
                shutil.rmtree(mdir, ignore_errors=True)
                if agg == "count":
                    return int(df.selectExpr("count(*) AS n").collect()[0].n), None, read_scan_metrics(str(mdir))
                n, v = aggregates(df)
                return n, v, read_scan_metrics(str(mdir))

            run()
            s, (n, v, m) = best_of(run, rounds)
            assert n == c_n and v in (None, c_v), (label, n, v)
            # the same plan returning one record per partition dir: planning, job and task start-up, no data
            # (a new Dataset each time: collecting one twice reuses its finished shuffle stage)
            tiny_s = None
            if schema is None or "offset" in schema:
                tiny_s, _ = best_of(lambda df=df: df.filter("offset < 1").selectExpr("count(*)").collect(), rounds)
            opts = {"paths": json.dumps(scan_roots), **options}
            tasks = len(KafkaLogReader(opts, None, spark.sparkContext.defaultParallelism).partitions())
            results.append((label, agg, s, m["scan_seconds"], tiny_s, tasks, load_s))
        spark.dataSource.register(_floor_source())
        floors = []
        for ddl in FLOOR_SCHEMAS:
            struct = spark.createDataFrame([], ddl).schema if ddl else None
            files = _floor_files(scan_roots, struct, parquet_dir.parent / "arrow-floor",
                                 spark.sparkContext.defaultParallelism)  # fmt: skip
            r = spark.read.format("kafkalog_arrow_floor").option("files", json.dumps(files))
            fdf = (r.schema(ddl) if ddl else r).load()
            o = spark.read.format("kafkalog")
            odf = (o.schema(ddl) if ddl else o).load(scan_roots)
            assert aggregates(fdf) == aggregates(odf) == (c_n, c_v), ddl
            # ours and the floor in turns, so the JVM's warm-up and load bursts fall on both alike
            f_s = o_s = float("inf")
            for _ in range(rounds):
                o_s = min(o_s, best_of(lambda odf=odf: aggregates(odf), 1)[0])
                f_s = min(f_s, best_of(lambda fdf=fdf: aggregates(fdf), 1)[0])
            floors.append((ddl or "full schema", f_s, o_s, len(files)))
        shutil.rmtree(parquet_dir, ignore_errors=True)
        ds.write.parquet(str(parquet_dir))
        pq = spark.read.parquet(str(parquet_dir))
        aggregates(pq)
        p_s, (p_n, p_v) = best_of(lambda: aggregates(pq), rounds)
        pcount_s, _ = best_of(lambda: pq.count(), rounds)
        ptiny_s, _ = best_of(lambda: pq.filter("offset < 1").selectExpr("count(*)").collect(), rounds)  # new each time
    finally:
        spark.stop()
    assert c_n == p_n and c_v == p_v, (c_n, p_n, c_v, p_v)
    print(f"scan: {c_n} records, {c_v / 1e6:.1f} MB of values, {len(items)} segments; load {load_start:.2f} at the "
          f"start, {load_average():.2f} at the end (best of {rounds})")
    print(f"  in-process columnar (iter_record_columns + to_arrow + sum): {c_n / c_s / 1e6:.2f}M records/s "
          f"({c_s:.3f}s); to_arrow(['value']) only: {c_n / cv_s / 1e6:.2f}M records/s ({cv_s:.3f}s)")
    print(f"  Parquet local[1]: count+sum(length(value)) {p_n / p_s / 1e6:.2f}M rows/s ({p_s:.3f}s); count "
          f"{pcount_s:.3f}s; one-record query {ptiny_s:.3f}s")
    print("  Arrow floor local[1] (a Python DataSource yielding our own Arrow batches from memory-mapped files, no "
          "decoding): what Spark's Python DataSource path costs by itself")
    for label, f_s, o_s, parts in floors:
        print(f"    {label:<36} count+sum  {c_n / f_s / 1e6:5.2f}M rows/s ({f_s:.3f}s, {parts} tasks): "
              f"{c_s / f_s:4.0%} of columnar, {p_s / f_s:.2f}x Parquet count+sum; the floor minus Parquet "
              f"{(f_s - p_s) * 1e9 / c_n:+.0f} ns/row; the DataSource in turns with it {o_s:.3f}s "
              f"({o_s / f_s:.2f}x the floor)")
    print("  DataSource local[1] (tasks' Python time = scan_seconds; fixed = the same read with offset < 1):")
    for label, agg, s, py, tiny_s, parts, load_s in results:
        ref = p_s if agg == "count+sum" else pcount_s
        fixed = f"{tiny_s:.3f}s" if tiny_s is not None else "n/a"
        print(f"    {label:<36} {agg:<9} {c_n / s / 1e6:5.2f}M rows/s ({s:.3f}s, {parts} tasks): "
              f"{c_s / s:4.0%} of columnar (>= 50%), {ref / s:.2f}x Parquet {agg} (>= 1); python {py:.3f}s, "
              f"fixed {fixed}, rest {s - py - (tiny_s or 0):.3f}s; load() {load_s:.3f}s")


def _two_jobs(spark, roots: list[str], options: dict | None, rounds: int) -> tuple[float, float, int]:
    """(best validation seconds, best DataSource full-scan seconds, rows) for ``roots``."""
    from kafkalog.spark import register, validate_archive

    register(spark)

    def validate():
        rows = validate_archive(spark, roots, options=options).select("status").collect()
        assert rows and all(r.status == "ok" for r in rows)
        return len(rows)

    reader = spark.read.format("kafkalog").options(**(options or {}))
    validate()
    aggregates(reader.load(roots))
    v_s, _ = best_of(validate, rounds)
    d_s, (n, _) = best_of(lambda: aggregates(reader.load(roots)), rounds)
    return v_s, d_s, n


def remote_section(root: str, scan_roots: list[str], rounds: int) -> None:
    """Validation and DataSource throughput from moto's S3 server vs local disk (local[2], same run)."""
    from kafkalog.spark import get_session
    from tests.s3server import MotoServer, upload_tree

    total = sum(max(i.size_bytes, 0) for i in discover_segments(scan_roots))
    server = MotoServer().start()
    try:
        client = server.client()
        t = time.perf_counter()
        for r in scan_roots:
            upload_tree(client, Path(r), "bench", f"logdir/{os.path.basename(r)}")
        print(f"remote: uploaded {total / 1e6:.1f} MB to moto in {time.perf_counter() - t:.1f}s; load {load_average():.2f}")
        urls = [f"s3://bench/logdir/{os.path.basename(r)}" for r in scan_roots]
        spark = get_session("local[2]", "bench-remote")
        try:
            lv, ld, n = _two_jobs(spark, scan_roots, None, rounds)
            rv, rd, rn = _two_jobs(spark, urls, server.options, rounds)
        finally:
            spark.stop()
    finally:
        server.stop()
    assert n == rn
    print(f"  validation local[2]: local disk {total / lv / 1e6:.1f} MB/s ({lv:.2f}s), S3 (moto) "
          f"{total / rv / 1e6:.1f} MB/s ({rv:.2f}s): S3 / local {lv / rv:.2f}")
    print(f"  DataSource full scan local[2]: local disk {n / ld:.0f} rows/s ({ld:.2f}s), S3 (moto) {n / rd:.0f} "
          f"rows/s ({rd:.2f}s): S3 / local {ld / rd:.2f}")


def big_remote_section(workdir: Path, rounds: int, mib: int) -> None:
    """One big segment from moto's S3 server on local[2]: read whole (one task) against split in two byte ranges
    (``maxPartitionBytes`` half its size and 1 MiB), count + sum(length(value)) in turns, best of ``rounds`` after a
    warm-up each; and the driver's planning time of each (the split one fetches the ``.index`` and a batch)."""
    from kafkalog.spark import get_session, register
    from kafkalog.spark.datasource import KafkaLogReader
    from tests.s3server import MotoServer, upload_tree

    shutil.rmtree(workdir, ignore_errors=True)
    size, _ = generate(workdir, 1, 1, mib << 20, "random")
    server = MotoServer().start()
    try:
        upload_tree(server.client(), workdir / "logdir", "bench", "big")
        url = "s3://bench/big/bench-0"
        reads = {"whole": {}, "split": {"maxPartitionBytes": str(size // 2 + (1 << 20))}}  # two ranges
        plan: dict[str, float] = {}
        for name, opts in reads.items():
            reader = KafkaLogReader({"path": url, **server.options, **opts})
            plan[name], _ = best_of(reader.partitions, rounds)
        spark = get_session("local[2]", "bench-bigremote")
        register(spark)
        try:
            frames = {name: spark.read.format("kafkalog").options(**server.options, **opts).load(url)
                      for name, opts in reads.items()}  # fmt: skip
            results = {name: aggregates(df) for name, df in frames.items()}  # warm-up
            assert results["whole"] == results["split"], results
            best, tasks = in_turns(frames, rounds)
        finally:
            spark.stop()
    finally:
        server.stop()
    print(f"big remote segment, {size / 1e6:.1f} MB from moto, local[2], {results['whole'][0]} records; "
          f"load {load_average():.2f}")
    for name in reads:
        print(f"  {name}: {best[name]:.2f}s ({tasks[name]} tasks), planning {plan[name] * 1000:.0f} ms")
    print(f"  split / whole: {best['whole'] / best['split']:.2f}x faster")


def cluster_section(scan_roots: list[str], workdir: Path, rounds: int) -> None:
    """The same two jobs on a 2-worker standalone cluster vs local[2]."""
    from kafkalog.spark import get_session
    from tests.spark_cluster import StandaloneCluster

    total = sum(max(i.size_bytes, 0) for i in discover_segments(scan_roots))
    spark = get_session("local[2]", "bench-local2")
    try:
        lv, ld, n = _two_jobs(spark, scan_roots, None, rounds)
    finally:
        spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = StandaloneCluster(workdir, sys.executable).start()
    try:
        spark = get_session(cluster.url, "bench-cluster", conf=cluster.session_conf())
        try:
            cv, cd, cn = _two_jobs(spark, scan_roots, None, rounds)
        finally:
            spark.stop()
    finally:
        cluster.stop()
    assert n == cn
    print(f"cluster (2 workers x 1 core) vs local[2], {total / 1e6:.1f} MB; load {load_average():.2f}")
    print(f"  validation: local[2] {total / lv / 1e6:.1f} MB/s ({lv:.2f}s), cluster {total / cv / 1e6:.1f} MB/s "
          f"({cv:.2f}s): cluster / local {lv / cv:.2f}")
    print(f"  DataSource full scan: local[2] {n / ld:.0f} rows/s ({ld:.2f}s), cluster {n / cd:.0f} rows/s "
          f"({cd:.2f}s): cluster / local {ld / cd:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--segments", type=int, default=5)
    ap.add_argument("--segment-kib", type=int, default=1024)
    ap.add_argument("--scan-partitions", type=int, default=10, help="partition dirs the DataSource scan reads")
    ap.add_argument("--rounds", type=int, default=3, help="timed validation jobs per master (best is reported)")
    ap.add_argument("--sections", default="classic",
                    help="comma list of classic, scan, remote, bigremote, cluster, export, tiny")
    ap.add_argument("--big-mib", type=int, default=64, help="the bigremote section's segment size")
    ap.add_argument("--values", choices=("repeated", "random"), default="repeated",
                    help="record values: 64 distinct ones (default) or 180 random bytes each")
    ap.add_argument(
        "--dir", default=None, help="where to generate (default: a temp dir, removed afterwards); kept and reused"
    )
    args = ap.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kafkalog-bench-"))
    done = base / "archive" / f"done-{args.partitions}x{args.segments}x{args.segment_kib}-{args.values}"
    try:
        t = time.perf_counter()
        if done.exists():
            total, batches = (int(x) for x in done.read_text().split())
            how = "reused"
        else:
            shutil.rmtree(base / "archive", ignore_errors=True)
            total, batches = generate(base / "archive", args.partitions, args.segments, args.segment_kib * 1024,
                                      args.values)
            done.write_text(f"{total} {batches}")
            how = f"generated in {time.perf_counter() - t:.1f}s"
        n_seg = args.partitions * args.segments
        print(f"archive: {n_seg} segments, {total / 1e9:.3f} GB, {batches} batches ({how}); {os.cpu_count()} CPUs")
        root = str(base / "archive" / "logdir")
        library_loop(discover_segments(root))  # warm the page cache
        records_per_partition = batches // args.partitions * 16
        offset_filter = int(records_per_partition * 0.9)
        scan_roots = [os.path.join(root, f"bench-{p}") for p in range(min(args.scan_partitions, args.partitions))]
        sections = {x.strip() for x in args.sections.split(",") if x.strip()}
        if "scan" in sections:
            scan_section(scan_roots, base / "parquet", args.rounds)
        if "remote" in sections:
            remote_section(root, scan_roots, args.rounds)
        if "bigremote" in sections:
            big_remote_section(base / "bigremote", args.rounds, args.big_mib)
        if "cluster" in sections:
            cluster_section(scan_roots, base / "cluster", args.rounds)
        if "export" in sections or "tiny" in sections:
            from bench_spark_export import export_section, tiny_section

        if "export" in sections:
            export_section(scan_roots, base / "export", args.rounds)
        if "tiny" in sections:
            tiny_section(base / "tiny", args.rounds)
        if "classic" not in sections:
            return 0
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

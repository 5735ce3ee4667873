"""Validate a whole archive of Kafka partition logs with Spark: one row per segment, one per partition.

This module only distributes: the driver lists file names (:func:`kafkalog.archive.discovery.discover_segments`), segments
are grouped into tasks of similar size (a segment is never split, a partition dir may span tasks) and each is checked
on the executors with :func:`kafkalog.verify.verify_segment`; partition rows come from
:func:`kafkalog.verify.verify_partition`. The checks, the result types, the summary and the exit code are the
library's (:mod:`kafkalog.verify`), shared with ``kafkalog verify``.

Run as ``python -m kafkalog.spark.validate ROOT... --out DIR [--master URL]`` (or via ``spark-submit``); the CLI's
``kafkalog spark validate`` calls :func:`run_validation`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem, discover_segments
from kafkalog.archive.storage import parse_storage_options, storage_options
from kafkalog.archive.tiered import as_rsm_config
from kafkalog.errors import InvalidArgumentError, KafkaLogError
from kafkalog.spark.daemon import quiet_stock_daemon
from kafkalog.spark.timings import PhaseTimer
from kafkalog.spark.worker_gc import freeze_worker
from kafkalog.verify import PARTITION_FIELDS, SEGMENT_FIELDS, exit_code, print_error, summarize, summary_fields
from kafkalog.verify.findings import row_value
from kafkalog.verify.remote import verify_partition_at, verify_segment_at

__all__ = [
    "PARTITION_SCHEMA",
    "SEGMENT_SCHEMA",
    "continuity_rows",
    "group_for_tasks",
    "main",
    "partition_continuity",
    "reports_to_arrow",
    "run_validation",
    "validate_archive",
    "validate_items",
]

SEGMENT_SCHEMA = (
    "path string, partition_dir string, topic string, partition int, base_offset long, layout string, "
    "dir_state string, first_offset long, last_offset long, batch_count long, record_count long, size_bytes long, "
    "valid_bytes long, invalid_bytes long, min_timestamp long, max_timestamp long, codecs array<string>, "
    "magics array<int>, index_status string, index_error string, status string, "
    "corrupt_ranges array<struct<position:long,size:long>>, error string, log_status string"
)

PARTITION_SCHEMA = (
    "partition_dir string, topic string, partition int, segment_count long, corrupt_segments long, "
    "log_start_offset long, log_end_offset long, gaps array<struct<from_offset:long,to_offset:long>>, "
    "overlaps array<struct<segment_base_offset:long,previous_last_offset:long>>, "
    "checkpoint_recovery_point long, checkpoint_log_start_offset long, checkpoint_high_watermark long, "
    "status string, problems array<string>"
)
# The two DDLs type the library's result rows: column names and order are ``kafkalog.verify.SEGMENT_FIELDS`` and
# ``PARTITION_FIELDS`` (``SegmentReport.to_row()``, ``PartitionReport.to_row()``); tests/verify/test_verify.py checks it.


def _segment_arrow_schema():
    """SEGMENT_SCHEMA as an Arrow schema (built once per process)."""
    global _ARROW_SCHEMA
    if _ARROW_SCHEMA is None:
        _ARROW_SCHEMA = arrow_schema(SEGMENT_SCHEMA)
    return _ARROW_SCHEMA


_ARROW_SCHEMA = None


def arrow_schema(ddl: str):
    """SEGMENT_SCHEMA or PARTITION_SCHEMA as the Arrow schema Spark gives the same DDL (``to_arrow_schema``), built
    without the JVM's parser: their types are ``string``, ``int``, ``long``, ``array<T>`` and ``struct<a:T,...>``,
    and no type holds ``", "``."""
    import pyarrow as pa

    def typ(t: str):
        if t.startswith("array<"):
            return pa.list_(typ(t[6:-1]))
        if t.startswith("struct<"):
            return pa.struct([(n, typ(v)) for n, v in (f.split(":", 1) for f in t[7:-1].split(","))])
        return {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}[t]

    return pa.schema([(name, typ(t)) for name, t in (c.split(" ", 1) for c in ddl.split(", "))])


def reports_to_arrow(reports: Sequence) -> Any:
    """``SegmentReport``s as one Arrow ``RecordBatch`` (columns = SEGMENT_SCHEMA): the job returns its results
    columnar, so the JVM takes them without per-row Python -> JVM conversion. Built by Arrow's JSON reader with
    the schema given, not ``pa.array``: that imports pandas on its first call (pyarrow checks each input for a
    pandas object), ~0.4 s and ~30,000 objects in every fresh validation worker that never uses it."""
    import pyarrow as pa

    schema = _segment_arrow_schema()
    if not reports:
        return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    import pyarrow.json as pj

    ranges = SEGMENT_FIELDS.index("corrupt_ranges")
    lines = []
    for r in reports:
        row = list(r.to_row())
        row[ranges] = [{"position": p, "size": s} for p, s in row[ranges]]
        lines.append(json.dumps(dict(zip(SEGMENT_FIELDS, row, strict=True)), ensure_ascii=False))
    data = ("\n".join(lines) + "\n").encode()
    opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=max(len(data), 1 << 20)),
                         parse_options=opts)  # fmt: skip
    return table.combine_chunks().to_batches()[0]


def _check_tasks(index_check: bool, options: dict[str, str], deep: bool = False, rsm: Any = None,
                 plans: Any = (), clock: Any = None):  # fmt: skip
    """The mapInArrow function: its input rows are task numbers (column ``id``), its output the reports, one
    Arrow batch per task. ``plans`` is a Spark broadcast (or, outside Spark, a list) of one pickled
    ``list[SegmentItem]`` per task: shipped once per executor, not with every task, and a task unpickles its own
    segments, not the whole archive's. Remote segments are fetched by the executor running the task
    (:func:`kafkalog.verify.remote.verify_segment_at`). ``clock``: an accumulator (:mod:`kafkalog.spark.task_clock`)
    the tasks report their times to."""

    def run(batches):
        tasks = (task for batch in batches for task in batch.column(0).to_pylist())
        yield from _run_tasks(tasks, index_check, options, deep, rsm, plans, clock)

    return run


def _check_rows(index_check: bool, options: dict[str, str], deep: bool = False, rsm: Any = None,
                plans: Any = (), clock: Any = None):  # fmt: skip
    """:func:`_check_tasks` for an RDD of task numbers (``sc.parallelize``): the same checks and Arrow batches,
    returned as the ``Row``s the DataFrame's ``collect()`` gives. :func:`run_validation` takes this path when it
    collects the rows anyway: an RDD job needs none of Spark SQL (analysis, code generation, the JVM's Arrow
    columns), which a fresh driver JVM would load and compile for the one job."""

    def run(tasks):
        from pyspark.sql import Row

        for batch in _run_tasks(tasks, index_check, options, deep, rsm, plans, clock):
            for d in batch.to_pylist():
                if d["corrupt_ranges"] is not None:
                    d["corrupt_ranges"] = [Row(**c) for c in d["corrupt_ranges"]]
                yield Row(**d)

    return run


def _run_tasks(tasks, index_check: bool, options: dict[str, str], deep: bool, rsm: Any, plans: Any, clock: Any):
    """Check each task's segments; one Arrow batch (SEGMENT_SCHEMA) of reports per task."""
    report = None
    if clock is not None:
        from kafkalog.spark.task_clock import task_started

        report = task_started()
    freeze_worker()
    quiet_stock_daemon()  # a cluster's task workers run PySpark's own daemon
    groups = getattr(plans, "value", plans)
    for task in tasks:
        t0 = time.perf_counter()
        reports = [verify_segment_at(item, index_check=index_check, options=options, deep=deep, rsm=rsm)
                   for item in pickle.loads(groups[task])]  # fmt: skip
        t1 = time.perf_counter()
        result = reports_to_arrow(reports)
        if report is not None:
            report["work"] += t1 - t0
            report["encode"] += time.perf_counter() - t1
        yield result
    if report is not None:
        report["last"] = time.time()
        clock.add(report)


def task_plans(spark, groups: list[list[SegmentItem]]):
    """(a DataFrame of one row per Spark partition, column ``id`` = the task's number; the broadcast of each
    task's pickled segment list): the plans travel as a broadcast, read once per executor, so the tasks' input
    is a plain range (no Python pass to build it, as ``createDataFrame`` of a Python RDD would take)."""
    plans = spark.sparkContext.broadcast([pickle.dumps(g, protocol=pickle.HIGHEST_PROTOCOL) for g in groups])
    return spark.range(0, len(groups), 1, len(groups)), plans


def check_rdd(spark, items: list[SegmentItem], *, index_check: bool = True, tasks_per_core: int = 2,
              options: dict[str, str] | None = None, deep: bool = False, rsm: Any = None, clock: Any = None):  # fmt: skip
    """:func:`validate_items` as an RDD of ``Row``s (SEGMENT_SCHEMA's columns) instead of a DataFrame: the same
    tasks (:func:`_n_tasks`, :func:`group_for_tasks`, the plans' broadcast) and checks, for a caller that collects
    the rows (:func:`run_validation`)."""
    sc = spark.sparkContext
    groups = group_for_tasks(items, _n_tasks(items, sc.defaultParallelism, tasks_per_core))
    plans = sc.broadcast([pickle.dumps(g, protocol=pickle.HIGHEST_PROTOCOL) for g in groups])
    check = _check_rows(index_check, storage_options(options), deep, as_rsm_config(rsm), plans, clock)
    return sc.parallelize(range(len(groups)), max(1, len(groups))).mapPartitions(check)


def group_for_tasks(items: list[SegmentItem], n_groups: int) -> list[list[SegmentItem]]:
    """Split segments into ``n_groups`` groups of similar total size (longest-processing-time-first).

    Segments stay the unit of work (a group never splits one, a dir may span groups); grouping only amortises
    per-task overhead when an archive has many small segments.
    """
    n_groups = max(1, min(n_groups, len(items)))
    bins: list[list[SegmentItem]] = [[] for _ in range(n_groups)]
    loads = [0] * n_groups
    for item in sorted(items, key=lambda s: -max(s.size_bytes, 0)):
        i = loads.index(min(loads))
        bins[i].append(item)
        loads[i] += max(item.size_bytes, 0) + _SEGMENT_COST
    return [b for b in bins if b]


#: a fixed cost per segment in bytes-equivalent (open, mmap, three index files): ~0.1 ms at ~1-2 GB/s
_SEGMENT_COST = 128 << 10
#: the most work one task gets (bytes-equivalent): ~1-2 s of checking at library speed, so a retried task
#: repeats little while the ~50-100 ms a Python task costs in Spark stays a few percent
MAX_TASK_BYTES = 2 << 30
#: the least work a task gets before a core takes a second one: checking runs at ~2-3 GB/s per core, so 256 MiB
#: is ~0.1 s, about twice what a Python task costs Spark (scheduling, the worker's round trip, the Arrow result)
MIN_TASK_BYTES = 256 << 20


def _n_tasks(items: Sequence[SegmentItem], parallelism: int, tasks_per_core: int = 2) -> int:
    """Tasks sized by bytes: one per core at least (every core works), up to ``tasks_per_core`` per core (2: evens
    out a slow core or a skewed segment) only when each still gets MIN_TASK_BYTES, more when tasks would exceed
    MAX_TASK_BYTES; never more tasks than segments."""
    total = sum(max(i.size_bytes, 0) + _SEGMENT_COST for i in items)
    n = min(parallelism * tasks_per_core, math.ceil(total / MIN_TASK_BYTES))
    n = max(n, parallelism, math.ceil(total / MAX_TASK_BYTES))
    return max(1, min(len(items), n))


def validate_archive(
    spark, roots, *, index_check: bool = True, tasks_per_core: int = 2, options: dict[str, str] | None = None,
    deep: bool = False, rsm: Any = None,
):  # fmt: skip
    """A DataFrame with one row per segment under ``roots`` (columns: SEGMENT_SCHEMA); ``rsm``: the
    RemoteStorageManager configuration (file or :class:`kafkalog.archive.tiered.RsmConfig`) of Aiven tiered objects.

    ``roots`` may be local paths or URLs (``s3://``, ``gs://``, ``hdfs://``; see :mod:`kafkalog.archive.storage`);
    ``options`` are storage options (credentials, endpoint, timeouts) that override the AWS environment.
    ``deep`` decodes every record too (:func:`kafkalog.verify.record_check.check_records`: counts and offsets against
    each batch header, records that do not decode).

    ``status`` is ``kafkalog verify``'s verdict on the segment (:func:`kafkalog.verify.segment_status`): ``ok``,
    ``warning`` (a stale or missing index, which Kafka rebuilds), ``corrupt`` (bad bytes, see
    ``corrupt_ranges``/``error``, or a corrupt index) or ``unreadable`` (verify's ``error``); ``log_status`` is the
    ``.log``'s alone; ``index_status`` is ``ok``, ``missing``, ``stale``, ``corrupt``, ``unreadable`` or
    ``not_checked``. The DataFrame is lazy: each action re-runs the checks, so
    cache it when you use it twice.

    Segments are packed by size into one task per core, up to ``tasks_per_core`` per core for big archives
    (:func:`_n_tasks`; one Spark task per group, :func:`task_plans`, through ``mapInArrow``), and each task returns
    its reports as one Arrow batch.
    """
    opts = storage_options(options)
    rsm = as_rsm_config(rsm)
    items = discover_segments(roots, options=opts, key_prefix=rsm.key_prefix if rsm is not None else "")
    return validate_items(spark, items, index_check=index_check,
                          tasks_per_core=tasks_per_core, options=opts, deep=deep, rsm=rsm)  # fmt: skip


def validate_items(
    spark, items: list[SegmentItem], *, index_check: bool = True, tasks_per_core: int = 2,
    options: dict[str, str] | None = None, deep: bool = False, rsm: Any = None, clock: Any = None,
):  # fmt: skip
    """:func:`validate_archive` over segments already discovered (the driver lists once); ``clock``: an
    accumulator the tasks report their times to (:func:`kafkalog.spark.task_clock.new_clock`)."""
    opts = storage_options(options)
    if not items:
        return spark.createDataFrame([], SEGMENT_SCHEMA)
    groups = group_for_tasks(items, _n_tasks(items, spark.sparkContext.defaultParallelism, tasks_per_core))
    tasks, plans = task_plans(spark, groups)
    return tasks.mapInArrow(_check_tasks(index_check, opts, deep, as_rsm_config(rsm), plans, clock), SEGMENT_SCHEMA)


def partition_continuity(df, *, options: dict[str, str] | None = None):
    """One row per partition dir (columns: PARTITION_SCHEMA) from :func:`validate_archive`'s DataFrame: each
    group of segment rows goes through :func:`kafkalog.verify.verify_partition` (gaps reported, overlaps and
    checkpoints beyond the data are errors); remote log dirs' checkpoints are fetched with ``options``."""
    cols = ["partition_dir", "topic", "partition", "base_offset", "first_offset", "last_offset", "status",
            "index_status"]
    return df.select(*cols).groupBy("partition_dir").applyInPandas(_continuity(storage_options(options)), PARTITION_SCHEMA)


#: partition dirs up to which ``run_validation`` checks continuity on the driver, over the rows it collected: a
#: small archive's checks take less than the Spark job they replace (a shuffle, then a pandas worker per core)
DRIVER_CONTINUITY_MAX_DIRS = 256
_CONTINUITY_COLUMNS = ("partition_dir", "topic", "partition", "base_offset", "first_offset", "last_offset", "status",
                       "index_status")  # fmt: skip


def _continuity_on_driver(items: Sequence[SegmentItem]) -> bool:
    """Local partition dirs, not too many of them: their checks read a few small files each, which the driver sees
    (it listed them). Remote dirs fetch their checkpoints over the network, so many of them go to the executors."""
    dirs = {i.partition_dir for i in items}
    return len(dirs) <= DRIVER_CONTINUITY_MAX_DIRS and not any(storage.is_remote(d) for d in dirs)


def continuity_rows(seg_rows: Sequence, *, options: dict[str, str] | None = None) -> list[dict]:
    """:func:`partition_continuity` on the driver: one row per partition dir (a dict of PARTITION_SCHEMA's
    columns, in partition dir order) from segment rows already collected, through the same
    :func:`kafkalog.verify.remote.verify_partition_at`."""
    opts = storage_options(options)
    by_dir: dict[str, list[dict]] = {}
    for r in seg_rows:
        row = {c: row_value(r, c) for c in _CONTINUITY_COLUMNS}
        by_dir.setdefault(row["partition_dir"], []).append(row)
    out = []
    for pdir in sorted(by_dir):
        rep = verify_partition_at(by_dir[pdir], opts).to_dict()
        rep["gaps"] = [{"from_offset": a, "to_offset": b} for a, b in rep["gaps"]]
        rep["overlaps"] = [{"segment_base_offset": a, "previous_last_offset": b} for a, b in rep["overlaps"]]
        out.append(rep)
    return out


def _continuity(options: dict[str, str]):
    def run(pdf):
        import pandas as pd

        rows = pdf.sort_values("base_offset").to_dict("records")
        return pd.DataFrame([verify_partition_at(rows, options).to_row()], columns=list(PARTITION_FIELDS))

    return run


def run_validation(
    roots: str | Sequence[str],
    out: str,
    master: str | None = None,
    *,
    index_check: bool = True,
    options: dict[str, str] | None = None,
    report_format: str = "parquet",
    deep: bool = False,
    json_mode: bool = False,
    rsm: Any = None,
    timings: bool = False,
) -> int:
    """Validate ``roots``, write ``out/segments.<fmt>``, ``out/partitions.<fmt>`` and ``out/summary.txt``,
    print the summary (``json_mode``: as one ``{"type": "summary"}`` object, errors as ``{"type": "error"}``);
    return 0 (all ok), 1 (corruption found) or 2 (usage or I/O error, or a root holding no segment).

    ``out`` may be a local dir (Spark writes the reports) or a URL (``s3://...``: written with pyarrow through
    :mod:`kafkalog.archive.storage`); ``report_format`` is ``parquet`` or ``json`` (JSON lines). The Spark UI shows the
    job group ``kafkalog-validate`` and one description per step. ``timings``: also print where the wall time went
    (:class:`kafkalog.spark.timings.PhaseTimer`; on stderr, or as ``"timings"`` in the JSON summary).
    """
    timer = PhaseTimer(since_process_start=True)
    if isinstance(roots, str):
        roots = [roots]
    if report_format not in ("parquet", "json"):
        bad = InvalidArgumentError(f"report format must be parquet or json, not {report_format!r}")
        return print_error(bad, json_mode=json_mode)
    opts = storage_options(options)
    try:
        rsm = as_rsm_config(rsm)  # the key files are read here, once, and travel with the tasks
        # fail fast on a bad root, before starting a JVM; a root with nothing to check is not a pass
        items = discover_segments(roots, options=opts, require=True,
                                  key_prefix=rsm.key_prefix if rsm is not None else "")  # fmt: skip
    except (KafkaLogError, OSError) as exc:
        return print_error(exc, json_mode=json_mode)
    timer.lap("plan")  # the driver lists the segments, once
    from pyspark.sql import SparkSession

    from kafkalog.spark.java import ensure_java
    from kafkalog.spark.session import get_session

    timer.lap("import_pyspark")
    ensure_java()
    timer.lap("java")
    had_session = SparkSession.getActiveSession() is not None
    spark = get_session(master, "kafkalog-validate")  # None: spark-submit's --master, spark-defaults, or local[*]
    timer.lap("session")
    sc = spark.sparkContext
    try:
        sc.setJobGroup("kafkalog-validate", f"kafkalog validate: {len(items)} segments under {', '.join(roots)}")
        sc.setJobDescription(f"kafkalog validate: check {len(items)} segments")
        on_driver = _continuity_on_driver(items)
        clock = None
        if timings:
            from kafkalog.spark.task_clock import new_clock

            clock = new_clock(sc)
        if on_driver:  # the rows come to the driver and stay there: an RDD job, none of Spark SQL
            seg_job = check_rdd(spark, items, index_check=index_check, options=opts, deep=deep, rsm=rsm,
                                clock=clock)  # fmt: skip
        else:
            seg_job = validate_items(spark, items, index_check=index_check, options=opts, deep=deep, rsm=rsm,
                                     clock=clock).cache()  # the continuity job reads the rows again  # fmt: skip
        timer.lap("check_plan")  # grouping, the plans' broadcast, the RDD or DataFrame
        submitted = time.time()
        seg_rows = seg_job.collect()
        if clock is not None:
            from kafkalog.spark.task_clock import job_phases

            timer.details("check_job", job_phases(clock.value, submitted, time.time(), sc.defaultParallelism))
        timer.lap("check_job")  # the session's first job: it also starts the Python worker daemon and workers
        sc.setJobDescription("kafkalog validate: partition continuity")
        if on_driver:
            part_rows = continuity_rows(seg_rows, options=opts)
            schemas = (arrow_schema(SEGMENT_SCHEMA), arrow_schema(PARTITION_SCHEMA))
        else:
            from pyspark.sql.pandas.types import to_arrow_schema

            part_df = partition_continuity(seg_job, options=opts).cache()
            part_rows = part_df.collect()
            schemas = (to_arrow_schema(seg_job.schema), to_arrow_schema(part_df.schema))
        timer.lap("continuity")
        sc.setJobDescription("kafkalog validate: write reports")
        text = summarize(seg_rows, part_rows)
        _write_reports(out, report_format, *schemas, seg_rows, part_rows, opts)
        storage.write_bytes(storage.join(out, "summary.txt"), text.encode("utf-8"), opts)
        timer.lap("reports")
    except OSError as exc:
        return print_error(exc, json_mode=json_mode)
    finally:
        sc.setJobDescription(None)
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # PySpark has no clearJobGroup
        if not had_session:
            spark.stop()
            timer.lap("stop")
    if json_mode:
        extra = {"timings": timer.as_dict()} if timings else {}
        sys.stdout.write(json.dumps({"type": "summary", **summary_fields(seg_rows, part_rows), "out": out,
                                     **extra}) + "\n")  # fmt: skip
    else:
        sys.stdout.write(text)
        if timings:
            sys.stderr.write("timings (seconds):\n" + timer.render())
    return exit_code(seg_rows, part_rows)


def _write_reports(out: str, fmt: str, seg_schema, part_schema, seg_rows: list, part_rows: list,
                   opts: dict[str, str]) -> None:  # fmt: skip
    """The collected rows, written by the driver with pyarrow: a local ``out`` gets ``segments.<fmt>/`` and
    ``partitions.<fmt>/`` dirs holding one ``part-00000.<fmt>`` each (what ``spark.read.parquet``/``json`` read),
    a URL one object each through :mod:`kafkalog.archive.storage`. Spark's own writer would have an executor write a local
    path on its host, so on a multi-host cluster the reports would not land where the user said."""
    local = not storage.is_remote(out)
    for name, schema, rows in (("segments", seg_schema, seg_rows), ("partitions", part_schema, part_rows)):
        data = _encode_rows(schema, rows, fmt)
        if local:
            target = os.path.join(storage.local_path(out), f"{name}.{fmt}")
            if os.path.isdir(target):
                shutil.rmtree(target)
            elif os.path.exists(target):
                os.remove(target)
            storage.write_bytes(os.path.join(target, f"part-00000.{fmt}"), data)
            storage.write_bytes(os.path.join(target, "_SUCCESS"), b"")
        else:
            storage.write_bytes(storage.join(out, f"{name}.{fmt}"), data, opts)


def _encode_rows(schema, rows: list, fmt: str) -> bytes:
    """Collected rows (pyspark Rows or dicts) as one Parquet file (types from the Arrow ``schema``) or as JSON
    lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dicts = [r if isinstance(r, dict) else r.asDict(recursive=True) for r in rows]
    if fmt == "json":
        return "".join(json.dumps(d, sort_keys=False) + "\n" for d in dicts).encode("utf-8")
    table = pa.Table.from_pylist(dicts, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kafkalog.spark.validate ROOT... --out DIR [--master URL] [--no-index-check] [--deep]
    [--format parquet|json] [--storage-option KEY=VALUE ...] [--timings]`` (also the ``spark-submit`` entry point)."""
    parser = argparse.ArgumentParser(prog="kafkalog spark validate", description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="log dir, partition dir, segment or tree of them")
    parser.add_argument("--out", required=True, help="dir or URL for segments/partitions reports and summary.txt")
    parser.add_argument("--master", default=None, help="Spark master URL (default: spark-submit's master, else local[*])")
    parser.add_argument("--no-index-check", action="store_true", help="skip the .index/.timeindex/.txnindex checks")
    parser.add_argument("--deep", action="store_true", help="also decode and check every record")
    parser.add_argument("--format", default="parquet", choices=["parquet", "json"], help="report format")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="storage option for remote URLs (endpoint_url, region, access_key, ...)")  # fmt: skip
    parser.add_argument("--rsm-config", default=None, metavar="FILE",
                        help="the broker's RemoteStorageManager configuration (Aiven tiered objects)")  # fmt: skip
    parser.add_argument("--timings", action="store_true", help="print where the wall time went, phase by phase")
    try:
        args = parser.parse_args(argv)
        opts = parse_storage_options(args.storage_option)
    except SystemExit as exc:
        return 2 if exc.code else 0
    except KafkaLogError as exc:
        return print_error(exc)
    return run_validation(
        args.roots, args.out, args.master, index_check=not args.no_index_check, options=opts,
        report_format=args.format, deep=args.deep, rsm=args.rsm_config, timings=args.timings,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

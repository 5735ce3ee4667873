"""Export archived partition logs to Parquet, written by the tasks themselves: ``export_archive``.

``spark.read.format("kafkalog").load(root).write.parquet(out)`` sends every record from the Python worker to the
JVM as Arrow, turns each into an ``UnsafeRow`` (pyspark's Python DataSource path is row-only), then Spark's Parquet
writer encodes them again. Here each task decodes its segments into the same Arrow batches the DataSource yields
(:meth:`kafkalog.spark.datasource.KafkaLogReader.read_segment`) and writes them with pyarrow, one Parquet file per
segment, under Hive-style ``topic=T/partition=P`` dirs; the job moves only the written files' paths and row counts
back to the driver. ``spark.read.parquet(out)`` reads the result with the DataSource's columns and types (the
``partition_by`` columns come from the dir names).

Planning is the DataSource's (:meth:`KafkaLogReader.partitions`: the same options, ranges, ``isolation``,
``onCorrupt``), and each task is sent only its own segments (a plan row per partition, as the validation job does).
"""

from __future__ import annotations

import json
import os
import pickle
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from kafkalog import storage
from kafkalog.errors import InvalidArgumentError

__all__ = ["export_archive"]

#: columns a Hive-style dir may name (constant per segment, so a file never spans two values)
PARTITION_COLUMNS = ("topic", "partition")


def export_archive(spark, roots: str | Sequence[str], out: str, *, partition_by: Sequence[str] = PARTITION_COLUMNS,
                   progress: Callable[[str], None] | None = None, **options: Any) -> list[str]:  # fmt: skip
    """Write every record under ``roots`` (paths or URLs) as Parquet under ``out`` (a local dir or a URL), one
    file per segment in ``partition_by`` dirs; return the files written. ``options`` are the DataSource's
    (``startingOffsets``, ``isolation``, ``onCorrupt``, storage options, ...); ``progress`` gets one line per step.
    """
    from kafkalog.spark.channel import driver_channel
    from kafkalog.spark.datasource import KafkaLogReader, full_schema
    from kafkalog.spark.validate import task_plans

    say = progress or (lambda _line: None)
    partition_by = tuple(partition_by)
    if any(c not in PARTITION_COLUMNS for c in partition_by) or len(set(partition_by)) != len(partition_by):
        raise InvalidArgumentError(f"partition_by may name {', '.join(PARTITION_COLUMNS)} (each once), "
                                   f"not {partition_by!r}")  # fmt: skip
    paths = [roots] if isinstance(roots, str) else list(roots)
    opts = {str(k): str(v) for k, v in options.items()}
    opts["paths"] = json.dumps(paths)
    opts.setdefault("minPartitions", str(max(1, spark.sparkContext.defaultParallelism)))
    channel = driver_channel(spark)
    reader = KafkaLogReader(opts, full_schema(), channel=channel.address if channel else None)
    started = time.perf_counter()
    groups = [g.segments for g in reader.partitions()]
    n_segments = sum(len(g) for g in groups)
    say(f"planned {n_segments} segments in {len(groups)} tasks ({time.perf_counter() - started:.1f} s)")
    if not groups:
        return []
    if not storage.is_remote(out):
        out = os.path.abspath(storage.local_path(out))
        os.makedirs(out, exist_ok=True)
    sc = spark.sparkContext
    sc.setJobDescription(f"kafkalog export: {n_segments} segments to {out}")
    started = time.perf_counter()
    try:
        rows = task_plans(spark, groups).mapInArrow(_write_tasks(reader, out, partition_by), "path string, rows long")
        written = rows.collect()
    finally:
        sc.setJobDescription(None)
    files = sorted(r.path for r in written if r.path)
    total = sum(r.rows for r in written)
    say(f"wrote {total} records in {len(files)} Parquet files under {out} ({time.perf_counter() - started:.1f} s)")
    return files


def _write_tasks(reader, out: str, partition_by: tuple[str, ...]):
    """The mapInArrow function: per plan row, each segment's batches into one Parquet file."""

    def run(batches):
        import pyarrow as pa

        from kafkalog.spark.worker_gc import freeze_worker_once

        freeze_worker_once()
        for batch in batches:
            for plan in batch.column("plan").to_pylist():
                paths, counts = [], []
                for segment in pickle.loads(plan):
                    path, n = _write_segment(reader, segment, out, partition_by)
                    paths.append(path)
                    counts.append(n)
                yield pa.RecordBatch.from_pydict({"path": pa.array(paths, pa.string()),
                                                  "rows": pa.array(counts, pa.int64())})  # fmt: skip

    return run


def _write_segment(reader, segment, out: str, partition_by: tuple[str, ...]) -> tuple[str | None, int]:
    """(file written, records) for one segment; no file for a segment with no records in range."""
    item = segment.item
    values = {"topic": item.topic, "partition": item.partition}
    subdir = "/".join(f"{c}={quote(str(values[c]), safe='')}" for c in partition_by)
    name = f"{subdir}/{item.base_offset:020d}-{uuid.uuid4().hex[:12]}.parquet" if subdir else \
        f"{item.topic}-{item.partition}-{item.base_offset:020d}-{uuid.uuid4().hex[:12]}.parquet"  # fmt: skip
    keep = [f.name for f in reader.out_schema if f.name not in partition_by]
    writer = None
    n = 0
    target = storage.join(out, name)
    try:
        for batch in reader.read_segment(segment):
            if not batch.num_rows:
                continue
            batch = batch.select(keep)
            if writer is None:
                writer = _open_writer(target, batch.schema, reader.storage)
            writer.write_batch(batch)
            n += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return (target if writer is not None else None), n


def _open_writer(target: str, schema, options: dict[str, str]):
    import pyarrow.parquet as pq

    if storage.is_remote(target):
        fs, path = storage.resolve(target, options)
        return pq.ParquetWriter(path, schema, filesystem=fs)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    return pq.ParquetWriter(target, schema)

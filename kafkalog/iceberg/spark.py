"""The decode and file writing of a sync in Spark tasks; the driver commits their files in one snapshot.

The driver plans as in one process (resume offsets, LSO, the segments holding new offsets), packs the segments into
tasks with the DataSource's own sizing (:func:`kafkalog.spark.datasource.pack_segments`: ~128 MiB per task, at
least the session's parallelism), and runs one Spark task per group through the export's job runner
(:func:`kafkalog.spark.export.run_job`: job group, progress from the status tracker, cancel on interrupt). Each
task runs :func:`kafkalog.iceberg.write.write_parts`: the DataSource's scan and pyiceberg's writer, with the table's
metadata and FileIO pickled from the driver, so executors need pyiceberg but no catalog access. Tasks hand back
pyiceberg ``DataFile`` objects (paths, partition values, column statistics); the driver appends them all in one
snapshot. A corrupt segment (``onCorrupt=fail``) is reported by its task rather than retried (corruption is
deterministic); the driver then deletes every file the job wrote and raises the decoder's error.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

from kafkalog.iceberg.write import TaskOutput, remove_files, write_parts

__all__ = ["write_on_spark"]


def _task(reader: Any, metadata: Any, io: Any):
    def run(element: tuple[int, Any]) -> bytes:
        from kafkalog.verify.findings import describe_error, one_line

        task, group = element
        started = time.perf_counter()
        try:
            out = write_parts(reader, group.segments, metadata, io)
            out.task_seconds = [time.perf_counter() - started]
        except Exception as exc:
            if describe_error(exc)[0] != "corrupt":
                raise  # I/O and the like: Spark retries the task
            return pickle.dumps({"task": task, "error": {"type": type(exc).__name__, "message": one_line(exc)}})
        return pickle.dumps({"task": task, "out": out})

    return run


def write_on_spark(spark: Any, master: str | None, reader: Any, parts: list[Any], table: Any,
                   on_progress: Any = None) -> TaskOutput:  # fmt: skip
    """Write the rows of ``parts`` (SegmentPartitions) as data files from Spark tasks; ``spark`` None: a session
    at ``master`` (default ``local[*]``) is started for the sync and stopped after it."""
    import kafkalog.spark as kafkalog_spark
    from kafkalog.spark.datasource import pack_segments
    from kafkalog.spark.export import raise_task_error, run_job

    own = spark is None
    if own:
        spark = kafkalog_spark.get_session(master or "local[*]", "kafkalog-iceberg")
    try:
        parallelism = max(1, int(spark.sparkContext.defaultParallelism))
        groups = pack_segments(parts, min_partitions=parallelism)
        fn = _task(reader, table.metadata, table.io)
        rows = run_job(spark, list(enumerate(groups)), fn, on_progress,
                        f"kafkalog iceberg sync: {len(parts)} segments")  # fmt: skip
    finally:
        if own:
            spark.stop()
    results = sorted((pickle.loads(r) for r in rows), key=lambda r: r["task"])
    total = TaskOutput()
    for r in results:
        if "out" in r:
            total.data_files += r["out"].data_files
            total.rows += r["out"].rows
            total.skipped += r["out"].skipped
            total.segments += r["out"].segments
            total.task_seconds += r["out"].task_seconds
    failed = [r["error"] for r in results if "error" in r]
    if failed:
        remove_files(table.io, total.data_files)
        raise_task_error(failed[0])
    return total

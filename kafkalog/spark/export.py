"""Export archived partition logs to Parquet written by the Spark tasks themselves.

``spark.read.format("kafkalog").load(root).write.parquet(out)`` sends every record through Spark's row format
(pyspark 4's Python DataSource hands the JVM rows, never columnar batches) and back into Parquet's columns. Here
each task runs the DataSource's own reader (:class:`kafkalog.spark.datasource.KafkaLogReader`: discovery, index
seek, remote byte ranges, ``isolation``, ``onCorrupt``, the range options) over its share of the segments and
writes the Arrow batches it yields straight into Parquet with ``pyarrow.parquet``; the JVM only carries the task
results (file paths and counts). The driver writes ``_SUCCESS`` when every task succeeded.

Layout: Hive-style dirs ``topic=<topic>/partition=<n>`` for ``partition_by`` (a subset of ``topic`` and
``partition``, both constant per segment); the files keep every column of the DataSource's schema, partition
columns included, so ``spark.read.parquet(out)`` gives the DataSource's columns in its order (Spark keeps a column
present in both the files and the dir names at its file position). Spark infers the partition columns' types from
the dir names: a topic name that looks like a number or a date would come back as one, so :func:`read_export`
reads with the DataSource's schema set.

File names are ``part-<task>-<n>.parquet`` (``n`` counts the task's files): unique by construction, and the same
again when a retried task overwrites an earlier attempt. On local disk each file is written under a hidden temp
name (Spark's readers skip names starting with ``.``), fsynced and renamed (then its dir fsynced); through
``pyarrow.fs`` for URLs it is uploaded to its final key (an object appears whole when its upload completes; a failed
attempt's object is deleted). ``timestamp`` is a plain Parquet INT64 of Kafka's milliseconds (-1 included): the
public surface (``shared/api.md``) promises ``spark.read.parquet(out)`` with the DataSource's schema, whose
``timestamp`` is a long; ``timestamp_millis(timestamp)`` turns it into Spark's timestamp, and
``timestamp_type="timestamp"`` stores a Parquet TIMESTAMP(MILLIS, UTC) of the same milliseconds instead. Before
``_SUCCESS`` the driver checks what was committed: the files on disk are the files the tasks wrote, their footers'
records add up to the records read. A corrupt segment with ``onCorrupt=fail`` fails its task without a retry
(deterministic): the task reports it, the driver deletes the files the export wrote (and the dirs left empty) and
raises the library's error; no ``_SUCCESS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalog import errors
from kafkalog.archive import storage
from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.errors import InvalidArgumentError, KafkaLogError, NothingToCheckError
from kafkalog.spark import channel
from kafkalog.spark.options import check_options
from kafkalog.spark.parquet_file import ExportedFile, ParquetFileWriter, as_timestamp_batch, column_codecs
from kafkalog.verify.findings import describe_error, one_line

__all__ = [
    "PARTITION_COLUMNS",
    "ExportResult",
    "ExportedFile",
    "NothingToExportError",
    "export_archive",
    "holds_files",
    "read_export",
]

#: the columns ``partition_by`` may name: constant within a segment, so a task never splits a batch by value
PARTITION_COLUMNS = ("topic", "partition")
#: the value Spark (and Hive) read back as null in a partition dir name
_NULL_DIR = "__HIVE_DEFAULT_PARTITION__"
#: names of the files an export writes, final or temporary (cleanup touches nothing else)
_OUR_FILE = re.compile(r"^\.?part-\d{5,}-\d{5,}\.parquet(?:\.[0-9a-f]{32}\.tmp)?$")
#: the Hive-style dirs an export makes (a failed export removes those it left empty)
_OUR_DIR = re.compile(r"^(?:topic|partition)=[^/]*$")
_JOB_GROUP = "kafkalog-export"

#: ``on_progress(step, done, total)``: steps ``plan`` (segments found), ``write`` (tasks finished), ``commit``
ProgressCallback = Callable[[str, int, int], None]


class NothingToExportError(InvalidArgumentError):
    """The roots hold no segment with bytes to export (the CLI's exit 2)."""


@dataclass
class ExportResult:
    """What :func:`export_archive` wrote."""

    out: str
    files: list[ExportedFile] = field(default_factory=list)
    segments: int = 0
    tasks: int = 0
    seconds: float = 0.0
    skipped: list[dict] = field(default_factory=list)  # onCorrupt=skip: one report per segment scan it cut
    timestamp_type: str = "long"  # how ``timestamp`` is stored: INT64 ("long") or TIMESTAMP(MILLIS, UTC)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "files": [asdict(f) for f in self.files], "rows": self.rows, "bytes": self.bytes,
                "segments": self.segments, "tasks": self.tasks, "seconds": round(self.seconds, 3),
                "skipped": [{k: v for k, v in m.items() if k != "kind"} for m in self.skipped],
                "timestamp_type": self.timestamp_type}  # fmt: skip


# ------------------------------------------------------------------------------------------------- paths


def _partition_by(partition_by: Iterable[str] | str | None) -> tuple[str, ...]:
    cols = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by or ())
    cols = tuple(c.lower() for c in cols)
    if any(c not in PARTITION_COLUMNS for c in cols) or len(set(cols)) != len(cols):
        raise InvalidArgumentError(f"partition_by takes distinct columns among {', '.join(PARTITION_COLUMNS)}, "
                                   f"not {list(partition_by or ())!r}")  # fmt: skip
    return cols


def _dir_of(partition_by: tuple[str, ...], topic: str, partition: int) -> str:
    """The Hive-style subdir of one (topic, partition); Kafka's topic names need no escaping."""
    values = {"topic": topic if topic else _NULL_DIR, "partition": str(partition)}
    return "/".join(f"{c}={values[c]}" for c in partition_by)


def _normal_out(out: str | os.PathLike) -> str:
    out = os.fspath(out)
    return out.rstrip("/") if storage.is_remote(out) else os.path.abspath(storage.local_path(out))


def _inside(path: str, parent: str) -> bool:
    if storage.is_remote(path) != storage.is_remote(parent):
        return False
    if not storage.is_remote(path):
        path, parent = os.path.realpath(path), os.path.realpath(parent)
        return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)
    return path.rstrip("/") == parent or path.startswith(parent + "/")


# --------------------------------------------------------------------------------------- output file system


class _Out:
    """The export dir, local (``os`` calls, fsync) or a URL (``pyarrow.fs``); picklable, resolved lazily."""

    def __init__(self, out: str, options: Mapping[str, str]) -> None:
        self.out = out
        self.options = dict(options)
        self.remote = storage.is_remote(out)

    def path(self, rel: str) -> str:
        return storage.join(self.out, rel) if self.remote else os.path.join(self.out, *rel.split("/"))

    def _fs(self, url: str) -> tuple[Any, str]:
        return storage.resolve(url, self.options)

    def open_output(self, target: str):
        """A writable stream for ``target`` (the caller closes it)."""
        if not self.remote:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            import pyarrow as pa

            return pa.OSFile(target, "wb")
        fs, path = self._fs(target)
        try:
            return fs.open_output_stream(path)
        except OSError as exc:
            raise storage.StorageError(f"{target}: write failed: {one_line(exc)}") from exc

    def publish(self, tmp: str, target: str) -> int:
        """Make ``tmp`` the file ``target`` (a durable rename on local disk; an object store's upload is already
        at its final key, see :class:`~kafkalog.spark.parquet_file.ParquetFileWriter`); returns the file's size."""
        if self.remote:
            return storage.stat_size(target, self.options)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fsync_dir(os.path.dirname(target))
        return os.path.getsize(target)

    def remove(self, target: str) -> None:
        with contextlib.suppress(OSError):
            if not self.remote:
                os.unlink(target)
            else:
                fs, path = self._fs(target)
                fs.delete_file(path)

    def listing(self) -> list[str]:
        """Every file under the export dir (empty when it does not exist)."""
        if not self.remote:
            found = []
            for dirpath, _, names in os.walk(self.out):
                found.extend(os.path.join(dirpath, n) for n in names)
            return sorted(found)
        try:
            return [e.url for e in storage.list_tree(self.out, self.options)]
        except storage.ObjectNotFoundError:
            return []

    def clear(self) -> None:
        """Remove the export dir's contents (``mode="overwrite"``)."""
        if not self.remote:
            import shutil

            if os.path.isdir(self.out):
                for name in os.listdir(self.out):
                    full = os.path.join(self.out, name)
                    shutil.rmtree(full) if os.path.isdir(full) and not os.path.islink(full) else os.unlink(full)
            return
        fs, path = self._fs(self.out)
        try:
            fs.delete_dir_contents(path, missing_dir_ok=True)
        except OSError as exc:
            raise storage.StorageError(f"{self.out}: cannot clear it: {one_line(exc)}") from exc


# ------------------------------------------------------------------------------------------------ the task


def _export_group(
    reader, task: int, group, dest: _Out, partition_by: tuple[str, ...], compression: str, as_timestamp: bool = False
) -> dict:
    """Run one task: the reader's batches of ``group`` into Parquet files; returns the task's result (files, the
    records read, what ``onCorrupt=skip`` dropped, seconds, and ``error`` when a segment is corrupt:
    deterministic, so reported instead of raised and retried).

    Files are named ``part-<task>-<n>.parquet``, ``n`` counting the task's files: unique in the export by
    construction (two partitions of one task starting at the same offset once wrote one name), and the same names
    again when Spark retries the task."""
    started = time.perf_counter()
    files: list[ExportedFile] = []
    writer: ParquetFileWriter | None = None
    key = None
    rows_read = 0
    reader.skipped_reports = []  # this task's copy of the reader: the driver reports them
    try:
        for batch in reader.read(group):
            rows_read += batch.num_rows
            if not batch.num_rows:
                continue
            if as_timestamp:
                batch = as_timestamp_batch(batch)
            topic, partition = batch.column(0)[0].as_py(), batch.column(1)[0].as_py()
            if writer is None or (partition_by and (topic, partition) != key):
                if writer is not None:
                    files.append(writer.close())
                key = (topic, partition)
                name = f"part-{task:05d}-{len(files):05d}.parquet"
                rel = f"{_dir_of(partition_by, topic, partition)}/{name}" if partition_by else name
                writer = ParquetFileWriter(dest, dest.path(rel), batch.schema, column_codecs(batch, compression))
            writer.write(batch)
        if writer is not None:
            files.append(writer.close())
            writer = None
    except Exception as exc:
        if writer is not None:
            writer.abort()
        status, _ = describe_error(exc)
        if status != "corrupt":
            raise  # I/O and the like: Spark retries the task
        error = {"type": type(exc).__name__, "message": one_line(exc)}
        return {"task": task, "files": [asdict(f) for f in files], "error": error, "rows_read": rows_read,
                "skipped": reader.skipped_reports, "seconds": time.perf_counter() - started}  # fmt: skip
    return {"task": task, "files": [asdict(f) for f in files], "error": None, "rows_read": rows_read,
            "skipped": reader.skipped_reports, "seconds": time.perf_counter() - started}  # fmt: skip


def _task_function(reader, dest: _Out, partition_by: tuple[str, ...], compression: str, as_timestamp: bool):
    def run(element: tuple[int, Any]) -> dict:
        task, group = element
        return _export_group(reader, task, group, dest, partition_by, compression, as_timestamp)

    return run


# ---------------------------------------------------------------------------------------------- the driver


def _reader(roots: Sequence[str], options: Mapping[str, Any], parallelism: int):
    from kafkalog.spark.datasource import KafkaLogReader

    # numbers as the strings Spark's options are; other objects (an ``RsmConfig`` for ``rsmConfig``) as given
    opts = {k: str(v) if isinstance(v, (bool, int, float)) else v for k, v in options.items()
            if k.lower() not in ("path", "paths")}  # fmt: skip
    return KafkaLogReader({**opts, "paths": json.dumps(list(roots))}, None, parallelism)


def run_job(spark, work: list, fn, on_progress: ProgressCallback | None, description: str) -> list[dict]:
    """Collect ``fn`` over ``work`` (one Spark task per element, each carrying only its own element); while it
    runs, report finished tasks to ``on_progress`` from Spark's status tracker."""
    sc = spark.sparkContext
    group = f"{_JOB_GROUP}-{uuid.uuid4().hex[:8]}"
    box: dict[str, Any] = {}

    def job() -> None:
        sc.setJobGroup(group, description)
        try:
            box["rows"] = sc.parallelize(work, len(work)).map(fn).collect()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]

    thread = threading.Thread(target=job, name="kafkalog-export", daemon=True)
    thread.start()
    tracker = sc.statusTracker()
    last = -1
    try:
        while thread.is_alive():
            thread.join(0.25)
            if on_progress is not None:
                done = _tasks_done(tracker, group)
                if done != last:
                    on_progress("write", done, len(work))
                    last = done
    except BaseException:  # interrupted (Ctrl-C) or the callback failed: stop the job's tasks too
        sc.cancelJobGroup(group)
        raise
    if "error" in box:
        raise box["error"]
    if on_progress is not None and last != len(work):
        on_progress("write", len(work), len(work))
    return box["rows"]


def _tasks_done(tracker, group: str) -> int:
    done = 0
    with contextlib.suppress(Exception):  # the tracker answers None for a job or stage it already dropped
        for job_id in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
    return done


def _spark_failure(out: str, exc: BaseException) -> storage.StorageError:
    """A failed job (tasks out of retries) as a one-line storage error: the Python exception's last line."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    reason = next((x for x in reversed(lines) if re.match(r"^[\w.]+(Error|Exception): ", x)), lines[0] if lines else "")
    return storage.StorageError(f"{out}: export failed: {reason or type(exc).__name__}")


def raise_task_error(error: dict) -> None:
    cls = getattr(errors, error["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, KafkaLogError)):
        cls = KafkaLogError
    try:
        exc = cls(error["message"])
    except TypeError:
        exc = KafkaLogError(error["message"])
    raise exc


def export_archive(
    spark,
    roots: str | os.PathLike | Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    partition_by: Iterable[str] | str | None = PARTITION_COLUMNS,
    mode: str = "error",
    compression: str = "snappy",
    timestamp_type: str = "long",
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> ExportResult:
    """Export every record under ``roots`` to Parquet files under ``out`` (a local dir or a URL).

    ``options`` are the DataSource's (``isolation``, ``onCorrupt``, ``verifyCrc``, ``includeDirStates``, the range
    options, ``maxPartitionBytes``, ``minPartitions``, ``arrowBatchRows``) and the storage options
    (:data:`kafkalog.archive.storage.STORAGE_OPTIONS`), which serve both the roots and ``out``. ``mode``: ``error``
    (default: refuse an ``out`` that holds files) or ``overwrite`` (empty it first; refused when a root lies
    inside it). ``compression``: any ``pyarrow.parquet`` codec (``snappy``, ``zstd``, ``gzip``, ``none``, ...);
    with ``snappy`` or ``lz4`` a key or value column whose bytes do not compress is stored uncompressed.
    ``timestamp_type``: ``long`` (default: Parquet INT64, the DataSource's schema) or ``timestamp`` (Parquet
    TIMESTAMP(MILLIS, UTC) of the same milliseconds: engines read a timestamp; -1 reads as 1969-12-31 23:59:59.999).

    Raises :class:`NothingToExportError` when the roots hold no segment with bytes, the library's error (e.g.
    ``CorruptRecordError`` naming the segment) when a task met corruption, and ``storage.StorageError`` when
    writing failed; in every failure the files written are removed and there is no ``_SUCCESS``.
    """
    started = time.perf_counter()
    check_options(options)  # the DataSource's one check: an unknown option or a bad value, named
    cols = _partition_by(partition_by)
    if mode not in ("error", "overwrite"):
        raise InvalidArgumentError(f"mode must be error or overwrite, not {mode!r}")
    if timestamp_type not in ("long", "timestamp"):
        raise InvalidArgumentError(f"timestamp_type must be long or timestamp, not {timestamp_type!r}")
    root_list = [os.fspath(roots)] if isinstance(roots, (str, os.PathLike)) else [os.fspath(r) for r in roots]
    target = _normal_out(out)
    dest = _Out(target, storage.storage_options(options))
    if on_progress is not None:
        on_progress("plan", 0, 0)
    reader = _reader(root_list, options, max(1, int(spark.sparkContext.defaultParallelism)))
    try:
        groups = reader.partitions()
    except NothingToCheckError as exc:
        raise NothingToExportError(f"{exc.path}: no segments to export") from None
    segments = sum(len(getattr(g, "segments", (g,))) for g in groups)  # a group of segments (or a single part)
    if not groups:
        raise NothingToExportError(f"{', '.join(root_list)}: no segments to export")
    if on_progress is not None:
        on_progress("plan", segments, segments)
    existing = dest.listing()
    if existing and mode == "error":
        raise InvalidArgumentError(f"{target}: already holds files (mode='overwrite' replaces them)")
    if existing:
        for root in root_list:
            if _inside(root if storage.is_remote(root) else storage.local_path(root), target):
                raise InvalidArgumentError(f"{target}: refusing to overwrite a dir that holds the root {root}")
        dest.clear()
    fn = _task_function(reader, dest, cols, compression, timestamp_type == "timestamp")
    description = f"kafkalog export: {segments} segments to {target}"
    try:
        rows = run_job(spark, list(enumerate(groups)), fn, on_progress, description)
    except Exception as exc:
        _remove_ours(dest)
        raise _spark_failure(target, exc) from exc
    rows.sort(key=lambda r: r["task"])
    files = [ExportedFile(**f) for r in rows for f in r["files"]]
    skipped = [m for r in rows for m in r.get("skipped") or ()]
    for msg in skipped:  # onCorrupt=skip: what was dropped, on the driver (the tasks' logs are not where one looks)
        channel.log.warning("%s", channel.skipped_line(msg))
    failed = [r["error"] for r in rows if r["error"] is not None]
    if failed:
        _remove_ours(dest)
        raise_task_error(failed[0])
    if on_progress is not None:
        on_progress("commit", 0, 1)
    try:
        _check_committed(dest, files, sum(r["rows_read"] for r in rows))
    except BaseException:
        _remove_ours(dest)
        raise
    result = ExportResult(target, files, segments, len(groups), skipped=skipped, timestamp_type=timestamp_type)
    result.seconds = time.perf_counter() - started
    storage.write_bytes(dest.path("_SUCCESS"), (json.dumps(result.to_dict(), indent=1) + "\n").encode(), dest.options)
    if on_progress is not None:
        on_progress("commit", 1, 1)
    return result


def _check_committed(dest: _Out, files: list[ExportedFile], rows_read: int) -> None:
    """Before ``_SUCCESS``: the files on disk are the files the tasks wrote, each holding the records its task
    counted (its footer), and those add up to the records the tasks read. ``StorageError`` naming what differs."""
    import pyarrow.parquet as pq

    written = sum(f.rows for f in files)
    paths = [f.path for f in files]
    on_disk = {p for p in dest.listing() if _OUR_FILE.match(storage.basename(p)) and not p.endswith(".tmp")}
    problems = []
    if written != rows_read:
        problems.append(f"{rows_read} records read, {written} written")
    if len(set(paths)) != len(paths) or on_disk != set(paths):
        problems.append(f"{len(paths)} files written, {len(on_disk)} on disk")
    for f in files if not problems else ():
        fs, path = storage.resolve(f.path, dest.options) if dest.remote else (None, f.path)
        with fs.open_input_file(path) if fs is not None else open(path, "rb") as src:
            rows = pq.read_metadata(src).num_rows
        if rows != f.rows:
            problems.append(f"{f.path} holds {rows} records, its task wrote {f.rows}")
            break
    if problems:
        raise storage.StorageError(f"{dest.out}: export check failed: {'; '.join(problems)}")


def holds_files(out: str | os.PathLike, options: Mapping[str, Any] | None = None) -> bool:
    """True when ``out`` holds any file (:func:`export_archive` refuses it unless ``mode="overwrite"``)."""
    return bool(_Out(_normal_out(out), storage.storage_options(options)).listing())


def _remove_ours(dest: _Out) -> None:
    """Delete the files an export writes (final and temporary names) and its ``_SUCCESS``, then the
    ``topic=``/``partition=`` dirs that left empty; nothing else."""
    for path in dest.listing():
        name = storage.basename(path)
        if _OUR_FILE.match(name) or name == "_SUCCESS":
            dest.remove(path)
    if dest.remote:  # an object store has no empty dirs to leave behind
        return
    for dirpath, _, _ in sorted(os.walk(dest.out), key=lambda w: -len(w[0])):
        if dirpath != dest.out and _OUR_DIR.match(os.path.basename(dirpath)):
            with contextlib.suppress(OSError):  # not empty: someone else's files stay, with their dir
                os.rmdir(dirpath)


def read_export(spark, out: str | os.PathLike):
    """The export at ``out`` as a DataFrame with the DataSource's schema (partition columns typed as the
    DataSource types them, whatever Spark would infer from the dir names), columns in the DataSource's order;
    ``timestamp`` a Spark timestamp when the export stored one (``timestamp_type="timestamp"``)."""
    from pyspark.sql.types import StructField, StructType, TimestampType

    from kafkalog.spark.datasource import full_schema
    from kafkalog.spark.scan import COLUMNS

    url = _normal_out(out)
    schema = full_schema()
    if isinstance(spark.read.parquet(url).schema["timestamp"].dataType, TimestampType):
        schema = StructType([StructField(f.name, TimestampType(), f.nullable) if f.name == "timestamp" else f
                             for f in schema.fields])  # fmt: skip
    return spark.read.schema(schema).parquet(url).select(*COLUMNS)

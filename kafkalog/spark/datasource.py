"""The ``kafkalog`` Spark DataSource: ``spark.read.format("kafkalog").load(root)`` reads archived partition logs.

Input partitions are runs of consecutive segments (planned on the driver from names and sizes; a segment over
``maxPartitionBytes`` becomes byte ranges cut at checked ``.index`` entries, :mod:`kafkalog.spark.split`; at most
``maxPartitionBytes``, default 128 MiB, and small scans spread over at least ``minPartitions`` tasks, by default the
session's parallelism when :func:`register` registered the source, else 8: :func:`pack_segments`). A task decodes
the whole small local segments of one partition in one pass (:func:`kafkalog.spark.scan.scan_joined`).

Columns: Spark's Python DataSource API has no column pruning (every query receives all the columns ``schema()``
names), so a query that needs few columns passes a user-specified schema, ``.schema("offset long, value binary")``:
a subset of SCHEMA's columns (any order, any case, our types; checked by :func:`read_columns`), and only those
columns are built and sent to the JVM. The range options and ``isolation`` work the same with any schema.

Ranges are options, not pushed filters: ``startingOffsets``/``endingOffsets`` and ``startingTimestamp``/
``endingTimestamp``, integers applied to every partition, the ending ones exclusive, with the meaning of Spark's
Kafka source. Spark 4.x keeps a Python DataSource's pushdown result on the ``PythonDataSourceV2`` that every scan of
a DataFrame shares, so a reader holding pushed filters would answer later, unfiltered queries of the same DataFrame
with the filtered rows; options belong to the DataFrame and cannot leak. The reader has no ``pushFilters`` (Spark
applies every ``filter`` itself, whatever ``spark.sql.python.filterPushdown.enabled`` says). The ranges:

* timestamps become offsets, per partition, on the driver at planning time, with Kafka's ListOffsets rule
  (:mod:`kafkalog.log.timestamp_offsets`): each is the earliest offset whose record timestamp is >= it. The
  partition is then read over offsets [start, end): no offset for ``startingTimestamp`` means the partition
  contributes nothing (Spark's ``startingOffsetsByTimestampStrategy=latest``), none for ``endingTimestamp`` means
  to the end; with ``startingOffsets``/``endingOffsets`` too, the ranges intersect. Records are not filtered by
  timestamp: a record whose timestamp is out of order (later before earlier) is returned by its offset, as
  Spark's Kafka source returns it. A start option plus ``.filter("timestamp >= ...")`` is an exact per-record
  filter; an end option is not (records inside the window past the end offset are never read);
* segments are planned only when they hold offsets of the range (a segment holds offsets from its base offset up
  to the next segment's base offset): the ones before the start and after the end never become tasks;
* inside a segment the start offset becomes a start position with the ``.index`` lookup, and the end offset stops
  the scan at the index entry past it, so the batches outside are never touched.

Roots may be local paths or URLs (``s3://``, ``gs://``, ``hdfs://``): the driver lists them through
:mod:`kafkalog.archive.storage`; each task fetches what it reads itself: the segment's index files (for the seek), then only
the ``.log`` byte range from the start position to the end of the segment (or to the index entry past an upper
offset bound), in bounded chunks to executor-local scratch.

Options:
  storage options (:data:`kafkalog.archive.storage.STORAGE_OPTIONS`: ``endpoint_url``, ``region``, ``access_key``,
    ``secret_key``, ``session_token``, ``anonymous``, ``connect_timeout``, ``request_timeout``, ``max_attempts``):
    override the AWS environment for remote roots.
  ``rsmConfig``: the broker's RemoteStorageManager configuration file (``rsm.config.*`` keys, prefix stripped)
    for segments stored by Aiven's tiered-storage plugin: read on the driver (key files included) and shipped
    with the tasks; each task reads the manifest, the index parts of ``.indexes`` and only the ``.log`` chunks
    covering its byte range. Needed for encrypted objects; compressed and plain ones read without it.
  ``isolation``: ``read_uncommitted`` (default: every record, control records included) or ``read_committed``
    (what a read_committed consumer gets, :func:`kafkalog.log.committed.committed_view`: nothing at or past the
    last stable offset, control batches and records of aborted transactions dropped, found via the ``.txnindex``
    files of the partition).
  ``verifyCrc`` (default true): a batch whose CRC fails is corrupt; ``onCorrupt``: ``fail`` (default: the job
    fails after one attempt, ``CorruptRecordError`` with segment, position and reason; :mod:`kafkalog.spark.channel`)
    or ``skip`` (every whole CRC-valid batch after a bad region is kept, offsets increasing, as salvage keeps them;
    what was dropped, the lost offset ranges first, is logged as a warning on the driver and counted in the
    ``skipped_*`` metrics).
  Every option is checked by :func:`kafkalog.spark.options.check_options`: an unknown key, a bad value or an
  inverted range fails ``load()`` naming it; a root holding no segment fails the query.
  ``includeDirStates`` (default ``live``): comma list of partition-dir states to read (``live,future,delete,stray``).
  ``arrowBatchRows`` (8192): records per Arrow batch handed to Spark; ``maxPartitionBytes``, ``minPartitions``:
    task sizing (above).
  ``decode``: ``metadata``, ``offsets`` or ``txn`` adds the decoded record (``decoded_type``, ``decoded_version``,
    ``decoded`` JSON, ``decode_error``) of ``__cluster_metadata``, ``__consumer_offsets`` or ``__transaction_state``
    archives (:mod:`kafkalog.spark.decoded`).
  ``metricsDir``: a local dir where each task writes a JSON line of what it read (segments, batches, bytes, its own
    Python time), which :func:`read_scan_metrics` sums up; tests and benchmarks use it to prove the ranges skip
    batches and to split a query's time between the tasks' Python work and Spark's.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem, discover_segments
from kafkalog.archive.tiered import AivenSegment, as_rsm_config, is_aiven_item
from kafkalog.errors import CorruptRecordError, CorruptTieredObjectError, InvalidArgumentError, KafkaLogError
from kafkalog.log.committed import committed_view
from kafkalog.log.index_check import checked_range
from kafkalog.log.timestamp_offsets import PartitionTimes, indexes_on_disk
from kafkalog.spark import channel
from kafkalog.spark.daemon import quiet_stock_daemon
from kafkalog.spark.decoded import DECODED_SCHEMA, add_decoded, decode_option, split_schema
from kafkalog.spark.open_ahead import Opened, indexes_of, opened_ahead, opened_segment
from kafkalog.spark.options import check_options, flag
from kafkalog.spark.scan import (
    COLUMNS,
    JOINED_BYTES,
    SCHEMA,
    SMALL_SEGMENT_BYTES,
    ScanMetrics,
    ScanSpec,
    arrow_schema,
    coalesced,
    read_scan_metrics,  # noqa: F401 - its documented home is this module
    scan_joined,
    scan_range,
)
from kafkalog.spark.split import split_big_segments
from kafkalog.spark.worker_gc import freeze_worker, fresh_worker_age

_NO_UPPER = 1 << 63
_MIN_LONG = -(1 << 63)


#: the range options: (option key, lower-cased), each an integer applied to every partition
RANGE_OPTIONS = ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp")


@dataclass(frozen=True)
class Bounds:
    """The range options: an offset range (inclusive here; ``endingOffsets`` is exclusive) and the timestamps
    that resolve to offsets per partition (:meth:`for_partition`), as in Spark's Kafka source."""

    offset_lo: int = _MIN_LONG
    offset_hi: int = _NO_UPPER  # inclusive
    ts_start: int | None = None  # startingTimestamp: from the earliest offset whose timestamp is >= it
    ts_end: int | None = None  # endingTimestamp: up to (excluding) the earliest offset whose timestamp is >= it

    @classmethod
    def from_options(cls, opts: dict[str, str]) -> Bounds:
        """The bounds the range options (lower-cased keys, checked by
        :func:`kafkalog.spark.options.check_options`) give."""
        values = {key: int(str(opts[key.lower()]).strip()) for key in RANGE_OPTIONS if opts.get(key.lower()) is not None}
        b = cls(ts_start=values.get("startingTimestamp"), ts_end=values.get("endingTimestamp"))
        if "startingOffsets" in values:
            b = replace(b, offset_lo=values["startingOffsets"])
        if "endingOffsets" in values:
            b = replace(b, offset_hi=values["endingOffsets"] - 1)
        return b

    def empty(self) -> bool:
        return self.offset_lo > self.offset_hi

    def for_partition(self, items: list[SegmentItem], options: dict[str, str], rsm=None) -> Bounds:
        """The offset bounds of one partition (its segments in offset order): the timestamps resolved with Kafka's
        ListOffsets rule (:class:`kafkalog.log.timestamp_offsets.PartitionTimes`) and intersected with the offset
        options. No offset at or after ``startingTimestamp``: the partition is empty (Spark's
        ``startingOffsetsByTimestampStrategy=latest``); none at or after ``endingTimestamp``: to the end."""
        if self.ts_start is None and self.ts_end is None or self.empty():
            return replace(self, ts_start=None, ts_end=None)
        times = PartitionTimes(items, options, rsm)
        lo, hi, start = self.offset_lo, self.offset_hi, None
        if self.ts_start is not None:
            start = times.offset_for(self.ts_start)
            if start is None:
                return Bounds(0, -1)
            lo = max(lo, start)
        if self.ts_end is not None and lo <= hi:
            # a later timestamp's offset is never below an earlier one's: the end's search starts at the start's
            floor = start if self.ts_start is not None and self.ts_end >= self.ts_start else None
            end = times.offset_for(self.ts_end, floor, past_damage=True)
            if end is not None:
                hi = min(hi, end - 1)
        return Bounds(lo, hi)


@dataclass
class SegmentPartition(InputPartition):
    """One segment to read, with everything the executor needs (no directory listing on executors)."""

    item: SegmentItem
    next_base_offset: int  # exclusive upper bound of offsets in this segment (next segment's base), or _NO_UPPER
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (producer_id, first, last) overlapping us
    start: int = 0  # a big segment's byte range [start, stop), cut at batch starts (:mod:`kafkalog.spark.split`) ...
    stop: int | None = None  # ... None: the whole segment
    bounds: Bounds = field(default_factory=Bounds)  # the partition's offset range (timestamps resolved)

    def __post_init__(self) -> None:
        self.value = self.item.path if self.stop is None else f"{self.item.path}[{self.start}:{self.stop}]"

    @property
    def size(self) -> int:
        return max(self.item.size_bytes, 0) if self.stop is None else self.stop - self.start


@dataclass
class SegmentGroup(InputPartition):
    """Consecutive segments read by one Spark task: a Python task costs Spark ~30-70 ms, more than decoding a
    small segment, so small segments are packed (see :func:`pack_segments`)."""

    segments: list[SegmentPartition]

    def __post_init__(self) -> None:
        self.value = [s.item.path for s in self.segments]


#: the most bytes of segments one task reads (Spark's own file sources default to 128 MiB per partition) ...
MAX_PARTITION_BYTES = 128 << 20
#: ... but small scans are still spread over at least this many tasks (when there are that many segments; the
#: ``minPartitions`` option, or the session's default parallelism when :func:`register` registered the source) ...
MIN_PARTITIONS = 8
#: ... and each segment counts this much on top of its size: what opening and setting up its scan costs, ~1 ms of
#: Python per segment, the time the decoder takes for ~256 KB (Spark's openCostInBytes rule, with our cost instead
#: of Spark's 4 MiB default, which made 1,000 tiny segments 33 tasks where the same bytes in one segment are one)
OPEN_COST = 256 << 10
#: the ``onCorrupt`` option's values
ON_CORRUPT = ("fail", "skip")
#: records per Arrow batch handed to Spark (option ``arrowBatchRows``)
ARROW_BATCH_ROWS = 8192


def pack_segments(parts: list[SegmentPartition], max_bytes: int = MAX_PARTITION_BYTES,
                  min_partitions: int = MIN_PARTITIONS) -> list[SegmentGroup]:  # fmt: skip
    """Pack segments, in order, into groups of at most ``min(max_bytes, total / min_partitions)`` bytes (never
    below OPEN_COST): large archives get ~128 MiB tasks, small ones still use every core (Spark's file sources
    size their splits the same way, with the default parallelism)."""
    sizes = [p.size + OPEN_COST for p in parts]
    target = max(OPEN_COST, min(max_bytes, sum(sizes) // max(1, min_partitions)))
    groups: list[SegmentGroup] = []
    current: list[SegmentPartition] = []
    load = 0
    for part, size in zip(parts, sizes, strict=True):
        if current and load + size > target:
            groups.append(SegmentGroup(current))
            current, load = [], 0
        current.append(part)
        load += size
    if current:
        groups.append(SegmentGroup(current))
    return groups


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkalog")``: records of archived Kafka partition logs."""

    #: tasks a small scan is spread over when the ``minPartitions`` option is not given (see :func:`register`)
    default_min_partitions = MIN_PARTITIONS
    #: where tasks report corruption to the driver (:mod:`kafkalog.spark.channel`; set by :func:`register`)
    channel: tuple[str, int, str] | None = None

    def __init__(self, options: dict[str, str]) -> None:
        quiet_stock_daemon()  # Spark runs the planner with PySpark's own daemon (kafkalog/spark/daemon.py)
        check_options(options)  # load() fails at once on an unknown option or a bad value, naming it
        super().__init__(options)

    @classmethod
    def name(cls) -> str:
        return "kafkalog"

    def schema(self) -> str:
        opts = {k.lower(): v for k, v in self.options.items()}
        return SCHEMA if decode_option(opts.get("decode")) is None else f"{SCHEMA}, {DECODED_SCHEMA}"

    def reader(self, schema: StructType) -> KafkaLogReader:
        quiet_stock_daemon()  # the read planner unpickles this instance: __init__ ran in another worker
        return KafkaLogReader(dict(self.options), schema, self.default_min_partitions, self.channel)


def full_schema() -> StructType:
    """SCHEMA as a Spark ``StructType`` (built without a JVM)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema())


def read_columns(schema: StructType | None) -> tuple[tuple[str, ...], object]:
    """(our column names, in the order of ``schema``; the pyarrow schema to emit) for the schema Spark hands to
    ``reader()``: SCHEMA itself, or a user-specified one (``spark.read.format("kafkalog").schema("offset long,
    value binary")``) naming a subset of our columns (any order, any case) with our types. The Python DataSource
    API has no column pruning; a user-specified schema is how a query reads fewer columns."""
    from pyspark.sql.pandas.types import to_arrow_schema

    ours = {f.name: f for f in full_schema().fields}
    if schema is None:
        return COLUMNS, arrow_schema()
    if not schema.fields:
        raise InvalidArgumentError(f"the kafkalog schema must name at least one column of: {SCHEMA}")
    names: list[str] = []
    for f in schema.fields:
        name = f.name.lower()
        if name not in ours:
            raise InvalidArgumentError(f"kafkalog has no column {f.name!r}; columns: {SCHEMA}")
        if name in names:
            raise InvalidArgumentError(f"column {f.name!r} appears twice in the kafkalog schema")
        if f.dataType != ours[name].dataType:
            raise InvalidArgumentError(f"kafkalog column {f.name!r} is {ours[name].dataType.simpleString()}, not "
                                       f"{f.dataType.simpleString()} (the columns: {SCHEMA})")  # fmt: skip
        names.append(name)
    if tuple(names) == COLUMNS and [f.name for f in schema.fields] == list(COLUMNS):
        return COLUMNS, arrow_schema()
    return tuple(names), to_arrow_schema(schema, timezone="UTC")


class KafkaLogReader(DataSourceReader):
    """Plans one input partition per segment, seeks with the indexes, decodes batches into Arrow batches."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None,
                 default_min_partitions: int = MIN_PARTITIONS, channel: tuple[str, int, str] | None = None) -> None:  # fmt: skip
        opts = check_options(options)  # kafkalog/spark/options.py: unknown keys and bad values refused, named
        self.decode = decode_option(opts.get("decode"))  # kafkalog/spark/decoded.py: internal topics' records
        self.decoded_schema = None
        if self.decode is not None:
            schema, self.decoded_schema = split_schema(schema if schema is not None else full_schema())
        self.columns, self.out_schema = read_columns(schema)
        self.roots = _roots(opts)
        self.isolation = str(opts.get("isolation", "read_uncommitted")).strip().lower()
        self.verify_crc = flag(opts, "verifycrc", True)
        self.on_corrupt = str(opts.get("oncorrupt", "fail")).strip().lower()
        self.channel = channel
        self.skipped_reports: list[dict] | None = None  # set by the export's tasks: what skip dropped, returned
        self.dir_states = {s.strip().lower() for s in str(opts.get("includedirstates", "live")).split(",")}
        self.metrics_dir = opts.get("metricsdir")
        self.arrow_batch_rows = _positive(opts, "arrowbatchrows", ARROW_BATCH_ROWS)
        self.max_partition_bytes = _positive(opts, "maxpartitionbytes", MAX_PARTITION_BYTES)
        self.min_partitions = _positive(opts, "minpartitions", default_min_partitions)
        self.storage = storage.storage_options(opts)
        self.rsm = as_rsm_config(opts.get("rsmconfig"))
        self.bounds = Bounds.from_options(opts)

    def partitions(self) -> list[SegmentGroup]:
        by_dir: dict[str, list[SegmentItem]] = {}
        prefix = self.rsm.key_prefix if self.rsm is not None else ""
        # a root holding no segment (an empty dir, a dir of other files) is refused, as verify and export refuse it
        for item in discover_segments(self.roots, options=self.storage, key_prefix=prefix, require=True):
            if item.dir_state in self.dir_states:
                by_dir.setdefault(item.partition_dir, []).append(item)
        _check_rsm_config(by_dir, self.storage, self.rsm)
        out: list[SegmentPartition] = []
        for items, b in zip(by_dir.values(), self._partition_bounds(list(by_dir.values())), strict=True):
            if b.empty():
                continue
            aborted: list[tuple[int, int, int]] = []
            if self.isolation == "read_committed":  # what a read_committed consumer gets (kafkalog/log/committed.py)
                view = committed_view(items, self.storage, self.rsm)
                aborted = view.aborted
                if view.last_stable_offset is not None:  # nothing at or past the last stable offset
                    b = replace(b, offset_hi=min(b.offset_hi, view.last_stable_offset - 1))
                    if b.empty():
                        continue
            for i, item in enumerate(items):
                nxt = items[i + 1].base_offset if i + 1 < len(items) else _NO_UPPER
                if item.base_offset > b.offset_hi or nxt <= b.offset_lo or item.size_bytes <= 0:
                    continue
                mine = [a for a in aborted if a[1] < nxt and a[2] >= item.base_offset]
                out.append(SegmentPartition(item, nxt, mine, bounds=b))
        out = split_big_segments(out, self.max_partition_bytes, self.storage, self.rsm)  # byte ranges of big ones
        return pack_segments(out, self.max_partition_bytes, self.min_partitions)

    def _partition_bounds(self, partitions: list[list[SegmentItem]]) -> list[Bounds]:
        """Each partition's offset bounds (:meth:`Bounds.for_partition`), resolved on the driver; partitions with
        remote segments are resolved a few at a time (each a handful of ranged reads)."""
        b = self.bounds
        if b.ts_start is None and b.ts_end is None or len(partitions) < 2:
            return [b.for_partition(items, self.storage, self.rsm) for items in partitions]
        with ThreadPoolExecutor(min(4, len(partitions))) as pool:
            return list(pool.map(lambda items: b.for_partition(items, self.storage, self.rsm), partitions))

    def read(self, partition: SegmentGroup):
        startup = fresh_worker_age()
        freeze_worker()
        quiet_stock_daemon()  # a cluster's task workers run PySpark's own daemon
        if not isinstance(partition, SegmentGroup):  # Spark plans one InputPartition(None) when we return none
            return
        # small batches are joined within one topic-partition only: a batch holds one partition's records, which
        # the export's file per partition relies on
        segments = list(enumerate(partition.segments))
        for _, run in itertools.groupby(segments, key=lambda s: (s[1].item.topic, s[1].item.partition)):
            yield from coalesced(self._read_run(list(run), startup), self.arrow_batch_rows)

    def _read_run(self, run: list[tuple[int, SegmentPartition]], startup: float) -> Iterator:
        """One partition's segments of a task: whole small local segments read together (:func:`scan_joined`, one
        decoder pass for up to JOINED_BYTES of them) when nothing asks for a segment's own scan (a range,
        read_committed, ``decode``, ``metricsDir``), the others (and joined ones whose pass fails) one by one."""
        held: list[SegmentPartition] = []
        load = 0
        with contextlib.closing(opened_ahead([s for _, s in run], self.storage, self.rsm)) as opened:
            for i, segment in run:
                if self._joinable(segment):
                    held.append(segment)
                    load += segment.size
                    if load < JOINED_BYTES:
                        continue
                yield from self._read_joined(held)
                held, load = [], 0
                if not self._joinable(segment):
                    seg = next(opened) if is_aiven_item(segment.item) else None  # opened ahead, in order
                    yield from self.read_segment(segment, startup if i == 0 else 0.0, seg)
        yield from self._read_joined(held)

    def _joinable(self, segment: SegmentPartition) -> bool:
        item = segment.item
        return (self.decode is None and self.metrics_dir is None and self.isolation == "read_uncommitted"
                and segment.stop is None and segment.bounds == Bounds() and 0 < item.size_bytes <= SMALL_SEGMENT_BYTES
                and not storage.is_remote(item.path) and not is_aiven_item(item))  # fmt: skip

    def _read_joined(self, segments: list[SegmentPartition]) -> Iterator:
        if len(segments) > 1:
            item = segments[0].item
            spec = ScanSpec(item.topic, item.partition, _MIN_LONG, _MIN_LONG, _NO_UPPER, None, self.verify_crc,
                            self.on_corrupt == "skip", self.arrow_batch_rows, self.columns, self.out_schema)  # fmt: skip
            batches = scan_joined(spec, [(s.item.path, s.item.size_bytes) for s in segments])
            if batches is not None:
                yield from batches
                return
        for segment in segments:
            yield from self.read_segment(segment)

    def read_segment(self, segment: SegmentPartition, worker_start: float = 0.0,
                     opened: Opened | None = None) -> Iterator:  # fmt: skip
        """One segment's Arrow batches, with onCorrupt's reporting and the segment's metrics (also used by
        :mod:`kafkalog.spark.export`); ``worker_start``: the fresh worker's start-up, for the metrics;
        ``opened``: the Aiven segment opened ahead (:mod:`kafkalog.spark.open_ahead`)."""
        metrics = ScanMetrics(segment.item.path, started=time.time(), worker_start=worker_start)
        batches = scan_segment(self, segment, metrics, opened)
        finished = False
        try:
            while True:
                started = time.perf_counter()
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                finally:
                    metrics.scan_seconds += time.perf_counter() - started
                out = batch if self.decode is None else add_decoded(batch, self.decode, self.decoded_schema)
                held = time.perf_counter()
                yield out
                metrics.yield_seconds += time.perf_counter() - held
        except CorruptRecordError as exc:  # onCorrupt=fail: one attempt, not spark.task.maxFailures of them
            finished = self._finish(metrics)  # before the wait: the kill ends this process
            channel.fail_job(self.channel, str(exc))
            raise
        finally:
            if not finished:
                self._finish(metrics)

    def _finish(self, metrics: ScanMetrics) -> bool:
        """Report what a segment scan dropped (onCorrupt=skip) and write its metrics (``metricsDir``)."""
        metrics.ended = time.time()
        if metrics.skipped_regions or metrics.skipped_batches:
            _report_skipped(self.channel, metrics, self.skipped_reports)
        if self.metrics_dir:
            _write_metrics(self.metrics_dir, metrics, self.channel)
        return True


def _report_skipped(address: tuple[str, int, str] | None, m: ScanMetrics, collect: list | None = None) -> None:
    """What onCorrupt=skip dropped in one segment, the offsets lost first: into ``collect`` when given (the
    export's tasks return it to their driver), else a warning on the driver (through the channel), else on the
    executor's log."""
    msg = {"kind": "skipped", "segment": m.segment, "lost_offsets": m.lost_offsets, "regions": m.skipped_regions,
           "bytes": m.skipped_bytes, "batches": m.skipped_batches, "position": m.first_skipped_position,
           "error": m.first_skipped_error}  # fmt: skip
    if collect is not None:
        collect.append(msg)
    elif not channel.report(address, msg):
        channel.log.warning("%s", channel.skipped_line(msg))


def _check_rsm_config(by_dir: dict[str, list[SegmentItem]], options: dict[str, str], rsm) -> None:
    """Open the first Aiven tiered segment on the driver (one manifest read, one key unwrap): a bucket encrypted
    without ``rsmConfig``, or with a key that does not fit, fails the query here with a one-line TieredConfigError
    naming the object, not inside every task. Bad bytes are left to the tasks (their ``onCorrupt``)."""
    first = next((i for items in by_dir.values() for i in items if is_aiven_item(i)), None)
    if first is None:
        return
    try:
        AivenSegment.open_item(first, rsm=rsm, options=options)
    except (CorruptTieredObjectError, OSError):
        return


def _positive(opts: dict[str, str], key: str, default: int) -> int:
    raw = opts.get(key)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgumentError(f"kafkalog option {key} must be a positive integer, not {raw!r}")
    return value


def _roots(opts: dict[str, str]) -> list[str]:
    if opts.get("paths"):
        raw = opts["paths"]
        try:
            paths = json.loads(raw)
        except ValueError:
            paths = [raw]
        if isinstance(paths, str):
            paths = [paths]
        return [str(p) for p in paths]
    if opts.get("path"):
        return [opts["path"]]
    raise KafkaLogError('kafkalog needs a root: spark.read.format("kafkalog").load(root)')


@contextlib.contextmanager
def _log_range(item: SegmentItem, start: int, end: int, options: dict[str, str], rsm=None,
               damage: list | None = None, seg: AivenSegment | None = None) -> Iterator[tuple[str, int]]:  # fmt: skip
    """(local path, position of ``start`` in it) for bytes [start, end) of the segment's ``.log``: the file
    itself on local disk; for a remote segment, a scratch copy of just that range; for an Aiven tiered segment,
    that range restored from the chunks covering it (a bad chunk raises, or with ``damage`` comes back zeroed)."""
    if not storage.is_remote(item.path) and not is_aiven_item(item):
        yield item.path, start
        return
    with storage.scratch_dir() as root:
        local = os.path.join(root, "range.log")
        if is_aiven_item(item):
            seg = seg or AivenSegment.open_item(item, rsm=rsm, options=options)
            seg.fetch(local, start, end, damage=damage)
        else:
            storage.fetch(item.path, local, start, end, options)
        yield local, 0


def scan_segment(reader: KafkaLogReader, part: SegmentPartition, m: ScanMetrics, opened: Opened | None = None):
    """Arrow record batches of one segment: seek with the indexes, fetch the byte range (remote), decode columns
    (:func:`kafkalog.spark.scan.scan_range`); ``opened``: the Aiven segment opened ahead, if it was."""
    item, b = part.item, part.bounds
    seg = opened_segment(opened)
    lo, hi = b.offset_lo, b.offset_hi
    upper = None if hi >= _NO_UPPER else hi
    size = item.size_bytes
    remote = storage.is_remote(item.path) or is_aiven_item(item)
    if remote and part.stop is not None and lo <= item.base_offset and upper is None:
        # a byte range of a split segment with no bound to seek to: its ends are batch starts, no index needed
        position, start_offset, end = part.start, item.base_offset, part.stop
        size = end
    elif remote:  # the indexes alone, then one range of the .log
        indexes = indexes_of(item, seg) if seg is not None else indexes_on_disk(item, reader.storage, reader.rsm)
        with indexes as local:
            size = local.size_bytes  # an Aiven object's original segment size
            position, start_offset, end = checked_range(local.path, item.base_offset, lo, upper, log_size=size)
    else:  # the indexes answer only after their strict checks against the .log (KIP-263 on first use)
        position, start_offset, end = checked_range(item.path, item.base_offset, lo, upper)
    end = min(end, size) if end > position else size
    if part.stop is not None:  # one byte range of a split segment: both ends are batch starts
        position, end = max(position, part.start), min(end, part.stop)
        if position >= end:
            return
    if remote:
        m.log_bytes_fetched = max(0, end - position)
    m.start_position = position
    aborted = part.aborted if reader.isolation == "read_committed" else None
    seek = start_offset if start_offset > item.base_offset else -(1 << 63)
    spec = ScanSpec(item.topic, item.partition, seek, lo, hi, aborted,
                    reader.verify_crc, reader.on_corrupt == "skip", reader.arrow_batch_rows, reader.columns,
                    reader.out_schema, item.base_offset,
                    part.next_base_offset if part.next_base_offset < _NO_UPPER else None)  # fmt: skip
    shift = position
    # a bad chunk fails the task naming the object, unless the scan keeps going past damage
    damage = None if reader.on_corrupt == "fail" else []
    with _log_range(item, position, end, reader.storage, reader.rsm, damage, seg) as (path, local_position):
        shift -= local_position
        yield from scan_range(spec, path, local_position, end - shift, m, label=item.path, shift=shift)


def _write_metrics(metrics_dir: str, m: ScanMetrics, address: tuple[str, int, str] | None = None) -> None:
    """One segment scan's metrics line in ``metrics_dir``: written by the driver (through the channel), so a
    local dir is the driver's on a multi-host cluster; by the task itself when the channel is unreachable."""
    if channel.report(address, {"kind": "metrics", "dir": metrics_dir, "line": m.to_dict()}):
        return
    if address is not None:
        channel.warn_unreachable(address, f"metrics lines are written to {metrics_dir} on this host")
    channel.write_metrics_line(metrics_dir, m.to_dict())


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark``.

    The registered class is a subclass carrying the session's default parallelism as its ``minPartitions``
    default (the planning worker has no SparkContext to ask): a ``local[1]`` scan then runs one task per ~128 MiB
    instead of eight, like Spark's own file sources."""
    ch = channel.driver_channel(spark)
    spark.dataSource.register(_registered_source(_default_parallelism(spark), ch.address if ch else None))


def _default_parallelism(spark) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect sessions have no sparkContext
        return MIN_PARTITIONS


def _registered_source(n: int, address: tuple[str, int, str] | None = None) -> type[KafkaLogDataSource]:
    """A KafkaLogDataSource subclass whose ``default_min_partitions`` is ``n`` and whose tasks report to the
    driver channel at ``address`` (pickled by value with the class, so the planning worker and the tasks see
    them)."""
    if n == KafkaLogDataSource.default_min_partitions and address is None:
        return KafkaLogDataSource
    attrs = {"default_min_partitions": n, "channel": address, "__module__": __name__,
             "__doc__": KafkaLogDataSource.__doc__}  # fmt: skip
    return type("KafkaLogDataSource", (KafkaLogDataSource,), attrs)


def _with_parallelism(n: int) -> type[KafkaLogDataSource]:
    """:func:`_registered_source` without a channel."""
    return _registered_source(n)

"""Verification results shared by the CLI (``verify``, ``dump``) and Spark: plain dataclasses with ``to_dict()``.

Three levels, one set of types, so ``kafkalog verify``, ``kafkalog dump`` and the Spark job report the same thing
the same way:

* :func:`verify_log_file` -> :class:`LogFileReport` (with :class:`BatchReports`): one ``.log`` file's bytes. Never
  raises for bad data (corruption is described: the invalid tail, batches whose CRC fails); I/O errors propagate.
* :func:`verify_segment` -> :class:`SegmentReport`: a discovered segment (:class:`kafkalog.discovery.SegmentItem`):
  its ``.log`` and the strict index checks. Never raises: ``status`` is ``ok``, ``corrupt`` (bad bytes) or
  ``unreadable`` (an ``OSError``, kept in ``exception``, or a tiered segment stored transformed).
* :func:`verify_partition` -> :class:`PartitionReport`: a partition dir's segments against each other (gaps,
  overlaps) and against the log dir's offset checkpoints.

:func:`summarize` and :func:`exit_code` turn segment and partition results (reports, dicts or Spark rows) into the
summary text and exit code of the Spark job.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .discovery import SegmentItem
from .errors import InvalidArgumentError, KafkaLogError
from .records.compression import CompressionType
from .records.record import TimestampType
from .records.scan import scan_batches

__all__ = [
    "PARTITION_FIELDS",
    "SEGMENT_FIELDS",
    "BatchReport",
    "BatchReports",
    "LogFileReport",
    "PartitionReport",
    "SegmentReport",
    "exit_code",
    "read_checkpoint_offsets",
    "summarize",
    "verify_log_file",
    "verify_partition",
    "verify_segment",
]


@dataclass
class BatchReport:
    """One batch (or legacy shallow message) as found in a ``.log`` file; Kafka's field names in ``to_dict``."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    count: int
    magic: int
    compression: str
    timestamp_type: str
    crc: int
    crc_valid: bool
    max_timestamp: int
    base_timestamp: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool

    def to_dict(self) -> dict:
        return {
            "position": self.position,
            "size": self.size,
            "baseOffset": self.base_offset,
            "lastOffset": self.last_offset,
            "count": self.count,
            "magic": self.magic,
            "compresscodec": self.compression,
            "timestampType": self.timestamp_type,
            "crc": self.crc,
            "isvalid": self.crc_valid,
            "maxTimestamp": self.max_timestamp,
            "baseTimestamp": self.base_timestamp,
            "partitionLeaderEpoch": self.partition_leader_epoch,
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "baseSequence": self.base_sequence,
            "isTransactional": self.is_transactional,
            "isControl": self.is_control,
        }


#: ``BatchReport`` field names, in order, and the matching ``to_dict`` keys.
_FIELDS = (
    "position", "size", "base_offset", "last_offset", "count", "magic", "compression", "timestamp_type", "crc",
    "crc_valid", "max_timestamp", "base_timestamp", "partition_leader_epoch", "producer_id", "producer_epoch",
    "base_sequence", "is_transactional", "is_control",
)
_DICT_KEYS = (
    "position", "size", "baseOffset", "lastOffset", "count", "magic", "compresscodec", "timestampType", "crc",
    "isvalid", "maxTimestamp", "baseTimestamp", "partitionLeaderEpoch", "producerId", "producerEpoch",
    "baseSequence", "isTransactional", "isControl",
)
_CHUNK = 4096  # rows turned into Python objects at a time while iterating


class BatchReports(Sequence):
    """The batches of a ``LogFileReport``, held as numpy columns (one per ``BatchReport`` field).

    A ``BatchReport`` is built only when one is asked for (indexing, iteration), so a report over millions of
    batches costs a few numpy arrays, not millions of objects; objects are not cached (each access builds a fresh
    one). ``column(name)`` gives a field as a numpy array, ``where(mask)`` the reports of the selected rows only
    (e.g. ``where(~batches.column("crc_valid"))`` for the bad ones), ``to_dicts()`` the ``to_dict()`` forms.
    Compares equal to any sequence of the same ``BatchReport`` values (a list, as it used to be).
    """

    __slots__ = ("_cols",)

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self._cols = [columns[name] for name in _FIELDS]

    def __len__(self) -> int:
        return len(self._cols[0])

    def column(self, name: str) -> np.ndarray:
        """One field for every batch (numpy array; names and types as the ``BatchReport`` fields)."""
        return self._cols[_FIELDS.index(name)]

    def _rows(self, lo: int, hi: int) -> Iterator[tuple]:
        return zip(*[c[lo:hi].tolist() for c in self._cols], strict=True)

    def _reports(self, lo: int, hi: int) -> list[BatchReport]:
        return list(map(BatchReport, *[c[lo:hi].tolist() for c in self._cols]))

    def __iter__(self) -> Iterator[BatchReport]:
        n = len(self)
        for lo in range(0, n, _CHUNK):
            yield from self._reports(lo, min(n, lo + _CHUNK))

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("batch index out of range")
        return self._reports(i, i + 1)[0]

    def where(self, mask: np.ndarray) -> list[BatchReport]:
        """The reports of the rows where ``mask`` (a bool array, one per batch) is True."""
        rows = [c[mask].tolist() for c in self._cols]
        return list(map(BatchReport, *rows))

    def to_dicts(self) -> list[dict]:
        """``[b.to_dict() for b in self]`` without building the ``BatchReport`` objects."""
        out: list[dict] = []
        n = len(self)
        for lo in range(0, n, _CHUNK):
            out += [dict(zip(_DICT_KEYS, row, strict=True)) for row in self._rows(lo, min(n, lo + _CHUNK))]
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchReports({len(self)} batches)"


@dataclass
class LogFileReport:
    """What a ``.log`` file holds and whether it is clean.

    ``ok`` means: no invalid bytes, every CRC valid, offsets strictly increasing. ``invalid_position`` is where the
    unreadable tail starts (None when clean); ``first_bad_crc_position`` the first batch failing its CRC.
    """

    path: str | None
    file_size: int
    valid_bytes: int
    invalid_bytes: int
    invalid_position: int | None
    error: str | None
    batch_count: int
    record_count: int
    first_offset: int | None
    last_offset: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    bad_crc_count: int
    first_bad_crc_position: int | None
    offsets_monotonic: bool
    #: ``BatchReports`` (columns, objects made on access) from ``verify_log_file``; a plain list otherwise.
    batches: Sequence[BatchReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.invalid_bytes == 0 and self.bad_crc_count == 0 and self.offsets_monotonic

    def to_dict(self, *, include_batches: bool = True) -> dict:
        # Every field but ``batches`` is a plain value (what ``asdict`` would copy); batches are not walked.
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "batches"}
        d["ok"] = self.ok
        if include_batches:
            b = self.batches
            d["batches"] = b.to_dicts() if isinstance(b, BatchReports) else [x.to_dict() for x in b]
        return d


_CODEC_NAMES = [c.kafka_name for c in CompressionType] + ["unknown"] * 3
_CODEC_NAME_ARRAY = np.array(_CODEC_NAMES, dtype=object)
#: timestamp type names by (magic != 0) * 2 + LogAppendTime bit
_TS_TYPE_NAMES = np.array(
    [TimestampType.NO_TIMESTAMP_TYPE.kafka_name] * 2
    + [TimestampType.CREATE_TIME.kafka_name, TimestampType.LOG_APPEND_TIME.kafka_name],
    dtype=object,
)


def verify_log_file(source, *, include_batches: bool = True, position: int = 0) -> LogFileReport:
    """Scan a ``.log`` file (path, bytes or memoryview): every header, every CRC, the valid region, offset order."""
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    scan = scan_batches(source, position=position, check_crc=True)
    h = scan.headers
    n = len(scan)
    last = scan.last_offsets
    base = h["base_offset"].astype(np.int64)
    bad = ~scan.crc_ok
    counts = h["record_count"].astype(np.int64)
    monotonic = bool(n < 2 or (np.all(base[1:] > last[:-1]) and np.all(last >= base)))
    ts = h["max_timestamp"].astype(np.int64)
    real_ts = ts[ts >= 0]
    report = LogFileReport(
        path=path,
        file_size=scan.end,
        valid_bytes=scan.valid_bytes,
        invalid_bytes=scan.invalid_bytes,
        invalid_position=scan.valid_bytes if scan.invalid_bytes else None,
        error=None if scan.error is None else str(scan.error),
        batch_count=n,
        record_count=int(counts[counts > 0].sum()) if n else 0,
        first_offset=int(base[0]) if n else None,
        last_offset=int(last[-1]) if n else None,
        min_timestamp=int(real_ts.min()) if len(real_ts) else None,
        max_timestamp=int(real_ts.max()) if len(real_ts) else None,
        bad_crc_count=int(bad.sum()),
        first_bad_crc_position=int(scan.positions[np.flatnonzero(bad)[0]]) if bad.any() else None,
        offsets_monotonic=monotonic,
    )
    if include_batches and n:
        attrs = h["attributes"].astype(np.int64)
        magic = h["magic"].astype(np.int64)
        v2 = magic == 2
        report.batches = BatchReports(
            {
                "position": scan.positions,
                "size": scan.sizes,
                "base_offset": base,
                "last_offset": last,
                "count": counts,
                "magic": magic,
                "compression": _CODEC_NAME_ARRAY[attrs & 7],
                "timestamp_type": _TS_TYPE_NAMES[(magic != 0) * 2 + ((attrs & 0x08) != 0)],
                "crc": h["crc"].astype(np.int64),
                "crc_valid": scan.crc_ok,
                "max_timestamp": ts,
                "base_timestamp": h["base_timestamp"].astype(np.int64),
                "partition_leader_epoch": h["partition_leader_epoch"].astype(np.int64),
                "producer_id": h["producer_id"].astype(np.int64),
                "producer_epoch": h["producer_epoch"].astype(np.int64),
                "base_sequence": h["base_sequence"].astype(np.int64),
                "is_transactional": v2 & ((attrs & 0x10) != 0),
                "is_control": v2 & ((attrs & 0x20) != 0),
            }
        )
    return report


# --------------------------------------------------------------------------------------------------- segments

#: ``SegmentReport.to_row()``/``to_dict()`` names, in order (the Spark job's segment columns).
SEGMENT_FIELDS = (
    "path", "partition_dir", "topic", "partition", "base_offset", "layout", "dir_state", "first_offset",
    "last_offset", "batch_count", "record_count", "size_bytes", "valid_bytes", "invalid_bytes", "min_timestamp",
    "max_timestamp", "codecs", "magics", "index_status", "index_error", "status", "corrupt_ranges", "error",
)  # fmt: skip


@dataclass
class SegmentReport:
    """What :func:`verify_segment` found in one segment; ``to_row()`` is in ``SEGMENT_FIELDS`` order.

    ``status``: ``ok``, ``corrupt`` (bad bytes: see ``corrupt_ranges``/``error``) or ``unreadable`` (an I/O error,
    whose ``OSError`` is kept in ``exception``, or a tiered segment stored compressed/encrypted). ``index_status``:
    ``ok``, ``missing``, ``corrupt``, ``stale`` or ``not_checked``.
    """

    item: SegmentItem
    first_offset: int | None = None
    last_offset: int | None = None
    batch_count: int = 0
    record_count: int = 0
    size_bytes: int = 0
    valid_bytes: int = 0
    invalid_bytes: int = 0
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: set[str] = field(default_factory=set)
    magics: set[int] = field(default_factory=set)
    index_status: str = "not_checked"
    index_error: str | None = None
    status: str = "ok"
    corrupt_ranges: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    #: the ``OSError`` behind ``status == "unreadable"`` (not part of the row; the CLI prints it as it prints any).
    exception: OSError | None = field(default=None, repr=False, compare=False)

    # the item's facts, so a report reads like its row (``summarize``, ``verify_partition`` take either)
    path = property(lambda self: self.item.path)
    partition_dir = property(lambda self: self.item.partition_dir)
    topic = property(lambda self: self.item.topic)
    partition = property(lambda self: self.item.partition)
    base_offset = property(lambda self: self.item.base_offset)
    layout = property(lambda self: self.item.layout)
    dir_state = property(lambda self: self.item.dir_state)

    def to_row(self) -> tuple:
        i = self.item
        return (
            i.path, i.partition_dir, i.topic, i.partition, i.base_offset, i.layout, i.dir_state,
            self.first_offset, self.last_offset, self.batch_count, self.record_count, self.size_bytes,
            self.valid_bytes, self.invalid_bytes, self.min_timestamp, self.max_timestamp, sorted(self.codecs),
            sorted(self.magics), self.index_status, self.index_error, self.status,
            [(p, s) for p, s in self.corrupt_ranges], self.error,
        )  # fmt: skip

    def to_dict(self) -> dict:
        return dict(zip(SEGMENT_FIELDS, self.to_row(), strict=True))


def verify_segment(item: SegmentItem, *, index_check: bool = True) -> SegmentReport:
    """Check one segment's ``.log`` with :func:`verify_log_file` (and its indexes); never raises.

    ``valid_bytes`` and ``invalid_bytes`` are the structurally readable prefix and the unreadable tail;
    ``corrupt_ranges`` lists every batch failing its CRC (position, size), the first batch moving offsets backwards,
    and the unreadable tail. An ``OSError`` (permission, EIO, a file that vanished) gives ``status="unreadable"``
    with the error in ``error`` and ``exception``; bad bytes give ``status="corrupt"``.
    """
    rep = SegmentReport(item, size_bytes=max(item.size_bytes, 0))
    if item.layout == "tiered-aiven" and _aiven_transformed(item):
        rep.status, rep.error = "unreadable", "tiered segment stored compressed/encrypted (see .rsm-manifest)"
        return rep
    try:
        log = verify_log_file(item.path, include_batches=True)
    except OSError as exc:
        rep.status, rep.error, rep.exception = "unreadable", f"{type(exc).__name__}: {exc}", exc
        return rep
    except (KafkaLogError, ValueError) as exc:  # not expected (the scan describes bad data), but bytes, not I/O
        rep.status, rep.error = "corrupt", f"{type(exc).__name__}: {exc}"
        return rep
    rep.size_bytes = log.file_size
    rep.valid_bytes, rep.invalid_bytes = log.valid_bytes, log.invalid_bytes
    rep.first_offset, rep.last_offset = log.first_offset, log.last_offset
    rep.batch_count, rep.record_count = log.batch_count, log.record_count
    rep.min_timestamp, rep.max_timestamp = log.min_timestamp, log.max_timestamp
    errors: list[str] = []
    starts = np.zeros(0, dtype=np.int64)
    batches = log.batches
    if len(batches):
        cols = batches.column  # verify_log_file's BatchReports: numpy columns, no per-batch objects
        position, size = cols("position"), cols("size")
        base, last, crc_ok = cols("base_offset"), cols("last_offset"), cols("crc_valid")
        rep.codecs = set(cols("compression").tolist())
        rep.magics = set(np.unique(cols("magic")).tolist())
        # the largest last offset before each batch (the segment's base offset - 1 before the first)
        prev_last = np.maximum.accumulate(np.concatenate(([item.base_offset - 1], last[:-1])))
        bad = ~crc_ok
        backwards = np.flatnonzero(crc_ok & (base <= prev_last))
        if len(backwards):
            i = int(backwards[0])
            bad[i] = True
            errors.append(f"offset {int(base[i])} at position {int(position[i])} does not follow {int(prev_last[i])}")
        rep.corrupt_ranges = list(zip(position[bad].tolist(), size[bad].tolist(), strict=True))
        starts = position[crc_ok]
    if log.bad_crc_count:
        first = log.first_bad_crc_position
        errors.insert(0, f"{log.bad_crc_count} batch(es) fail their CRC, first at position {first}")
    if log.invalid_bytes:
        rep.corrupt_ranges.append((log.invalid_position, log.invalid_bytes))
        errors.append(log.error or f"{log.invalid_bytes} unreadable bytes at position {log.invalid_position}")
    if rep.corrupt_ranges or not log.ok:
        rep.status = "corrupt"
        rep.error = "; ".join(errors) or log.error or "corrupt"
    if index_check:
        _check_indexes(rep, starts)
    return rep


def _check_indexes(rep: SegmentReport, starts: np.ndarray) -> None:
    """Strict checks of .index/.timeindex/.txnindex against the batches found (sets index_status/index_error)."""
    from .index import OffsetIndex, TimeIndex, TransactionIndex

    item = rep.item
    if item.layout == "tiered-aiven":
        rep.index_status = "not_checked"  # indexes live in one .indexes blob described by the manifest
        return
    next_offset = (rep.last_offset + 1) if rep.last_offset is not None else item.base_offset
    problems: list[str] = []
    missing: list[str] = []
    checks = [
        (".index", item.index_size, OffsetIndex),
        (".timeindex", item.timeindex_size, TimeIndex),
        (".txnindex", item.txnindex_size, TransactionIndex),
    ]
    for suffix, size, cls in checks:
        if size < 0:
            if suffix != ".txnindex" and rep.batch_count:
                missing.append(suffix)
            continue
        idx = cls(item.sibling(suffix), item.base_offset, writable=False)
        try:
            if cls is OffsetIndex:
                # Entries must point at batch starts. Batch last offsets are not passed: the log cleaner indexes the
                # largest *retained* offset, which can differ from the batch header's last offset (Kafka-written
                # compacted segments would fail that stricter rule).
                idx.strict_check(rep.valid_bytes, np.asarray(starts, dtype=np.int64))
            else:
                idx.strict_check(next_offset)
        except (KafkaLogError, ValueError) as exc:
            problems.append(f"{suffix}: {exc}")
        except OSError as exc:
            problems.append(f"{suffix}: unreadable: {exc}")
        finally:
            idx.close()
    if problems and item.is_last and not _clean_shutdown(item):
        # The active segment of a broker that crashed keeps its preallocated indexes (zero-filled tail entries) or
        # indexes lagging the data; Kafka's unclean-shutdown recovery rebuilds them, so this is not damage.
        rep.index_status, rep.index_error = "stale", "; ".join(problems)
    elif problems:
        rep.index_status, rep.index_error = "corrupt", "; ".join(problems)
    elif missing:
        rep.index_status, rep.index_error = "missing", "missing " + ", ".join(missing) + " (Kafka rebuilds it)"
    else:
        rep.index_status = "ok"


def _clean_shutdown(item: SegmentItem) -> bool:
    """Whether the log dir above the partition dir has Kafka's clean-shutdown marker (then no recovery runs)."""
    logdir = os.path.dirname(os.path.normpath(item.partition_dir))
    return os.path.exists(os.path.join(logdir, ".kafka_cleanshutdown"))


def _aiven_transformed(item: SegmentItem) -> bool:
    manifest = item.sibling(".rsm-manifest")
    try:
        with open(manifest, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    return bool(m.get("compression") or m.get("encryption"))


# ------------------------------------------------------------------------------------------------- partitions

#: ``PartitionReport.to_row()``/``to_dict()`` names, in order (the Spark job's partition columns).
PARTITION_FIELDS = (
    "partition_dir", "topic", "partition", "segment_count", "corrupt_segments", "log_start_offset", "log_end_offset",
    "gaps", "overlaps", "checkpoint_recovery_point", "checkpoint_log_start_offset", "checkpoint_high_watermark",
    "status", "problems",
)  # fmt: skip


@dataclass
class PartitionReport:
    """What :func:`verify_partition` found in one partition dir; fields in ``PARTITION_FIELDS`` order.

    ``status``: ``ok``, ``gap`` (offsets missing between segments: normal after compaction), ``overlap`` (a segment
    starting at or below the previous one's last offset), ``checkpoint_mismatch`` (a checkpoint beyond the log end
    offset) or ``corrupt`` (a segment is not ok). ``gaps`` are ``(from_offset, to_offset)``, ``overlaps``
    ``(segment_base_offset, previous_last_offset)``.
    """

    partition_dir: str
    topic: str
    partition: int
    segment_count: int
    corrupt_segments: int
    log_start_offset: int | None
    log_end_offset: int | None
    gaps: list[tuple[int, int]]
    overlaps: list[tuple[int, int]]
    checkpoint_recovery_point: int | None
    checkpoint_log_start_offset: int | None
    checkpoint_high_watermark: int | None
    status: str
    problems: list[str]

    def to_row(self) -> tuple:
        return tuple(getattr(self, name) for name in PARTITION_FIELDS)

    def to_dict(self) -> dict:
        return dict(zip(PARTITION_FIELDS, self.to_row(), strict=True))


def verify_partition(segments: Iterable[SegmentReport | dict | Any]) -> PartitionReport:
    """Continuity of one partition dir from its segments' results (``SegmentReport``s, or rows/dicts with
    ``partition_dir``, ``topic``, ``partition``, ``base_offset``, ``first_offset``, ``last_offset``, ``status``).

    Segments are put in base-offset order; an overlap is an error, a gap is reported. When the partition dir's
    parent holds Kafka's checkpoints, the recovery point, log start offset and high watermark must not lie beyond
    the data. Raises InvalidArgumentError (a ValueError) for no segments.
    """
    get = _getter
    rows = sorted(segments, key=lambda r: int(get(r, "base_offset")))
    if not rows:
        raise InvalidArgumentError("verify_partition needs at least one segment")
    first = rows[0]
    pdir, topic, partition = get(first, "partition_dir"), get(first, "topic"), int(get(first, "partition"))
    gaps: list[tuple[int, int]] = []
    overlaps: list[tuple[int, int]] = []
    problems: list[str] = []
    corrupt = sum(1 for r in rows if get(r, "status") != "ok")
    prev_last: int | None = None
    log_start = None
    log_end = None
    for r in rows:
        lo = _int_or_none(get(r, "first_offset"))
        hi = _int_or_none(get(r, "last_offset"))
        base = int(get(r, "base_offset"))
        start = lo if lo is not None else base
        if log_start is None and lo is not None:
            log_start = lo
        if prev_last is not None:
            if base <= prev_last:
                overlaps.append((base, prev_last))
            elif start > prev_last + 1:
                gaps.append((prev_last + 1, start - 1))
        if hi is not None:
            prev_last = hi if prev_last is None else max(prev_last, hi)
    if prev_last is not None:
        log_end = prev_last + 1
    else:
        log_end = int(get(rows[-1], "base_offset"))
    if log_start is None:
        log_start = int(get(rows[0], "base_offset"))
    recovery, lso, hwm = read_checkpoint_offsets(pdir, topic, partition)
    if overlaps:
        problems.append(f"{len(overlaps)} segment(s) overlap the previous one")
    if gaps:
        problems.append(f"{len(gaps)} offset gap(s) between segments (normal after compaction)")
    if corrupt:
        problems.append(f"{corrupt} segment(s) not ok")
    ck = []
    if recovery is not None and recovery > log_end:
        ck.append(f"recovery point {recovery} is beyond the log end offset {log_end}")
    if lso is not None and lso > log_end:
        ck.append(f"log start offset checkpoint {lso} is beyond the log end offset {log_end}")
    if hwm is not None and hwm > log_end:
        ck.append(f"high watermark {hwm} is beyond the log end offset {log_end}")
    problems.extend(ck)
    if corrupt:
        status = "corrupt"
    elif overlaps:
        status = "overlap"
    elif ck:
        status = "checkpoint_mismatch"
    elif gaps:
        status = "gap"
    else:
        status = "ok"
    return PartitionReport(
        pdir, topic, partition, len(rows), corrupt, log_start, log_end, gaps, overlaps, recovery, lso, hwm, status,
        problems,
    )  # fmt: skip


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):  # a null long column through pandas
        return None
    return int(v)


def read_checkpoint_offsets(
    partition_dir: str, topic: str, partition: int
) -> tuple[int | None, int | None, int | None]:
    """(recovery point, log start offset, high watermark) of one partition from the offset checkpoints of the log
    dir above ``partition_dir``; None where a file or entry is absent or the file does not parse."""
    from .checkpoint import read_offset_checkpoint

    logdir = os.path.dirname(os.path.normpath(partition_dir))
    out: list[int | None] = []
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        path = os.path.join(logdir, name)
        value = None
        if os.path.isfile(path):
            try:
                value = read_offset_checkpoint(path).get((topic, partition))
            except (KafkaLogError, OSError):
                value = None
        out.append(value)
    return out[0], out[1], out[2]


# ---------------------------------------------------------------------------------------------------- verdict


def _getter(r, name: str):
    return r[name] if isinstance(r, dict) else getattr(r, name)


def summarize(seg_rows: Sequence, part_rows: Sequence) -> str:
    """A short human summary of segment and partition results (reports, dicts or pyspark Rows)."""
    get = _getter
    n = len(seg_rows)
    by_status: dict[str, int] = {}
    for r in seg_rows:
        by_status[get(r, "status")] = by_status.get(get(r, "status"), 0) + 1
    idx_bad = [r for r in seg_rows if get(r, "index_status") == "corrupt"]
    total = sum(get(r, "size_bytes") or 0 for r in seg_rows)
    invalid = sum(get(r, "invalid_bytes") or 0 for r in seg_rows)
    lines = [
        f"kafkalog archive validation: {n} segment(s), {len(part_rows)} partition dir(s), {total} bytes",
        "segments: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())),
        f"invalid bytes: {invalid}; corrupt indexes: {len(idx_bad)}",
    ]
    p_status: dict[str, int] = {}
    for r in part_rows:
        p_status[get(r, "status")] = p_status.get(get(r, "status"), 0) + 1
    lines.append("partitions: " + ", ".join(f"{k} {v}" for k, v in sorted(p_status.items())))
    bad = [r for r in seg_rows if get(r, "status") != "ok"]
    for r in bad[:20]:
        ranges = ", ".join(f"{p}+{s}" for p, s in (tuple(x) for x in get(r, "corrupt_ranges") or []))
        lines.append(f"  {get(r, 'status').upper()} {get(r, 'path')}: {get(r, 'error')} [{ranges}]")
    for r in idx_bad[:20]:
        lines.append(f"  INDEX {get(r, 'path')}: {get(r, 'index_error')}")
    for r in part_rows:
        if get(r, "status") not in ("ok", "gap"):
            lines.append(f"  PARTITION {get(r, 'partition_dir')}: {'; '.join(get(r, 'problems') or [])}")
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more segment(s)")
    return "\n".join(lines) + "\n"


def exit_code(seg_rows: Sequence, part_rows: Sequence) -> int:
    """The exit code of a verification, by the rule of ``kafkalog verify`` and api.md (0 ok, 1 corruption, 2 usage
    or I/O error): 2 when any segment is ``unreadable`` (an ``OSError``, or a tiered segment stored transformed: it
    could not be checked); else 1 when any segment is corrupt, any index is corrupt, or a partition overlaps or
    contradicts its checkpoints (gaps alone do not fail); else 0."""
    get = _getter
    if any(get(r, "status") == "unreadable" for r in seg_rows):
        return 2
    if any(get(r, "status") != "ok" or get(r, "index_status") == "corrupt" for r in seg_rows):
        return 1
    if any(get(r, "status") not in ("ok", "gap") for r in part_rows):
        return 1
    return 0

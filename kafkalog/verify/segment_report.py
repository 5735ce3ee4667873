"""A segment's report and the checks every way of reading a segment shares: :class:`SegmentReport` (the Spark job's
segment row), the verdict rules (:func:`segment_status`), the report filled from the ``.log``'s scan
(:func:`apply_log_report`) and the strict index checks (:func:`check_indexes`), used by
:func:`kafkalog.verify.segment.verify_segment` (local files) and :mod:`kafkalog.verify.stream` (fetched bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kafkalog.archive.discovery import SegmentItem

from ..errors import InvalidArgumentError, KafkaLogError
from ..index import OffsetIndex, TimeIndex, TransactionIndex
from ..limits import LONG_MAX
from .findings import describe_error, row_field, row_value
from .log_file import LogFileReport

__all__ = ["INDEX_CHECKS", "SEGMENT_FIELDS", "SegmentReport", "apply_log_report", "bad_base_offset", "check_indexes",
           "row_status", "segment_status"]


#: ``SegmentReport.to_row()``/``to_dict()`` names, in order (the Spark job's segment columns). A row's ``status``
#: is the segment's verdict (:func:`segment_status`, ``error`` spelt ``unreadable``), ``log_status`` the ``.log``'s.
SEGMENT_FIELDS = (
    "path", "partition_dir", "topic", "partition", "base_offset", "layout", "dir_state", "first_offset",
    "last_offset", "batch_count", "record_count", "size_bytes", "valid_bytes", "invalid_bytes", "min_timestamp",
    "max_timestamp", "codecs", "magics", "index_status", "index_error", "status", "corrupt_ranges", "error",
    "log_status",
)  # fmt: skip


@dataclass
class SegmentReport:
    """What :func:`verify_segment` found in one segment; ``to_row()`` is in ``SEGMENT_FIELDS`` order.

    ``status``: ``ok``, ``corrupt`` (bad bytes: see ``corrupt_ranges``/``error``) or ``unreadable`` (an I/O error,
    whose ``OSError`` is kept in ``exception``, a file name whose base offset is not a long, or a tiered segment
    stored compressed/encrypted). ``index_status``: ``ok``, ``missing``, ``corrupt``, ``stale``, ``unreadable``
    (an index could not be read: its ``OSError`` in ``index_exception``) or ``not_checked``.
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
    #: the error behind ``status == "unreadable"``: an ``OSError``, or a ``TieredConfigError`` (no or the wrong
    #: RemoteStorageManager configuration); not part of the row, the CLI prints it as it prints any.
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    #: the ``OSError`` behind ``index_status == "unreadable"`` (not part of the row).
    index_exception: OSError | None = field(default=None, repr=False, compare=False)

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
            sorted(self.magics), self.index_status, self.index_error, row_status(self),
            [(p, s) for p, s in self.corrupt_ranges], self.error, self.status,
        )  # fmt: skip

    def to_dict(self) -> dict:
        return dict(zip(SEGMENT_FIELDS, self.to_row(), strict=True))


def bad_base_offset(rep: SegmentReport) -> bool:
    """A file name whose base offset is not a long: Kafka's loader fails on it (toLong), so nothing is checked."""
    item = rep.item
    if item.base_offset <= LONG_MAX:
        return False
    exc = InvalidArgumentError(f"{item.path}: base offset {item.base_offset} in the file name is not in [0, 2^63-1]")
    rep.status, rep.error, rep.exception = "unreadable", str(exc), exc
    return True


def apply_log_report(rep: SegmentReport, log: LogFileReport) -> np.ndarray:
    """Fill ``rep`` from the ``.log``'s report (offsets, counts, corrupt ranges, status); returns the positions of
    the batches whose CRC holds, what the offset index is checked against."""
    item = rep.item
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
    return starts


#: the index files a segment is checked with: suffix, the item's size field, class
INDEX_CHECKS = ((".index", "index_size", OffsetIndex), (".timeindex", "timeindex_size", TimeIndex),
                (".txnindex", "txnindex_size", TransactionIndex))  # fmt: skip


def check_indexes(rep: SegmentReport, starts: np.ndarray, open_index: Callable[[str, type], Any],
                  clean_shutdown: Callable[[], bool]) -> None:  # fmt: skip
    """Strict checks of .index/.timeindex/.txnindex against the batches found (sets index_status/index_error).
    ``open_index(suffix, cls)`` gives an index (a local file, or a remote object's bytes; an ``OSError`` when it
    cannot be read); ``clean_shutdown()`` whether the log dir has Kafka's clean-shutdown marker."""
    item = rep.item
    next_offset = (rep.last_offset + 1) if rep.last_offset is not None else item.base_offset
    problems: list[str] = []
    missing: list[str] = []
    unreadable: list[str] = []
    for suffix, size_field, cls in INDEX_CHECKS:
        if getattr(item, size_field) < 0:
            if suffix != ".txnindex" and rep.batch_count:
                missing.append(suffix)
            continue
        try:
            idx = open_index(suffix, cls)
        except OSError as exc:  # a symlink loop, a permission: not damage, and not "missing"
            rep.index_exception = rep.index_exception or exc
            unreadable.append(f"{suffix}: {describe_error(exc)[1]}")
            continue
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
            rep.index_exception = rep.index_exception or exc
            unreadable.append(f"{suffix}: {describe_error(exc)[1]}")
        finally:
            idx.close()
    if unreadable:
        rep.index_status, rep.index_error = "unreadable", "; ".join(unreadable + problems)
    elif problems and item.is_last and not clean_shutdown():
        # The active segment of a broker that crashed keeps its preallocated indexes (zero-filled tail entries) or
        # indexes lagging the data; Kafka's unclean-shutdown recovery rebuilds them, so this is not damage.
        rep.index_status, rep.index_error = "stale", "; ".join(problems)
    elif problems:
        rep.index_status, rep.index_error = "corrupt", "; ".join(problems)
    elif missing:
        rep.index_status, rep.index_error = "missing", "missing " + ", ".join(missing) + " (Kafka rebuilds it)"
    else:
        rep.index_status = "ok"


def segment_status(r: SegmentReport | dict | Any) -> str:
    """The verdict on one segment from its report, dict or Spark row (the one rule the segment line, the partition
    above it and the Spark job apply): ``error`` when its ``.log`` or an index could not be read, ``corrupt`` for
    bad bytes or a corrupt index, ``warning`` for an index Kafka rebuilds (stale, missing), else ``ok``."""
    status, index_status = row_value(r, "status"), row_field(r, "index_status")
    if status in ("unreadable", "error") or index_status == "unreadable":
        return "error"
    if status not in ("ok", "warning") or index_status == "corrupt":
        return "corrupt"
    if status == "warning" or index_status in ("stale", "missing"):
        return "warning"
    return "ok"


def row_status(r: SegmentReport | dict | Any) -> str:
    """A report row's ``status``: the verdict of :func:`segment_status` in the report's words (``ok``,
    ``warning``, ``corrupt``, ``unreadable`` for ``error``), so the Spark job's ``segments.parquet`` says what
    ``kafkalog verify`` says of the segment (a corrupt ``.index`` makes it corrupt, a stale one a warning)."""
    verdict = segment_status(r)
    return "unreadable" if verdict == "error" else verdict

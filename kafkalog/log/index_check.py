"""The check a segment passes before its indexes answer (KIP-263: done lazily, on first use).

One definition for both users: a ``Log`` checks an inactive segment the first time a read, a timestamp lookup or
an offset lookup needs its indexes, and the ``LogManager``'s background ``SanityChecker`` checks pending segments
ahead of reads. A segment failing it is rebuilt from its ``.log`` (``Log.recover_segments``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import numpy as np

from kafkalog.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KafkaLogError,
    KafkaStorageError,
    ResourceExhaustedError,
)
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex
from kafkalog.io.file_access import mapped_range, no_readahead
from kafkalog.io.oserrors import OSErrorClass, classify
from kafkalog.limits import INT_MAX, LONG_MIN, NO_TIMESTAMP
from kafkalog.records.batch import LOG_OVERHEAD
from kafkalog.records.reader import read_batches

__all__ = ["batch_cuts", "check_segment", "checked_max_timestamp", "checked_range", "checked_start_position",
           "is_corruption", "rolled_max_timestamp"]


def is_corruption(exc: BaseException) -> bool:
    """True for errors meaning "this segment's files are inconsistent" rather than "the disk failed" or "the
    process hit a limit" (:func:`kafkalog.io.oserrors.classify` decides for an ``OSError``).

    A missing offset index (``FileNotFoundError`` in a dir that still exists) is Kafka's "needs recovery"
    signal, not a disk error; the same error for a partition dir that vanished is a disk failure.
    """
    if isinstance(exc, FileNotFoundError):
        return classify(exc) is OSErrorClass.INPUT
    return isinstance(exc, KafkaLogError) and not isinstance(
        exc, (KafkaStorageError, InvalidArgumentError, InvalidArgumentTypeError, ResourceExhaustedError)
    )


def check_segment(seg: object) -> None:
    """The full check of one segment: Kafka's index rules, kafkalog's strict index-vs-log checks, and no bytes
    after the last whole batch (a clean shutdown marker does not prove the tail was written completely)."""
    seg.sanity_check(strict=True, whole_batches=True)  # type: ignore[attr-defined]


def checked_start_position(log_path: str, base_offset: int, offset_lo: int, ts_lo: int = LONG_MIN) -> tuple[int, int]:
    """(file position to start reading at, first offset wanted) for a reader of one segment file that wants offsets
    >= ``offset_lo`` and timestamps >= ``ts_lo`` (the DataSource's pushdown): :func:`checked_range` without an
    upper bound."""
    position, start_offset, _ = checked_range(log_path, base_offset, offset_lo, ts_lo=ts_lo)
    return position, start_offset


def checked_range(log_path: str, base_offset: int, offset_lo: int, offset_hi: int | None = None, *,
                  ts_lo: int = LONG_MIN, log_size: int | None = None) -> tuple[int, int, int]:
    """(start position, first offset wanted, end position) of the bytes of one segment file a reader wanting offsets
    in [``offset_lo``, ``offset_hi``] and timestamps >= ``ts_lo`` must read, found with the ``.timeindex`` and
    ``.index`` beside ``log_path``. Read-only: an archive is never written to. An index missing or failing its
    check is not used and the answer is the whole file, which is always right (the reader filters by offset).

    The check is targeted (:func:`_targeted`): Kafka's sanity checks, every entry in order and in range, and each
    entry the answer uses pointing at a whole CRC-valid batch with the offset (and, for the time index, the max
    timestamp) it claims. That reads a few batches, not the segment, so a point query brings little of a big
    segment into memory; a wrong entry falls back to the whole file. ``log_size`` given means the ``.log`` is not
    beside the indexes (a remote object whose index files were fetched alone): the indexes then pass Kafka's own
    sanity checks only."""
    start_offset = max(offset_lo, base_offset)
    size = _size(log_path) if log_size is None else log_size
    whole = (0, start_offset, size)
    stem = log_path[: -len(".log")]
    use_time = ts_lo > LONG_MIN and _size(stem + ".timeindex") > 0
    use_offsets = (start_offset > base_offset or offset_hi is not None) and _size(stem + ".index") > 0
    if not use_time and not use_offsets:
        return whole
    try:
        found = _targeted(log_path, stem, base_offset, start_offset, offset_hi, ts_lo if use_time else LONG_MIN,
                          size, check_log=log_size is None)  # fmt: skip
    except (KafkaLogError, OSError):
        return whole
    if found is None:
        return whole
    position, start_offset, end = found
    position = position if 0 <= position < size else 0
    return position, start_offset, end if position < end <= size else size


def _targeted(log_path: str, stem: str, base_offset: int, start_offset: int, offset_hi: int | None, ts_lo: int,
              size: int, *, check_log: bool) -> tuple[int, int, int] | None:  # fmt: skip
    """:func:`checked_range`'s answer, None when an entry it needs fails its check."""
    entries = np.empty(0, dtype=[("offset", np.int64), ("position", np.int64)])
    if _size(stem + ".index") > 0:
        entries = _ordered_entries(stem, base_offset, size)
        if entries is None:
            return None
    with no_readahead(open(log_path, "rb")) if check_log else contextlib.nullcontext() as f:

        def entry_ok(i: int) -> bool:
            """Entry ``i`` points at a whole CRC-valid batch ending at the offset it claims."""
            if f is None:
                return True
            batch = _batch_at(f, int(entries["position"][i]), size)
            return batch is not None and batch.last_offset == int(entries["offset"][i])

        if ts_lo > LONG_MIN:
            tidx = TimeIndex(stem + ".timeindex", base_offset, writable=False)
            try:
                tidx.sanity_check()
                times = tidx.entries()
                t_entry = tidx.lookup(ts_lo)
            finally:
                tidx.close()
            if len(times) and (np.any(np.diff(times["timestamp"]) < 0) or np.any(np.diff(times["offset"]) < 0)):
                return None
            if t_entry.timestamp != NO_TIMESTAMP:
                if f is not None and not _time_entry_ok(f, entries, int(t_entry.timestamp), int(t_entry.offset),
                                                        size, entry_ok):  # fmt: skip
                    return None
                start_offset = max(start_offset, int(t_entry.offset))
        if not len(entries):
            return 0, start_offset, size
        position = 0
        if start_offset > base_offset:
            i = int(np.searchsorted(entries["offset"], start_offset, side="right")) - 1
            if i >= 0:
                if not entry_ok(i):
                    return None
                position = int(entries["position"][i])
        end = size
        if offset_hi is not None:
            # An entry (o, p) says the batch at p ends at offset o; the entry after the first one with o above
            # the bound starts a batch whose offsets are all above it.
            above = np.flatnonzero(entries["offset"] > offset_hi)
            if len(above) and above[0] + 1 < len(entries):
                j = int(above[0])
                if not (entry_ok(j) and entry_ok(j + 1)):
                    return None
                end = int(entries["position"][j + 1])
        return position, start_offset, end


def _ordered_entries(stem: str, base_offset: int, size: int) -> np.ndarray | None:
    """The ``.index`` entries after Kafka's sanity check, None unless every entry is in order (offsets and
    positions strictly increasing) and in range (offsets in the segment's 32-bit window, positions in the file)."""
    oidx = OffsetIndex(stem + ".index", base_offset, writable=False)
    try:
        oidx.sanity_check()
        entries = oidx.entries()
    finally:
        oidx.close()
    off, pos = entries["offset"], entries["position"]
    if len(entries) and (np.any(np.diff(off) <= 0) or np.any(np.diff(pos) <= 0) or off[0] < base_offset
                         or off[-1] - base_offset > INT_MAX or pos[0] < 0 or pos[-1] >= size):  # fmt: skip
        return None
    return entries


def _batch_at(f, position: int, size: int):
    """The whole CRC-valid batch starting at ``position`` of the open ``.log`` ``f`` (read with one ``pread``
    of its bytes, nothing else), or None."""
    return _batch_read(_pread(f), position, size)


def _pread(f) -> Callable[[int, int], bytes]:
    """``read_at(position, length)`` over the open file ``f``."""
    fd = f.fileno()
    return lambda position, length: os.pread(fd, length, position)


def _batch_read(read_at: Callable[[int, int], bytes], position: int, size: int):
    """The whole CRC-valid batch starting at ``position`` of a ``.log`` of ``size`` bytes read through
    ``read_at(position, length)``: its header (for the length), then its bytes; None if it is not one."""
    head = read_at(position, LOG_OVERHEAD)
    if len(head) < LOG_OVERHEAD:
        return None
    length = int.from_bytes(head[8:12], "big", signed=True)
    if length <= 0 or position + LOG_OVERHEAD + length > size:
        return None
    data = read_at(position, LOG_OVERHEAD + length)
    reader = read_batches(data, validate=True)
    for batch in reader:
        return batch
    return None


def _time_entry_ok(f, entries: np.ndarray, ts: int, offset: int, size: int, entry_ok) -> bool:
    """A time index entry (``ts``, ``offset``) is Kafka's (max timestamp so far, its offset): the batch holding
    ``offset`` has max timestamp ``ts``. Found from the offset index entry at or before it (itself checked), then
    batch by batch, at most :data:`_TIME_PROBE_BATCHES` batches."""
    position = 0
    i = int(np.searchsorted(entries["offset"], offset, side="right")) - 1 if len(entries) else -1
    if i >= 0:
        if not entry_ok(i):
            return False
        if int(entries["offset"][i]) == offset:
            batch = _batch_at(f, int(entries["position"][i]), size)
            return batch is not None and batch.max_timestamp == ts
        position = int(entries["position"][i]) + _batch_size(f, int(entries["position"][i]))
    for _ in range(_TIME_PROBE_BATCHES):
        batch = _batch_at(f, position, size)
        if batch is None or batch.magic < 2 or batch.base_offset > offset:
            return False
        if batch.last_offset >= offset:
            return batch.max_timestamp == ts
        position += batch.size_in_bytes
    return False


def _batch_size(f, position: int) -> int:
    head = os.pread(f.fileno(), LOG_OVERHEAD, position)
    return LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)


#: batches a time index entry's check walks from the offset index entry before it (Kafka indexes every
#: ``index.interval.bytes``, 4 KiB by default: a handful of batches)
_TIME_PROBE_BATCHES = 1024


def batch_cuts(log_path: str, base_offset: int, size: int, max_bytes: int,
               read_at: Callable[[int, int], bytes] | None = None) -> list[int]:  # fmt: skip
    """Positions that split a big segment into byte ranges of at most about ``max_bytes`` (more where index
    entries are further apart), each the start of a batch: taken from the ``.index`` entries, every one used
    checked like a lookup's (a whole CRC-valid batch there with the last offset the entry claims). ``[]`` when the
    index is missing, fails a check, or has no entry to cut at: the segment is then read whole.

    The ``.index`` is the one beside ``log_path``; the ``.log`` is read there too, unless ``read_at(position,
    length) -> bytes`` reads it elsewhere (an object in remote storage whose ``.index`` alone was fetched beside
    ``log_path``): a cut then costs two small reads, the batch's header and the batch."""
    stem = log_path[: -len(".log")]
    if size <= max_bytes or _size(stem + ".index") <= 0:
        return []
    try:
        entries = _ordered_entries(stem, base_offset, size)
        if entries is None or not len(entries):
            return []
        off, pos = entries["offset"].astype(np.int64), entries["position"].astype(np.int64)
        cuts: list[int] = []
        last = 0
        while size - last > max_bytes:
            i = int(np.searchsorted(pos, last + max_bytes, side="right")) - 1
            if i < 0 or pos[i] <= last:  # no entry inside the next max_bytes: the first one after
                i = int(np.searchsorted(pos, last, side="right"))
                if i >= len(pos):
                    break
            cuts.append(i)
            last = int(pos[i])
        with no_readahead(open(log_path, "rb")) if read_at is None else contextlib.nullcontext() as f:
            read = read_at if f is None else _pread(f)
            for i in cuts:
                batch = _batch_read(read, int(pos[i]), size)
                if batch is None or batch.last_offset != int(off[i]):
                    return []
        return [int(pos[i]) for i in cuts]
    except (KafkaLogError, OSError):
        return []


def rolled_max_timestamp(log_path: str, base_offset: int, next_base_offset: int) -> int | None:
    """The largest timestamp of a rolled (not the last) segment as its ``.timeindex`` says: Kafka appends the
    segment's (max timestamp, its offset) as the final entry when the segment rolls. None when the index is
    missing, empty or fails Kafka's sanity check, or its last entry's offset is outside the segment."""
    path = log_path[: -len(".log")] + ".timeindex"
    if _size(path) <= 0:
        return None
    try:
        tidx = TimeIndex(path, base_offset, writable=False)
        try:
            tidx.sanity_check()
            if not tidx.entry_count:
                return None
            last = tidx.entry(tidx.entry_count - 1)
        finally:
            tidx.close()
    except (KafkaLogError, OSError):
        return None
    if not base_offset <= last.offset < next_base_offset:
        return None
    return int(last.timestamp)


def checked_max_timestamp(log_path: str, base_offset: int, next_base_offset: int) -> int | None:
    """A rolled segment's largest timestamp from its ``.timeindex``: the last entry, checked against the ``.log``
    as a lookup's entries are (:func:`_time_entry_ok`: the batch holding its offset is whole, CRC-valid and has that
    max timestamp, found from a checked ``.index`` entry), then, as Kafka's ``LogSegment.readLargestTimestamp``,
    the larger of it and every batch after that entry (a time index cut short at an entry boundary passes every
    other check). Reads the segment's tail from that entry on; None when anything fails (the caller reads batch
    headers)."""
    top = rolled_max_timestamp(log_path, base_offset, next_base_offset)
    if top is None:
        return None
    stem = log_path[: -len(".log")]
    try:
        size = _size(log_path)
        tidx = TimeIndex(stem + ".timeindex", base_offset, writable=False)
        try:
            last = tidx.entry(tidx.entry_count - 1)
        finally:
            tidx.close()
        entries = np.empty(0, dtype=[("offset", np.int64), ("position", np.int64)])
        if _size(stem + ".index") > 0:
            entries = _ordered_entries(stem, base_offset, size)
            if entries is None:
                return None
        with no_readahead(open(log_path, "rb")) as f:

            def entry_ok(i: int) -> bool:
                batch = _batch_at(f, int(entries["position"][i]), size)
                return batch is not None and batch.last_offset == int(entries["offset"][i])

            if not _time_entry_ok(f, entries, int(last.timestamp), int(last.offset), size, entry_ok):
                return None
        i = int(np.searchsorted(entries["offset"], int(last.offset), side="right")) - 1 if len(entries) else -1
        tail = int(entries["position"][i]) if i >= 0 else 0
        with mapped_range(log_path, tail, size) as mm:  # the tail alone, not the readahead around it
            reader = read_batches(log_path if mm is None else mm, position=tail, validate=True, populate=False)
            try:
                for batch in reader:
                    top = max(top, batch.max_timestamp)
                whole = reader.error is None
            finally:
                reader.close()
    except (KafkaLogError, OSError):
        return None
    return top if whole else None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1

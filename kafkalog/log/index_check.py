"""The check a segment passes before its indexes answer (KIP-263: done lazily, on first use).

One definition for both users: a ``Log`` checks an inactive segment the first time a read, a timestamp lookup or
an offset lookup needs its indexes, and the ``LogManager``'s background ``SanityChecker`` checks pending segments
ahead of reads. A segment failing it is rebuilt from its ``.log`` (``Log.recover_segments``).
"""

from __future__ import annotations

import os

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
from kafkalog.limits import LONG_MIN
from kafkalog.oserrors import OSErrorClass, classify
from kafkalog.records.scan import scan_batches

__all__ = ["check_segment", "checked_range", "checked_start_position", "is_corruption"]


def is_corruption(exc: BaseException) -> bool:
    """True for errors meaning "this segment's files are inconsistent" rather than "the disk failed" or "the
    process hit a limit" (:func:`kafkalog.oserrors.classify` decides for an ``OSError``).

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
    ``.index`` beside ``log_path`` only after they passed the strict checks against the ``.log``'s batch headers
    (the checks ``check_segment`` runs). Read-only: an archive is never written to. An index missing or failing
    its check is not used and the answer is the whole file, which is always right (the reader filters by offset).

    ``log_size`` given means the ``.log`` is not beside the indexes (a remote object whose index files were fetched
    alone, so that only a range of the ``.log`` is read): the indexes then pass Kafka's own sanity checks only,
    since the strict check needs every batch header of the ``.log``."""
    start_offset = max(offset_lo, base_offset)
    whole = (0, start_offset, _size(log_path) if log_size is None else log_size)
    stem = log_path[: -len(".log")]
    use_time = ts_lo > LONG_MIN and _size(stem + ".timeindex") > 0
    use_offsets = (start_offset > base_offset or offset_hi is not None) and _size(stem + ".index") > 0
    if not use_time and not use_offsets:
        return whole
    try:
        if log_size is None:
            starts, lasts, max_ts, size = _batch_columns(log_path)
            whole = (0, start_offset, size)
            next_offset = int(lasts[-1]) + 1 if len(lasts) else base_offset
        else:
            size = log_size
        if use_time:
            tidx = TimeIndex(stem + ".timeindex", base_offset, writable=False)
            try:
                if log_size is None:
                    tidx.strict_check(next_offset=next_offset, batch_last_offsets=lasts, batch_max_timestamps=max_ts)
                else:
                    tidx.sanity_check()
                start_offset = max(start_offset, int(tidx.lookup(ts_lo)[1]))
            finally:
                tidx.close()
        if _size(stem + ".index") <= 0:
            return 0, start_offset, size
        oidx = OffsetIndex(stem + ".index", base_offset, writable=False)
        try:
            if log_size is None:
                oidx.strict_check(size, batch_starts=starts, batch_last_offsets=lasts)
            else:
                oidx.sanity_check()
            position = int(oidx.lookup(start_offset)[1]) if start_offset > base_offset else 0
            end = size
            if offset_hi is not None:
                # An entry (o, p) says the batch at p ends at offset o; the entry after the first one with o above
                # the bound starts a batch whose offsets are all above it.
                entries = oidx.entries()
                above = np.flatnonzero(entries["offset"] > offset_hi)
                if len(above) and above[0] + 1 < len(entries):
                    end = int(entries["position"][above[0] + 1])
        finally:
            oidx.close()
    except (KafkaLogError, OSError):
        return whole
    position = position if 0 <= position < size else 0
    return position, start_offset, end if position < end <= size else size


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def _batch_columns(log_path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Start positions, last offsets and max timestamps of the whole batches of a ``.log`` (shallow scan of the
    path through ``scan_batches``, no CRC), and the file size."""
    size = os.stat(log_path).st_size
    scan = scan_batches(log_path, check_crc=False)
    h = scan.headers
    return (np.asarray(scan.positions, dtype=np.int64),
            h["base_offset"].astype(np.int64) + h["last_offset_delta"].astype(np.int64),
            h["max_timestamp"].astype(np.int64), size)

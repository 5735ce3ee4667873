"""Index entries against the ``.log`` they index, every mismatch listed: what ``kafkalog dump`` reports after the
entries, by the rules of Kafka's DumpLogSegments.

``OffsetIndex.strict_check``/``TimeIndex.strict_check`` answer "is this index sound" and stop at the first
failure; a dump lists every entry that does not match. Both work on the same numpy columns: the index entries
(``entries_array()``) and the log's batch starts and last offsets (:func:`scan_log_batches`), matched with
``searchsorted``. Only entries that point between batch starts are read one by one (as Kafka reads them), and a
time index entry's batch is decoded for its records' largest timestamp, the value Kafka compares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import KafkaLogError
from ..records.reader import read_batches
from ..records.scan import scan_batches

__all__ = [
    "LogBatches",
    "OffsetIndexMatch",
    "TimeIndexMatch",
    "live_entry_count",
    "match_offset_index",
    "match_time_index",
    "max_record_timestamp",
    "scan_log_batches",
]

#: bytes of the log scanned per step before the pages behind are given back
_WINDOW = 8 << 20


@dataclass
class LogBatches:
    """Start position, size and last offset of every readable batch of a ``.log``, in file order."""

    positions: np.ndarray
    sizes: np.ndarray
    last_offsets: np.ndarray


def scan_log_batches(log: memoryview, release: Callable[[int], None] | None = None) -> LogBatches:
    """The batch columns of a whole ``.log`` (headers only, no CRC), stopping where ``read_batches`` stops.

    Scanned in 8 MiB steps; after each step ``release(position)`` may give back the pages behind (a one-pass
    reader's ``release_before``), so checking the index of a 1 GiB segment does not keep it all resident.
    """
    parts = []
    pos, n = 0, len(log)
    while pos < n:
        end = min(n, pos + _WINDOW)
        scan = scan_batches(log, position=pos, end=end, check_crc=False)
        if scan.valid_bytes == pos and end < n:
            # nothing whole in the window: a batch larger than it, or where the readable region really ends
            end = n
            scan = scan_batches(log, position=pos, check_crc=False)
        parts.append(scan)
        if end == n:  # scanned to the end of the file: where this scan stopped is where the log stops
            break
        pos = scan.valid_bytes  # the start of the batch the window cut
        if release is not None:
            release(pos)
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return LogBatches(empty, empty, empty)
    return LogBatches(
        np.concatenate([p.positions.astype(np.int64) for p in parts]),
        np.concatenate([p.sizes.astype(np.int64) for p in parts]),
        np.concatenate([p.last_offsets.astype(np.int64) for p in parts]),
    )


def live_entry_count(offsets: np.ndarray, base_offset: int) -> int:
    """How many entries are real: a crash leaves a sparse index, and the first entry after entry 0 that holds the
    base offset (a zero relative offset) ends the real ones, as Kafka's dump reads it."""
    zero = np.flatnonzero(np.asarray(offsets[1:]) == base_offset)
    return int(zero[0]) + 1 if len(zero) else len(offsets)


@dataclass
class OffsetIndexMatch:
    """``mismatches``: (index offset, last offset of the batch at the entry's position or -1), in entry order."""

    mismatches: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class TimeIndexMatch:
    """Pairs in entry order: ``not_found`` (index offset, last offset of the first batch ending at or after it, or
    -1), ``mismatch`` (index timestamp, the batch's largest record timestamp), ``out_of_order`` (index timestamp,
    previous entry's timestamp)."""

    not_found: list[tuple[int, int]] = field(default_factory=list)
    mismatch: list[tuple[int, int]] = field(default_factory=list)
    out_of_order: list[tuple[int, int]] = field(default_factory=list)


def _batch_at(log: Any, position: int, end: int | None = None) -> Any:
    """The batch ``read_batches`` reads at ``position`` of ``log`` (within ``end``), None if none. ``log`` is the
    file's bytes, or a log read by ranges (:class:`kafkalog.verify.stream_log.RangedLog`, a remote object)."""
    if not isinstance(log, (memoryview, bytes, bytearray)):
        return log.batch_at(position, end)
    return next(iter(read_batches(log, position=position, end=end)), None)


def _batch_last_offset_at(buffer: Any, position: int, max_size: int) -> int:
    """Last offset of the batch read at ``position`` within ``max_size`` bytes (Kafka's slice), -1 if none."""
    if position < 0 or position >= len(buffer):
        return -1
    batch = _batch_at(buffer, position, min(len(buffer), position + max_size))
    return -1 if batch is None else batch.last_offset


def match_offset_index(
    offsets: np.ndarray, positions: np.ndarray, log: Any, scan: LogBatches | None = None, *, max_size: int
) -> OffsetIndexMatch:
    """Each entry's offset against the last offset of the batch at its position (read within ``max_size``)."""
    scan = scan if scan is not None else scan_log_batches(log)
    off = np.asarray(offsets, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    starts = scan.positions
    n = len(starts)
    k = np.searchsorted(starts, pos)
    kc = np.minimum(k, max(n - 1, 0))
    at_start = (k < n) & (starts[kc] == pos) if n else np.zeros(len(pos), dtype=bool)
    found = np.full(len(pos), -1, dtype=np.int64)
    if n:
        fits = at_start & (scan.sizes[kc] <= max_size)
        found[fits] = scan.last_offsets[kc[fits]]
    # an entry between batch starts (or past where the scan stopped): read there, as Kafka does
    for i in np.flatnonzero(~at_start).tolist():
        found[i] = _batch_last_offset_at(log, int(pos[i]), max_size)
    bad = np.flatnonzero(found != off)
    return OffsetIndexMatch(list(zip(off[bad].tolist(), found[bad].tolist(), strict=True)))


def max_record_timestamp(log: Any, position: int) -> int:
    """The largest record timestamp of the batch at ``position`` (what Kafka compares a time index entry with)."""
    batch = _batch_at(log, position)
    if batch is None:
        return -1
    try:
        return max([-1, *(r.timestamp for r in batch.records())])
    except KafkaLogError:  # a payload that does not decode: the header's claim is all there is
        return batch.max_timestamp


def match_time_index(
    timestamps: np.ndarray, offsets: np.ndarray, log: Any, scan: LogBatches | None = None,
    max_timestamps: Mapping[int, int] | None = None,
) -> TimeIndexMatch:
    """Each entry against the log: its offset must be a batch's last offset, the batch's largest record timestamp
    must be the entry's, and (for entries found) timestamps must increase from the previous entry.
    ``max_timestamps``: ``{batch position: largest record timestamp}`` already known (a streamed log's)."""
    scan = scan if scan is not None else scan_log_batches(log)
    ts = np.asarray(timestamps, dtype=np.int64)
    off = np.asarray(offsets, dtype=np.int64)
    lasts = scan.last_offsets
    n = len(lasts)
    out = TimeIndexMatch()
    if n == 0:
        out.not_found = [(o, -1) for o in off.tolist()]
        return out
    # the first batch holding the offset as its last offset, else the first one ending at or after it
    first_ge = np.searchsorted(np.maximum.accumulate(lasts), off, side="left")
    uniq, first_at = np.unique(lasts, return_index=True)
    q = np.minimum(np.searchsorted(uniq, off), len(uniq) - 1)
    j = np.where(uniq[q] == off, first_at[q], first_ge)
    jc = np.minimum(j, n - 1)
    log_last = np.where(j < n, lasts[jc], -1)
    hit = log_last == off
    miss = np.flatnonzero(~hit)
    out.not_found = list(zip(off[miss].tolist(), log_last[miss].tolist(), strict=True))
    hits = np.flatnonzero(hit)
    starts = scan.positions[jc[hits]].tolist()
    known = max_timestamps or {}
    found_ts = np.array([known[p] if p in known else max_record_timestamp(log, p) for p in starts], dtype=np.int64)
    bad = found_ts != ts[hits]
    out.mismatch = list(zip(ts[hits][bad].tolist(), found_ts[bad].tolist(), strict=True))
    prev = np.concatenate(([-1], ts[:-1]))[hits]
    late = prev >= ts[hits]
    out.out_of_order = list(zip(ts[hits][late].tolist(), prev[late].tolist(), strict=True))
    return out

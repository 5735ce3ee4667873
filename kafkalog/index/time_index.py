"""``.timeindex`` files: timestamp -> offset for one segment (Kafka's ``TimeIndex``).

Each 12-byte entry is (i64 timestamp, i32 offset relative to the base offset), big-endian. An entry (T, O) says
the largest timestamp seen up to offset O is T, so timestamps strictly increase. One slot is kept free for the
entry a segment writes when it is rolled or closed.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from typing import NamedTuple

import numpy as np

from kafkalog.errors import CorruptIndexError, IndexFullError, IndexStateError, InvalidOffsetError
from kafkalog.index.base import SMALL_CHECK_ENTRIES, AbstractIndex, _is_list_or_none
from kafkalog.index.search import VALUE, first_true
from kafkalog.limits import NO_TIMESTAMP

_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


#: dtype of :meth:`TimeIndex.entries_array` (native, absolute offsets)
TIME_ENTRY_DTYPE = np.dtype([("timestamp", np.int64), ("offset", np.int64)])


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """Kafka's time index over one segment; see :class:`AbstractIndex` for laziness, mmap and fallback."""

    ENTRY_SIZE = 12
    DTYPE = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])
    KEY_FIELD = "timestamp"
    VALUE_FIELD = "relative_offset"
    _FIELD_STRUCTS = (_I64, _I32)
    _FIELD_OFFSETS = (0, 8)
    _OFFSET_FIELD = VALUE

    _last_entry: TimestampOffset

    def _changed(self) -> None:
        super()._changed()
        n = self._entries if self._loaded else 0
        if n:
            ts, rel = _ENTRY.unpack_from(self._buf, (n - 1) * 12)
            self._last_entry = TimestampOffset(ts, self._base_offset + rel)
        else:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)

    def is_full(self) -> bool:
        """Full one slot early: the last slot is reserved for the entry written on roll/close."""
        self._ensure_loaded()
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when empty."""
        self._ensure_loaded()
        return self._last_entry

    # ---------------------------------------------------------------------------------------------- writing

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp exceeds the last entry's (Kafka's ``maybeAppend``).

        The same entry again is silently ignored (it happens on roll and close); an offset or timestamp going
        backwards is an error. ``skip_full_check`` lets the roll/close entry use the reserved slot.
        """
        self._check_writable()
        with self._lock:
            self._ensure_loaded()
            n = self._entries
            if not skip_full_check and n >= self._max_entries - 1:
                raise IndexFullError(f"Attempt to append to a full time index {self._path} (size = {n}).")
            last = self._last_entry
            if n and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {n} no larger than the last offset appended "
                    f"({last.offset}) to {self._path}."
                )
            if n and timestamp < last.timestamp:
                raise IndexStateError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than the last timestamp "
                    f"appended ({last.timestamp}) to {self._path}."
                )
            if timestamp > last.timestamp:
                if n >= self._max_entries:
                    raise IndexFullError(f"Attempt to append to a full time index {self._path} (size = {n}).")
                self._write_entry(_ENTRY.pack(timestamp, self.relative_offset(offset)))

    # ---------------------------------------------------------------------------------------------- reading

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target; (-1, base offset) when there is none."""
        with self._lock:
            self._ensure_loaded()
            slot = self._key_slot(target_timestamp)
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            ts, rel = _ENTRY.unpack_from(self._buf, slot * 12)
            return TimestampOffset(ts, self._base_offset + rel)

    def lookup_many(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: (timestamps, offsets) arrays shaped like ``targets``."""
        with self._lock:
            self._ensure_loaded()
            t = np.asarray(targets, dtype=np.int64)
            slots = self._slots_for_many(t)
            view = self._view()
            found = slots >= 0
            safe = np.where(found, slots, 0)
            if view.size:
                timestamps = np.where(found, view["timestamp"][safe].astype(np.int64), NO_TIMESTAMP)
                offsets = np.where(found, view["relative_offset"][safe].astype(np.int64) + self._base_offset,
                                   self._base_offset)
            else:
                timestamps = np.full(t.shape, NO_TIMESTAMP, dtype=np.int64)
                offsets = np.full(t.shape, self._base_offset, dtype=np.int64)
            del view
            return timestamps, offsets

    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry (timestamp, absolute offset); ``IndexStateError`` when out of range."""
        with self._lock:
            self._ensure_loaded()
            if not 0 <= n < self._entries:
                raise IndexStateError(
                    f"Attempt to fetch the {n}th entry from time index {self._path} which has size {self._entries}."
                )
            ts, rel = _ENTRY.unpack_from(self._buf, n * 12)
            return TimestampOffset(ts, self._base_offset + rel)

    def entries_array(self) -> np.ndarray:
        """Every entry as a native structured array (``timestamp``, ``offset`` absolute): a copy."""
        with self._lock:
            self._ensure_loaded()
            view = self._view()
            out = np.empty(view.size, dtype=TIME_ENTRY_DTYPE)
            out["timestamp"] = view["timestamp"]
            out["offset"] = view["relative_offset"].astype(np.int64) + self._base_offset
            del view
            return out

    # ---------------------------------------------------------------------------------------------- checks

    def sanity_check(self) -> None:
        """Kafka's check: last timestamp < first, last offset < base offset, or length not a multiple of 12."""
        with self._lock:
            self._ensure_loaded()
            last = self._last_entry
            if self._entries:
                first_ts = _I64.unpack_from(self._buf, 0)[0]
                if last.timestamp < first_ts:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({self._path}) has non-zero size but the last "
                        f"timestamp is {last.timestamp} which is less than the first timestamp {first_ts}"
                    )
                if last.offset < self._base_offset:
                    raise CorruptIndexError(
                        f"Corrupt time index found, time index file ({self._path}) has non-zero size but the last "
                        f"offset is {last.offset} which is less than the first offset {self._base_offset}"
                    )
            if self._length % self.ENTRY_SIZE:
                raise CorruptIndexError(
                    f"Time index file {self._path} is corrupt, found {self._length} bytes which is neither "
                    f"positive nor a multiple of {self.ENTRY_SIZE}"
                )

    def strict_check(
        self,
        next_offset: int | None = None,
        batch_last_offsets: np.ndarray | None = None,
        batch_max_timestamps: np.ndarray | None = None,
    ) -> None:
        """kafkalog's stricter check, vectorised: Kafka's sanity check, then timestamps strictly increasing (as
        ``maybe_append`` guarantees), offsets >= base and non-decreasing, offsets < ``next_offset`` (the
        segment's next offset) when given, and, given the ``.log``'s batch last offsets (sorted) and max
        timestamps, offsets inside the log and no earlier batch with a larger timestamp than the entry.
        """
        self.sanity_check()
        small = _is_list_or_none(batch_last_offsets) and _is_list_or_none(batch_max_timestamps)
        with self._lock:
            self._ensure_loaded()
            n = self._entries
            if small and n <= SMALL_CHECK_ENTRIES:
                values = struct.unpack_from(">" + "qi" * n, self._buf, 0) if n else ()
            else:
                small = False
                view = self._view()
                ts = view["timestamp"].astype(np.int64)
                off = view["relative_offset"].astype(np.int64) + self._base_offset
                del view
        if small:
            base = self._base_offset
            self._strict_check_small(values[0::2], [base + r for r in values[1::2]], next_offset,
                                     batch_last_offsets, batch_max_timestamps)
            return
        if ts.size == 0:
            return

        def fail(i: int, why: str) -> None:
            raise CorruptIndexError(
                f"Time index file {self._path}: entry {i} (timestamp {int(ts[i])}, offset {int(off[i])}) {why}"
            )

        bad = first_true(ts[1:] <= ts[:-1])
        if bad >= 0:
            fail(bad + 1, "does not increase the timestamp")
        bad = first_true(off < self._base_offset)
        if bad >= 0:
            fail(bad, f"is below the base offset {self._base_offset}")
        bad = first_true(off[1:] < off[:-1])
        if bad >= 0:
            fail(bad + 1, "moves the offset backwards")
        if next_offset is not None:
            bad = first_true(off >= next_offset)
            if bad >= 0:
                fail(bad, f"is at or past the segment's next offset {next_offset}")
        if batch_last_offsets is None:
            return
        # Lookups need: the offset is in the log, and no batch that ends before the entry's offset holds a larger
        # timestamp than the entry (else a search from that offset would miss it).
        last = np.asarray(batch_last_offsets, dtype=np.int64)
        if last.size:
            bad = first_true(off > last[-1])
            if bad >= 0:
                fail(bad, f"is past the log's last offset {int(last[-1])}")
        if batch_max_timestamps is not None and last.size:
            prefix_max = np.maximum.accumulate(np.asarray(batch_max_timestamps, dtype=np.int64))
            k = np.searchsorted(last, off)  # the batch holding the entry's offset
            before = np.where(k > 0, prefix_max[np.maximum(k - 1, 0)], -1)
            bad = first_true(before > ts)
            if bad >= 0:
                i = bad
                fail(i, f"is below the max timestamp {int(before[i])} of the batches before its offset")

    def _strict_check_small(self, ts: tuple, off: list, next_offset: int | None, lasts: list | None,
                            max_ts: list | None) -> None:
        """``strict_check`` for a few entries and the Python lists of ``small_batch_table`` (sorted): the same
        checks in the same order, so the first failure and its message are the vectorised path's."""
        n = len(ts)
        if n == 0:
            return
        base = self._base_offset

        def fail(i: int, why: str) -> None:
            raise CorruptIndexError(f"Time index file {self._path}: entry {i} (timestamp {ts[i]}, offset {off[i]}) {why}")

        for i in range(1, n):
            if ts[i] <= ts[i - 1]:
                fail(i, "does not increase the timestamp")
        for i in range(n):
            if off[i] < base:
                fail(i, f"is below the base offset {base}")
        for i in range(1, n):
            if off[i] < off[i - 1]:
                fail(i, "moves the offset backwards")
        if next_offset is not None:
            for i in range(n):
                if off[i] >= next_offset:
                    fail(i, f"is at or past the segment's next offset {next_offset}")
        if lasts is None:
            return
        if lasts:
            for i in range(n):
                if off[i] > lasts[-1]:
                    fail(i, f"is past the log's last offset {lasts[-1]}")
        if max_ts is not None and lasts:
            prefix_max = list(itertools.accumulate(max_ts, max))
            for i in range(n):
                k = bisect.bisect_left(lasts, off[i])  # the batch holding the entry's offset
                before = prefix_max[k - 1] if k > 0 else -1
                if before > ts[i]:
                    fail(i, f"is below the max timestamp {before} of the batches before its offset")

"""``.index`` files: a sparse map from offset to byte position in the segment's ``.log`` (Kafka's ``OffsetIndex``).

Each 8-byte entry is (i32 offset relative to the base offset, i32 position), big-endian. Lookups answer with the
largest indexed offset <= the target, or (base offset, 0) below the first entry, as Kafka does.
"""

from __future__ import annotations

import bisect
import struct
from typing import NamedTuple

import numpy as np

from kafkalog.errors import CorruptIndexError, IndexFullError, IndexStateError, InvalidOffsetError
from kafkalog.index.base import SMALL_CHECK_ENTRIES, AbstractIndex, _is_list_or_none
from kafkalog.index.search import KEY, VALUE, first_true

_ENTRY = struct.Struct(">ii")
_I32 = struct.Struct(">i")

#: dtype of :meth:`OffsetIndex.entries_array` (native, absolute offsets)
OFFSET_ENTRY_DTYPE = np.dtype([("offset", np.int64), ("position", np.int64)])


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """Kafka's offset index over one segment; see :class:`AbstractIndex` for laziness, mmap and fallback."""

    ENTRY_SIZE = 8
    DTYPE = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
    KEY_FIELD = "relative_offset"
    VALUE_FIELD = "position"
    _FIELD_STRUCTS = (_I32, _I32)
    _FIELD_OFFSETS = (0, 4)
    _OFFSET_FIELD = KEY

    _last_offset: int

    def _changed(self) -> None:
        super()._changed()
        n = self._entries if self._loaded else 0
        self._last_offset = (
            self._base_offset + _I32.unpack_from(self._buf, (n - 1) * 8)[0] if n else self._base_offset
        )

    @property
    def last_offset(self) -> int:
        """The last indexed offset (the base offset when empty)."""
        self._ensure_loaded()
        return self._last_offset

    # ---------------------------------------------------------------------------------------------- writing

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); the offset must exceed the last one (Kafka's ``InvalidOffsetException``)."""
        self._check_writable()
        with self._lock:
            self._ensure_loaded()
            if self._entries >= self._max_entries:
                raise IndexFullError(f"Attempt to append to a full index {self._path} (size = {self._entries}).")
            if self._entries and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset {offset} to position {self._entries} no larger than the last "
                    f"offset appended ({self._last_offset}) to {self._path}."
                )
            if not 0 <= position <= 2**31 - 1:
                raise IndexStateError(f"Position {position} does not fit an index entry of {self._path}")
            self._write_entry(_ENTRY.pack(self.relative_offset(offset), position))

    # ---------------------------------------------------------------------------------------------- reading

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; (base offset, 0) when there is none."""
        with self._lock:
            self._ensure_loaded()
            slot = self._key_slot(target_offset - self._base_offset)
            if slot < 0:
                return OffsetPosition(self._base_offset, 0)
            rel, pos = _ENTRY.unpack_from(self._buf, slot * 8)
            return OffsetPosition(self._base_offset + rel, pos)

    def lookup_with_previous(self, target_offset: int) -> tuple[OffsetPosition, OffsetPosition | None]:
        """:meth:`lookup`, plus the entry before the one found (None when there is none): a reader that starts
        there sees the batch at the found entry after the batch before it, so a base offset damaged in it (the
        CRC does not cover it) shows as a step backwards or a jump."""
        with self._lock:
            self._ensure_loaded()
            slot = self._key_slot(target_offset - self._base_offset)
            if slot < 0:
                return OffsetPosition(self._base_offset, 0), None
            rel, pos = _ENTRY.unpack_from(self._buf, slot * 8)
            if slot == 0:
                return OffsetPosition(self._base_offset + rel, pos), None
            prev_rel, prev_pos = _ENTRY.unpack_from(self._buf, (slot - 1) * 8)
            return OffsetPosition(self._base_offset + rel, pos), OffsetPosition(self._base_offset + prev_rel, prev_pos)

    def lookup_many(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised :meth:`lookup`: (offsets, positions) arrays shaped like ``targets``."""
        with self._lock:
            self._ensure_loaded()
            t = np.asarray(targets, dtype=np.int64) - self._base_offset
            slots = self._slots_for_many(t)
            view = self._view()
            found = slots >= 0
            safe = np.where(found, slots, 0)
            if view.size:
                offsets = np.where(found, view["relative_offset"][safe].astype(np.int64) + self._base_offset,
                                   self._base_offset)
                positions = np.where(found, view["position"][safe].astype(np.int64), 0)
            else:
                offsets = np.full(t.shape, self._base_offset, dtype=np.int64)
                positions = np.zeros(t.shape, dtype=np.int64)
            del view
            return offsets, positions

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> OffsetPosition | None:
        """An entry surely past a fetch of ``fetch_size`` bytes from ``fetch_offset`` (Kafka's rule), or None."""
        with self._lock:
            self._ensure_loaded()
            slot = self._slot_for(fetch_offset.position + fetch_size, VALUE, upper=True)
            if slot < 0:
                return None
            rel, pos = _ENTRY.unpack_from(self._buf, slot * 8)
            return OffsetPosition(self._base_offset + rel, pos)

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry (absolute offset)."""
        with self._lock:
            self._ensure_loaded()
            if not 0 <= n < self._entries:
                raise IndexStateError(
                    f"Attempt to fetch the {n}th entry from index {self._path}, which has size {self._entries}."
                )
            rel, pos = _ENTRY.unpack_from(self._buf, n * 8)
            return OffsetPosition(self._base_offset + rel, pos)

    def _strict_check_small(self, rel: tuple, pos: tuple, log_size: int, starts: list | None,
                            lasts: list | None) -> None:
        """``strict_check`` for a few entries and the Python lists of ``small_batch_table`` (sorted): the same
        checks in the same order, so the first failure and its message are the vectorised path's."""
        n = len(rel)
        if n == 0:
            return
        base = self._base_offset

        def fail(i: int, why: str) -> None:
            raise CorruptIndexError(f"Index file {self._path}: entry {i} (offset {base + rel[i]}, position {pos[i]}) {why}")

        for i in range(n):
            if rel[i] < 0:
                fail(i, f"is below the base offset {base}")
        for i in range(1, n):
            if rel[i] <= rel[i - 1]:
                fail(i, "does not increase the offset")
        for i in range(n):
            if pos[i] < 0 or pos[i] >= log_size:
                fail(i, f"points outside the log (size {log_size})")
        for i in range(1, n):
            if pos[i] <= pos[i - 1]:
                fail(i, "does not increase the position")
        if starts is None:
            return
        top = max(len(starts) - 1, 0)
        at_c = []
        for i in range(n):
            at = bisect.bisect_left(starts, pos[i])
            c = min(at, top)
            if not (at < len(starts) and starts[c] == pos[i]):
                fail(i, "does not point at a batch start")
            at_c.append(c)
        if lasts is None:
            return
        for i in range(n):
            before = lasts[at_c[i] - 1] if at_c[i] > 0 else base - 1
            if before >= base + rel[i]:
                fail(i, f"names an offset the batch before its position already holds (last offset {before})")
        if lasts:
            for i in range(n):
                if base + rel[i] > lasts[-1]:
                    fail(i, f"is past the log's last offset {lasts[-1]}")

    def entries_array(self) -> np.ndarray:
        """Every entry as a native structured array (``offset`` absolute, ``position``): a copy."""
        with self._lock:
            self._ensure_loaded()
            view = self._view()
            out = np.empty(view.size, dtype=OFFSET_ENTRY_DTYPE)
            out["offset"] = view["relative_offset"].astype(np.int64) + self._base_offset
            out["position"] = view["position"]
            del view
            return out

    # ---------------------------------------------------------------------------------------------- checks

    def sanity_check(self) -> None:
        """Kafka's check: entries with a last offset below the base offset, or a length not a multiple of 8."""
        self._ensure_loaded()
        if self._entries and self._last_offset < self._base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file {self._path} has non-zero size but the last offset is "
                f"{self._last_offset} which is less than the base offset {self._base_offset}"
            )
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {self._path} is corrupt, found {self._length} bytes which is neither positive nor a "
                f"multiple of {self.ENTRY_SIZE}"
            )

    def strict_check(
        self,
        log_size: int,
        batch_starts: np.ndarray | None = None,
        batch_last_offsets: np.ndarray | None = None,
    ) -> None:
        """kafkalog's stricter check, vectorised: Kafka's sanity check, then offsets >= base and strictly
        increasing, positions strictly increasing and inside the ``.log`` (< ``log_size``), and, given the
        ``.log``'s batch start positions (sorted) and their last offsets, every entry pointing at a batch start,
        with an offset no batch before that position holds and no later than the log's last offset.
        """
        self.sanity_check()
        small = _is_list_or_none(batch_starts) and _is_list_or_none(batch_last_offsets)
        with self._lock:
            self._ensure_loaded()
            n = self._entries
            if small and n <= SMALL_CHECK_ENTRIES:
                values = struct.unpack_from(f">{2 * n}i", self._buf, 0) if n else ()
            else:
                small = False
                view = self._view()
                rel = view["relative_offset"].astype(np.int64)
                pos = view["position"].astype(np.int64)
                del view
        if small:
            self._strict_check_small(values[0::2], values[1::2], log_size, batch_starts, batch_last_offsets)
            return
        if rel.size == 0:
            return
        base = self._base_offset

        def fail(i: int, why: str) -> None:
            raise CorruptIndexError(
                f"Index file {self._path}: entry {i} (offset {base + int(rel[i])}, position {int(pos[i])}) {why}"
            )

        bad = first_true(rel < 0)
        if bad >= 0:
            fail(bad, f"is below the base offset {base}")
        bad = first_true(rel[1:] <= rel[:-1])
        if bad >= 0:
            fail(bad + 1, "does not increase the offset")
        bad = first_true((pos < 0) | (pos >= log_size))
        if bad >= 0:
            fail(bad, f"points outside the log (size {log_size})")
        bad = first_true(pos[1:] <= pos[:-1])
        if bad >= 0:
            fail(bad + 1, "does not increase the position")
        if batch_starts is None:
            return
        starts = np.asarray(batch_starts, dtype=np.int64)
        at = np.searchsorted(starts, pos)
        at_c = np.minimum(at, max(starts.size - 1, 0))
        hit = (at < starts.size) & (starts[at_c] == pos) if starts.size else np.zeros(pos.shape, dtype=bool)
        bad = first_true(~hit)
        if bad >= 0:
            fail(bad, "does not point at a batch start")
        if batch_last_offsets is not None:
            # What lookups need, for every Kafka writer (per-batch appends, the cleaner's largest retained offset,
            # legacy per-append entries): the batches before the entry's position all end below its offset, and
            # the offset is inside the log. Equality with the batch's last offset is too strict for the cleaner.
            last = np.asarray(batch_last_offsets, dtype=np.int64)
            absolute = rel + base
            before = np.where(at_c > 0, last[np.maximum(at_c - 1, 0)], base - 1)
            bad = first_true(before >= absolute)
            if bad >= 0:
                i = bad
                fail(i, f"names an offset the batch before its position already holds (last offset {int(before[i])})")
            if last.size:
                bad = first_true(absolute > last[-1])
                if bad >= 0:
                    fail(bad, f"is past the log's last offset {int(last[-1])}")

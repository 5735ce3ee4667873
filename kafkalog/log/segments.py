"""LogSegments: a partition's segments ordered by base offset (Kafka's ``LogSegments``).

A sorted list of base offsets plus a dict, searched with ``bisect``: floor/lower/higher lookups are O(log n) and
iteration is in offset order. Mutations take a lock; readers work on snapshots so a concurrent roll never breaks
an iteration in progress.

A clean lazy load (KIP-263) adds its inactive segments as base offsets only (``add_lazy``): the dict holds None
for them and the ``LogSegment`` object is made, once, by whichever accessor first returns that segment. A
partition whose old segments nobody reads never builds them; ``base_offsets``, ``len`` and ``in`` never do.
"""

from __future__ import annotations

import bisect
import functools
import operator
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kafkalog.names import file_name
from kafkalog.segment.log_segment import LogSegment

_is_made = functools.partial(operator.is_not, None)


class LogSegments:
    """The segments of one partition, keyed and ordered by base offset."""

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._segments: dict[int, LogSegment | None] = {}  # None: added lazily, not made yet
        self._lock = threading.Lock()
        self._dir: Path | None = None  # where the lazily added segments live (add_lazy)
        self._make: Callable[[Path, int], LogSegment] | None = None

    def _at(self, base: int) -> LogSegment:
        """The segment at ``base``, made now if it was added lazily (caller holds the lock)."""
        seg = self._segments[base]
        if seg is None:
            seg = self._segments[base] = self._make(self._dir, base)  # type: ignore[misc,arg-type]
        return seg

    # --- mutation ------------------------------------------------------------------------------------------------

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert (or replace) the segment at its base offset; returns the segment it replaced, if any."""
        with self._lock:
            base = segment.base_offset
            previous = self._segments.get(base)
            if previous is None:
                bisect.insort(self._offsets, base)
            self._segments[base] = segment
            return previous

    def add_lazy(self, bases: Iterable[int], dir: Path, make: Callable[[Path, int], LogSegment]) -> None:
        """Add segments by base offset alone; ``make(dir, base)`` builds one when it is first returned. For a
        loader that knows the files are there and need nothing done (a clean lazy load's inactive segments).
        A base already present keeps its segment."""
        with self._lock:
            self._dir, self._make = dir if isinstance(dir, Path) else Path(dir), make
            segments = self._segments
            # a fresh map (the loader's case) takes them all without a Python loop over them
            new = [b for b in bases if b not in segments] if segments else list(bases)
            if not new:
                return
            segments.update(dict.fromkeys(new))
            self._offsets.extend(new)
            self._offsets.sort()

    def set_maker(self, dir: Path, make: Callable[[Path, int], LogSegment]) -> None:
        """How to build a segment of ``dir`` from its base offset alone (the loader's), for :meth:`unmake`."""
        with self._lock:
            self._dir, self._make = dir if isinstance(dir, Path) else Path(dir), make

    def is_made(self, base_offset: int) -> bool:
        """True when the segment at ``base_offset`` exists as an object (asking builds nothing)."""
        return self._segments.get(base_offset) is not None

    def unmake(self, segment: LogSegment) -> bool:
        """Forget the object of an inactive segment, keeping its base offset: the state a lazy load leaves it in,
        built again on next use. Only for a segment whose handles are released and whose every byte is on disk
        (the caller's to know); never the active one. False when it is not this map's segment at its base, is
        the last one, or there is no maker."""
        with self._lock:
            base = segment.base_offset
            if self._make is None or self._segments.get(base) is not segment or base == self._offsets[-1]:
                return False
            self._segments[base] = None
            return True

    def remove(self, base_offset: int) -> LogSegment | None:
        with self._lock:
            if base_offset not in self._segments:
                return None
            seg = self._at(base_offset)  # the caller deletes its files or keeps using it
            del self._segments[base_offset]
            del self._offsets[bisect.bisect_left(self._offsets, base_offset)]
            return seg

    def clear(self) -> list[LogSegment]:
        with self._lock:
            segs = [self._at(o) for o in self._offsets]
            self._offsets.clear()
            self._segments.clear()
            return segs

    # --- queries -------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._offsets)

    def __bool__(self) -> bool:
        return bool(self._offsets)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def __contains__(self, base_offset: int) -> bool:
        return base_offset in self._segments

    def get(self, base_offset: int) -> LogSegment | None:
        seg = self._segments.get(base_offset)
        if seg is not None or base_offset not in self._segments:
            return seg
        with self._lock:
            return self._at(base_offset) if base_offset in self._segments else None

    def base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._offsets)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """Segments in order; with bounds, those whose base offset is in ``[floor(from), to)`` as Kafka's
        ``values(from, to)`` (the segment holding ``from`` is included)."""
        with self._lock:
            offsets = self._offsets
            lo = 0
            if from_offset is not None:
                lo = max(0, bisect.bisect_right(offsets, from_offset) - 1)
            hi = len(offsets) if to_offset is None else bisect.bisect_left(offsets, to_offset)
            return [self._at(o) for o in offsets[lo:hi]]

    @property
    def first(self) -> LogSegment | None:
        with self._lock:
            return self._at(self._offsets[0]) if self._offsets else None

    @property
    def last(self) -> LogSegment | None:
        """The active segment."""
        with self._lock:
            return self._at(self._offsets[-1]) if self._offsets else None

    active = last

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._at(self._offsets[i - 1]) if i else None

    def lower(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset < ``offset``."""
        with self._lock:
            i = bisect.bisect_left(self._offsets, offset)
            return self._at(self._offsets[i - 1]) if i else None

    def higher(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._at(self._offsets[i]) if i < len(self._offsets) else None

    def floor_base(self, offset: int) -> int | None:
        """The largest base offset <= ``offset`` (builds no segment)."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._offsets[i - 1] if i else None

    def higher_base(self, offset: int) -> int | None:
        """The smallest base offset > ``offset`` (builds no segment)."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            return self._offsets[i] if i < len(self._offsets) else None

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """Every segment whose base offset > the base of the segment holding ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset)
            floor_base = self._offsets[i - 1] if i else None
            start = bisect.bisect_right(self._offsets, floor_base) if floor_base is not None else 0
            return [self._at(o) for o in self._offsets[start:]]

    def inactive(self) -> list[LogSegment]:
        """Every segment but the active one."""
        with self._lock:
            return [self._at(o) for o in self._offsets[:-1]]

    def made(self) -> list[LogSegment]:
        """The segments that exist as objects, in order; lazily added ones nobody used are skipped (they hold no
        descriptor, mapping or state to close)."""
        with self._lock:
            return list(filter(_is_made, map(self._segments.__getitem__, self._offsets)))  # no Python loop

    def size_in_bytes(self) -> int:
        """Bytes of every segment's ``.log``: a lazily added segment is stat'ed, not built (size-based retention
        asks on every pass, and building all of a partition's segments for a sum would undo the lazy load)."""
        with self._lock:
            items = [(base, self._segments[base]) for base in self._offsets]
            where = self._dir
        total = 0
        for base, seg in items:
            total += seg.size if seg is not None else os.stat(file_name(where, base, ".log")).st_size  # type: ignore[arg-type]
        return total

    # --- bulk lifecycle ------------------------------------------------------------------------------------------

    def close(self) -> None:
        for seg in self.made():
            seg.close()

    def close_handlers(self) -> None:
        for seg in self.made():
            seg.close_handlers()

    def update_parent_dir(self, new_dir: str | Path) -> None:
        with self._lock:
            if self._make is not None:
                self._dir = Path(new_dir)
        for seg in self.made():
            seg.update_parent_dir(new_dir)

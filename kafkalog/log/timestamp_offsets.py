"""Timestamps to offsets for an archived partition: Kafka's ``ListOffsets`` by timestamp, without a broker.

Kafka's rule (``UnifiedLog.fetchOffsetByTimestamp``): the first segment whose largest timestamp is >= T, then in
it (``LogSegment.findOffsetByTimestamp``) the time index entry at or below T, the offset index entry at or below
that entry's offset, and from there the first batch whose max timestamp is >= T and its first record with
timestamp >= T (:func:`kafkalog.segment.reads.search_for_timestamp`). The answer is that record's offset: the
earliest offset whose timestamp is >= T; None when no record is that late.

Each step reads as little as it can, and no index entry is trusted unchecked:

* a rolled segment's largest timestamp is its ``.timeindex``'s last entry (Kafka appends the segment's max when it
  rolls): on local disk checked against the ``.log`` and raised by any batch after it, as Kafka's
  ``readLargestTimestamp`` does (:func:`kafkalog.log.index_check.checked_max_timestamp`); of a remote object, the last 12 bytes with one ranged read (Kafka's sanity checks only: size, offset in the
  segment); of an Aiven tiered segment, the time index out of its ``.indexes``. When that is unusable the batch
  headers of the ``.log`` give it (CRC-checked, records not decoded). The last segment needs none: nothing follows.
* the segment found is searched from the position its indexes give (on local disk checked against the ``.log``
  as :func:`kafkalog.log.index_check.checked_range` checks a seek; remote ones pass Kafka's sanity checks, and a
  position that is not a whole CRC-valid batch of the segment is searched again from the start), reading the
  ``.log`` in bounded ranged chunks, not the whole object; nothing found there (an index that overstated the
  largest timestamp) moves on to the next segment.
* a damaged batch met by the search before the answer could hold it: a start bound is the offset right after the
  last whole batch before it, an end bound is searched for in the following segments (``past_damage``), so a
  reader of the range meets the damage and reports it rather than the range leaving it out.
* remote segments' largest timestamps are fetched on a small thread pool, a window at a time, in segment order.

Unlike Kafka's broker, a segment without any timestamp (magic 0) is not given its file's mtime as its largest
timestamp: an archive's mtimes are those of the copy.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.tiered import AivenSegment, is_aiven_item, materialize
from kafkalog.errors import KafkaLogError
from kafkalog.log.index_check import checked_max_timestamp, checked_range
from kafkalog.records.batch import LOG_OVERHEAD
from kafkalog.records.reader import read_batches
from kafkalog.segment.reads import search_for_timestamp

__all__ = ["PartitionTimes", "indexes_on_disk", "offset_for_timestamp"]

#: bytes of a ``.log`` the search reads first; each further read doubles, up to :data:`MAX_CHUNK`
FIRST_CHUNK = 256 << 10
MAX_CHUNK = 8 << 20
#: remote segments whose largest timestamps are fetched at once (the pool's size)
WORKERS = 16
_ENTRY = struct.Struct(">qi")
_NO_UPPER = 1 << 63


class BatchWalk:
    """The batches of one ``.log`` from ``start`` in file order, read with ``read(start, end) -> bytes`` in
    growing chunks; CRC-checked. Stops at the first bad or torn batch: ``damaged`` then says so and ``next_offset``
    is the offset after the last whole batch (the segment's base offset when there was none)."""

    def __init__(self, read: Callable[[int, int], bytes], start: int, size: int, base_offset: int) -> None:
        self.read, self.start, self.size = read, start, size
        self.damaged = False
        self.next_offset = base_offset

    def __iter__(self) -> Iterator[Any]:
        pos, chunk = self.start, FIRST_CHUNK
        while pos < self.size:
            data = self.read(pos, min(self.size, pos + chunk))
            reader = read_batches(data, validate=True)
            for batch in reader:
                self.next_offset = batch.last_offset + 1
                yield batch
            used = reader.valid_bytes
            if data and used == len(data):
                pos += used
                continue
            # a batch cut by the end of the chunk is read again whole; anything else is damage
            rest = data[used:]
            need = LOG_OVERHEAD + int.from_bytes(rest[8:12], "big", signed=True) if len(rest) >= LOG_OVERHEAD else 0
            if need > len(rest) and pos + used + need <= self.size:
                pos, chunk = pos + used, max(min(chunk * 2, MAX_CHUNK), need)
                continue
            self.damaged = True
            return


def _walk(item: Any, start: int, size: int, options: dict[str, str] | None, rsm: Any) -> BatchWalk:
    """A :class:`BatchWalk` over the ``.log`` of ``item`` (local file, remote object or Aiven segment)."""
    if is_aiven_item(item):
        seg = AivenSegment.open_item(item, rsm=rsm, options=options)
        return BatchWalk(lambda a, b: bytes(seg.read(a, b)), start, size, item.base_offset)
    return BatchWalk(lambda a, b: storage.read_range(item.path, a, b, options), start, size, item.base_offset)


@contextlib.contextmanager
def indexes_on_disk(item: Any, options: dict[str, str] | None = None, rsm: Any = None) -> Iterator[Any]:
    """``item`` with its index files readable on local disk for the block's duration: itself when local; a scratch
    copy of a remote segment's index objects (not the ``.log``); an Aiven segment's indexes out of its
    ``.indexes`` (the item then carries the original segment's size). ``size_bytes`` is the ``.log``'s size."""
    if not storage.is_remote(item.path) and not is_aiven_item(item):
        yield item
        return
    with storage.scratch_dir() as root:
        if is_aiven_item(item):
            yield materialize(item, root, rsm=rsm, options=options, with_log=False)
        else:
            yield storage.stage_segment(item, root, options, with_log=False)


def header_max_timestamp(item: Any, options: dict[str, str] | None = None, rsm: Any = None) -> int | None:
    """The largest batch max timestamp of a segment's ``.log`` from its batch headers (CRC-checked, records not
    decoded); None when a damaged batch hides part of it."""
    size = item.size_bytes if not is_aiven_item(item) else _aiven_size(item, options, rsm)
    walk = _walk(item, 0, size, options, rsm)
    top = -1
    for batch in walk:
        top = max(top, batch.max_timestamp)
    return None if walk.damaged else top


def _aiven_size(item: Any, options: dict[str, str] | None, rsm: Any) -> int:
    return AivenSegment.open_item(item, rsm=rsm, options=options).size


def index_max_timestamp(item: Any, next_base: int, options: dict[str, str] | None = None, rsm: Any = None) -> int | None:
    """A rolled segment's largest timestamp as its time index's last entry says (see the module docstring for
    the checks); None when the index cannot say."""
    if not storage.is_remote(item.path) and not is_aiven_item(item):
        return checked_max_timestamp(item.path, item.base_offset, next_base)
    if is_aiven_item(item):
        with indexes_on_disk(item, options, rsm) as local:
            return _timeindex_file_top(local.sibling(".timeindex"), item.base_offset, next_base)
    size = item.timeindex_size
    if size < _ENTRY.size or size % _ENTRY.size:
        return None
    data = storage.read_range(item.sibling(".timeindex"), size - _ENTRY.size, size, options)
    return _last_entry_top(data, item.base_offset, next_base)


def _timeindex_file_top(path: str, base_offset: int, next_base: int) -> int | None:
    """The last entry of a time index file without its ``.log`` (Kafka's sanity checks: whole entries, offset in
    the segment)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data or len(data) % _ENTRY.size:
        return None
    first = _ENTRY.unpack_from(data, 0)[0]
    top = _last_entry_top(data[-_ENTRY.size :], base_offset, next_base)
    return top if top is not None and top >= first else None


def _last_entry_top(entry: bytes, base_offset: int, next_base: int) -> int | None:
    if len(entry) != _ENTRY.size:
        return None
    ts, rel = _ENTRY.unpack(entry)
    if rel < 0 or not base_offset <= base_offset + rel < next_base or ts < 0 or (ts == 0 and rel == 0):
        return None  # an unused (zero) slot or an entry outside the segment says nothing
    return ts


def largest_timestamp(item: Any, next_base: int, options: dict[str, str] | None = None, rsm: Any = None) -> int | None:
    """A rolled segment's largest timestamp: the time index's, else the batch headers'; None when damage hides
    it (the segment is then searched)."""
    try:
        top = index_max_timestamp(item, next_base, options, rsm)
    except (KafkaLogError, OSError):
        top = None
    return top if top is not None else header_max_timestamp(item, options, rsm)


def search_segment(item: Any, timestamp: int, options: dict[str, str] | None = None,
                   rsm: Any = None) -> tuple[int | None, bool]:  # fmt: skip
    """Kafka's ``findOffsetByTimestamp`` in one segment: (the first offset whose timestamp >= ``timestamp``, or
    None when no record of the segment is that late; False) or, when the search meets a damaged batch first, (the
    offset after the last whole batch before it, True)."""
    with indexes_on_disk(item, options, rsm) as local:
        size = local.size_bytes
        position, _, _ = checked_range(local.path, item.base_offset, item.base_offset, ts_lo=timestamp,
                                       log_size=None if local is item else size)  # fmt: skip
    walk = _walk(item, position, size, options, rsm)
    found = search_for_timestamp(_first_checked(walk, item.base_offset), timestamp, item.base_offset)
    if found is None and walk.damaged and position > 0:  # maybe a wrong index position: from the start
        walk = _walk(item, 0, size, options, rsm)
        found = search_for_timestamp(_first_checked(walk, item.base_offset), timestamp, item.base_offset)
    if found is not None:
        return found.offset, False
    return (walk.next_offset, True) if walk.damaged else (None, False)


def _first_checked(walk: BatchWalk, base_offset: int) -> Iterable[Any]:
    """The walk's batches; a first batch below the segment's base offset ends it as damage (a wrong index
    position)."""
    for i, batch in enumerate(walk):
        if i == 0 and batch.base_offset < base_offset:
            walk.damaged = True
            return
        yield batch


class PartitionTimes:
    """Timestamp lookups over one partition's segments (``SegmentItem``s in offset order), each rolled segment's
    largest timestamp found once, on first need, and shared by every lookup."""

    def __init__(self, items: Sequence[Any], options: dict[str, str] | None = None, rsm: Any = None,
                 workers: int = WORKERS) -> None:  # fmt: skip
        self.items, self.options, self.rsm, self.workers = list(items), options, rsm, workers
        self._tops: dict[int, int | None] = {}

    def _next_base(self, i: int) -> int:
        return self.items[i + 1].base_offset if i + 1 < len(self.items) else _NO_UPPER

    def top(self, i: int) -> int | None:
        """Segment ``i``'s largest timestamp (None: unknown); remote ones fetched a window at a time."""
        if i not in self._tops:
            remote = storage.is_remote(self.items[i].path) or is_aiven_item(self.items[i])
            window = range(i, min(i + (self.workers if remote else 1), len(self.items) - 1))
            if len(window) > 1:
                with ThreadPoolExecutor(min(self.workers, len(window))) as pool:
                    tops = list(pool.map(lambda j: largest_timestamp(self.items[j], self._next_base(j), self.options,
                                                                     self.rsm), window))  # fmt: skip
                self._tops.update(zip(window, tops, strict=True))
            else:
                self._tops[i] = largest_timestamp(self.items[i], self._next_base(i), self.options, self.rsm)
        return self._tops[i]

    def offset_for(self, timestamp: int, not_below: int | None = None, *, past_damage: bool = False) -> int | None:
        """The earliest offset whose timestamp is >= ``timestamp`` (Kafka's ListOffsets); None when none is.

        ``not_below``: an offset known to be at or below the answer (an earlier timestamp's answer): the segments
        wholly below it are not looked at. A damaged batch met before the answer could hold it: by default the
        answer is then the offset after the last whole batch before the damage (the earliest it can be: a start
        bound that includes the damage); ``past_damage`` goes on with the next segment instead (the latest it can
        be: an end bound that includes the damaged segment). Either way a reader of the range meets the damage."""
        for i, item in enumerate(self.items):
            if not_below is not None and self._next_base(i) <= not_below:
                continue
            if i + 1 < len(self.items):
                top = self.top(i)
                if top is not None and top < timestamp:
                    continue
            found, damaged = search_segment(item, timestamp, self.options, self.rsm)
            if found is not None and not (damaged and past_damage):
                return found
        return None


def offset_for_timestamp(items: Sequence[Any], timestamp: int, options: dict[str, str] | None = None,
                         rsm: Any = None) -> int | None:  # fmt: skip
    """The earliest offset of the partition whose timestamp is >= ``timestamp`` (:class:`PartitionTimes`)."""
    return PartitionTimes(items, options, rsm).offset_for(timestamp)

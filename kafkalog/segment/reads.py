"""Reads of a segment by offset and timestamp: Kafka's ``LogSegment.read``, ``translateOffset``,
``findOffsetByTimestamp`` and ``readNextOffset``, plus ``read_valid``, the checked read ``Log.read`` serves from.

``SegmentReads`` is a mixin of ``LogSegment``: it uses the segment's indexes (``_offset_index``,
``_time_index``, ``_txn_index``), ``scan``, ``size``, ``log_path`` and ``_base_offset``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from kafkalog.errors import CorruptRecordError, InvalidArgumentError
from kafkalog.index.offset_index import OffsetPosition
from kafkalog.records.batch import RecordBatch
from kafkalog.segment.recovery import I32_MAX


class TimestampAndOffset(NamedTuple):
    """Kafka's ListOffsets answer: the record found, and its batch's leader epoch (None for magic < 2)."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


def _offset_span(batch: RecordBatch) -> tuple[int, int]:
    """(first, last) offset of a batch (v2, or a legacy message set) as its header states them, without
    decompressing: a legacy compressed wrapper stores only its last offset, so that stands for both."""
    last = batch.last_offset
    return (batch.base_offset if batch.magic >= 2 else last), last


def served_span(batch: RecordBatch) -> tuple[int, int]:
    """(first, last) offset of the records a reader gets from a batch. A legacy wrapper is opened for its inner
    offsets (the reader decompresses it next anyway, from the same cache): a magic 1 wrapper's offset places
    its relative inner offsets, so damage to it shifts them all, and a magic 0 wrapper's offset must be its last
    inner offset. CorruptRecordError when it is not. Public: salvage keeps a batch by the same span a read serves."""
    if batch.magic >= 2:
        return batch.base_offset, batch.last_offset
    messages = batch.messages()
    if not messages or messages[-1].offset != batch.last_offset:
        raise CorruptRecordError(f"wrapper offset {batch.last_offset} is not the offset of its last inner message",
                                 position=batch.position)
    return messages[0].offset, batch.last_offset


def _successor_first(batch: RecordBatch | None) -> float:
    """The first offset a batch claims, as evidence about the batch before it; infinity when there is no batch
    or its CRC fails (its bytes then tell nothing)."""
    if batch is None:
        return math.inf
    try:
        batch.ensure_valid()
        return served_span(batch)[0]
    except CorruptRecordError:
        return math.inf


def search_for_timestamp(batches: Iterable[RecordBatch], timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
    """Kafka's ``FileRecords.searchForTimestamp``, the last step of ``LogSegment.findOffsetByTimestamp``: in
    ``batches`` (file order, from the position the indexes gave), the first batch whose max timestamp is >=
    ``timestamp``, then its first record with timestamp >= ``timestamp`` and offset >= ``starting_offset``; on to
    the next such batch when it has none. Only the batches that can hold the answer are decoded."""
    for batch in batches:
        if batch.max_timestamp >= timestamp:
            for rec in batch.records():
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch if batch.magic >= 2 else None
                    return TimestampAndOffset(rec.timestamp, rec.offset, epoch if epoch is None or epoch >= 0 else None)
    return None


class SegmentReads:
    """Offset and timestamp lookups over a segment's indexes and batches (see the module docstring)."""

    # --- lookups -------------------------------------------------------------------------------------------------

    def _search_for_offset(self, offset: int, start_position: int, after: int):
        """First batch at or after ``start_position`` whose last offset >= ``offset`` (Kafka's
        searchForOffsetWithSize): returns (batch last offset, position, size, last offset before it) or None;
        the last element is ``after`` when the batch is the first one scanned.

        Unlike Kafka, offsets going backwards on the way (a damaged base offset, which no CRC covers) raise
        CorruptRecordError instead of silently skipping the batch they belong to; the first batch must begin
        after ``after``."""
        it, _ = self.scan(start_position)
        prev_last = after
        for batch in it:
            first, last = _offset_span(batch)
            if not prev_last < first <= last:
                raise CorruptRecordError(
                    f"{self.log_path}: batch offsets {first}..{last} go backwards (after offset {prev_last})",
                    position=batch.position,
                )
            if last >= offset:
                return last, batch.position, batch.size_in_bytes, prev_last
            prev_last = last
        return None

    def _locate(self, offset: int, starting_position: int = 0):
        """Index lookup, then :meth:`_search_for_offset`: (last offset, position, size, last offset of the batch
        before it) or None.

        The search starts one index entry before the one the lookup found (at the segment start when there is
        none), so the batch at that entry is compared with the batch before it: a base offset damaged there
        would otherwise be skipped or served unnoticed. At position 0 the bound is the segment's base offset
        (its file name): no batch of the segment starts before it."""
        found, before = self._offset_index.lookup_with_previous(offset)
        start = found.position
        if start > 0:
            start = before.position if before is not None else 0
        return self._search_for_offset(offset, max(start, starting_position), self._base_offset - 1)

    def translate_offset(self, offset: int, starting_position: int = 0) -> OffsetPosition | None:
        """Position of the batch holding the first offset >= ``offset``; None when past the end."""
        found = self._locate(offset, starting_position)
        return None if found is None else OffsetPosition(found[0], found[1])

    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None, min_one_batch: bool = True):
        """Whole batches starting with the one holding ``offset``, up to ``max_bytes`` (at least one batch when
        ``min_one_batch``, as Kafka's fetch with minOneMessage). Returns a list of batches, or None when
        ``offset`` is past this segment's end. Unchecked beyond the offset search, as Kafka's fetch."""
        if max_bytes < 0:
            raise InvalidArgumentError(f"invalid max_bytes {max_bytes}")
        found = self._locate(offset)
        if found is None:
            return None
        _, start, first_size, _ = found
        limit = self.size if max_position is None else max_position
        budget = max(max_bytes, first_size) if min_one_batch else max_bytes
        return self.read_owned(start, min(limit, start + budget))

    def read_valid(self, offset: int, max_bytes: int, *, limit: int, max_position: int | None = None):
        """:meth:`read` (at least one batch) for a reader that decodes what it gets: the batches up to the first
        damaged one, CorruptRecordError when that is the first; None past the segment's end.

        Kafka's broker serves fetched bytes unchecked and leaves CRCs to its consumers; ``Log.read`` hands out
        decoded batches, so it is the consumer here. Damage a load did not look at (a segment below the recovery
        point, a clean-shutdown marker over a bad disk block) is refused instead of served:
        - a CRC that does not match;
        - offsets the CRC does not cover (v2 base offset, legacy message offset) that do not start after the
          batch before, reach ``limit`` (the next segment's base offset or the log end), or lie more than an
          int32 past the segment's base offset (Kafka rolls before that);
        - a batch that leaves a gap after the one before it while the batch after it (read one beyond the
          budget when needed, and only if its CRC holds) starts inside it: it jumped ahead, the same neighbour
          rule as recovery's :meth:`valid_prefix`.
        Returning the batches before the damaged one lets a reader advance to it and get the error there.
        """
        found = self._locate(offset)
        if found is None:
            return None
        _, start, first_size, floor = found
        end = self.size if max_position is None else min(self.size, max_position)
        batches: list[RecordBatch] = self.read_owned(start, min(end, start + max(max_bytes, first_size)))

        def following() -> RecordBatch | None:
            """The batch after the last one read: evidence only, read when the last batch leaves a gap."""
            after = batches[-1].position + batches[-1].size_in_bytes
            return self.batch_at(after, end) if after < end else None

        for i, batch in enumerate(batches):
            try:
                batch.ensure_valid()
                first, last = served_span(batch)
            except CorruptRecordError as e:
                problem = str(e)
            else:
                if not floor < first <= last < limit or last - self._base_offset > I32_MAX:
                    problem = (f"batch offsets {first}..{last} go backwards (after offset {floor}), reach offset "
                               f"{limit} or lie beyond what a segment based at {self._base_offset} can hold")
                elif first > floor + 1 and floor < (nxt := _successor_first(
                        batches[i + 1] if i + 1 < len(batches) else following())) <= last:
                    problem = (f"batch offsets {first}..{last} jumped ahead: the batch after it starts at {nxt}, "
                               f"right after offset {floor}")
                else:
                    floor = last
                    continue
            if i:
                return batches[:i]
            raise CorruptRecordError(f"{self.log_path}: {problem}", position=batch.position)
        return batches

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset`` (Kafka's rule)."""
        start_off = self._base_offset if starting_offset is None else starting_offset
        ts_entry = self._time_index.lookup(timestamp)
        position = self._offset_index.lookup(max(ts_entry[1], start_off))[1]
        it, _ = self.scan(position)
        return search_for_timestamp(it, timestamp, start_off)

    def read_next_offset(self) -> int:
        """The offset after the last batch (reads from the last offset-index entry onward). An index nobody has
        mapped is read, not mapped, for its one lookup (``read_for_check``): a load asks this of every active
        segment, whose index is mapped by its first append."""
        index = self._offset_index
        with index.read_for_check():
            start = index.lookup(index.last_offset)[1] if index.entry_count else 0
        last = None
        it, _ = self.scan(start)
        for batch in it:
            last = batch
        return self._base_offset if last is None else last.last_offset + 1

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        """The aborted transactions from this segment's ``.txnindex`` that overlap the offsets read."""
        return self._txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

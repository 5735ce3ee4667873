"""One cleaning pass over one log (Kafka's ``Cleaner.doClean``): build the offset map over the dirty range, group
the segments up to where the map ends, rewrite each group into one cleaned segment and swap it in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalog.errors import (
    CleanerError,
    ConfigError,
    CorruptRecordError,
    LogCleaningAbortedError,
    LogSegmentOffsetOverflowError,
)
from kafkalog.io.file_access import pread
from kafkalog.segment.log_segment import LogSegment

from .batch_filter import CleanerFilter, CleanerStats, LastRecord, filter_batches
from .columnar import Chunk, Superseded, filter_chunk, map_chunk, read_chunk
from .config import CleanerConfig
from .crc_check import check_chunk, crc_scan, raise_corrupt
from .dirty_range import LogToClean
from .grouping import group_segments_by_size
from .offset_map import OffsetMap
from .swap import StepHook, create_cleaned_segment, last_modified_ms, replace_segments, set_last_modified
from .txn_metadata import CleanedTransactionMetadata, collect_aborted_transactions

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["CleanedGroup", "Cleaner", "PassResult"]

_LENGTH_END = 12  # base offset + batch length: enough to know the next batch's size


@dataclass
class CleanedGroup:
    """Source segments (base offsets, bytes, records) and what they became."""

    sources: list[int]
    bytes_before: int
    bytes_after: int
    records_removed: int


@dataclass
class PassResult:
    """What one pass did: the range, where it ended (the new checkpoint), its counters and groups."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    end_offset: int
    delete_horizon_ms: int
    legacy_delete_horizon_ms: int
    stats: CleanerStats
    groups: list[CleanedGroup] = field(default_factory=list)

    @property
    def bytes_removed(self) -> int:
        return sum(g.bytes_before - g.bytes_after for g in self.groups)

    @property
    def records_removed(self) -> int:
        return sum(g.records_removed for g in self.groups)

    @property
    def segments_removed(self) -> int:
        return sum(len(g.sources) - 1 for g in self.groups)


class _Buffers:
    """The read buffer size: doubled while a batch does not fit (up to the larger of the topic's
    ``max.message.bytes`` and the broker's), back to its base size after each segment."""

    def __init__(self, base: int, max_io: int) -> None:
        self.base = self.size = base
        self.max_io = max_io

    def grow_or_fail(self, path: object, position: int, data: bytes, file_size: int, max_message: int) -> None:
        if self.size >= max_message:
            if len(data) < _LENGTH_END:
                raise CleanerError(f"could not determine next batch size for {path} at position {position}")
            next_size = int.from_bytes(data[8:12], "big", signed=True) + _LENGTH_END
            if next_size <= _LENGTH_END:
                raise CleanerError(f"invalid batch size {next_size} for {path} at position {position}")
            if next_size <= self.size:
                raise CleanerError(f"batch size {next_size} < buffer size {self.size}, but not processed for "
                                   f"{path} at position {position}")
            if next_size > file_size - position:
                raise CorruptRecordError(f"log segment may be corrupt, batch size {next_size} > "
                                         f"{file_size - position} bytes left in segment {path}", position=position)
            want = next_size
        else:
            want = max_message
        limit = max(want, self.max_io)
        if self.size >= limit:
            raise CleanerError(f"this log contains a message larger than maximum allowable size of {limit}")
        self.size = min(self.size * 2, limit)

    def restore(self) -> None:
        self.size = self.base


class Cleaner:
    """A cleaner thread's state: its offset map and I/O buffer sizes. ``check_done`` is called between chunks
    and raises ``LogCleaningAbortedError`` to stop a pass; ``throttle`` hears every byte count read and written
    (``log.cleaner.io.max.bytes.per.second``)."""

    def __init__(self, config: CleanerConfig | None = None, *,
                 check_done: Callable[[], None] | None = None,
                 throttle: Callable[[int], None] | None = None) -> None:
        self.config = config or CleanerConfig()
        self.offset_map = OffsetMap(self.config.offset_map_memory)
        if self.offset_map.slots * self.config.dedupe_buffer_load_factor <= 1:
            raise CleanerError("offset map is too small to fit in even a single message: increase "
                               "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads")
        if self.config.cleaner_io_buffer_size < 1:
            raise ConfigError(
                f"log.cleaner.io.buffer.size={self.config.io_buffer_size} leaves each of the "
                f"{max(self.config.threads, 1)} cleaner threads an empty read buffer, which cannot grow (Kafka's "
                f"cleaner loops forever on it): use at least {2 * max(self.config.threads, 1)}")
        self._buffers = _Buffers(self.config.cleaner_io_buffer_size, self.config.max_message_size)
        #: per segment (base offset), the byte range this pass has read and CRC-checked
        self._checked: dict[int, tuple[int, int]] = {}
        #: the batches the clean pass frames without decoding them (``columnar.Superseded``), once the map is built
        self._superseded: tuple | None = None
        self._check_done = check_done or (lambda: None)
        self._throttle = throttle or (lambda _n: None)

    def set_check_done(self, check_done: Callable[[], None] | None) -> None:
        """The abort check of the pass about to run (a cleaner thread sets one per partition)."""
        self._check_done = check_done or (lambda: None)

    # --- the pass ---------------------------------------------------------------------------------------------

    def clean(self, log: Log, to_clean: LogToClean, now_ms: int, *, dry_run: bool = False,
              step: StepHook | None = None) -> PassResult:
        """Clean ``log`` from ``to_clean.first_dirty_offset``; ``dry_run`` writes each cleaned segment, measures it
        and deletes it instead of swapping it in."""
        config = log.config
        below = log.segments.values(0, to_clean.first_dirty_offset)
        legacy_horizon = last_modified_ms(below[-1].log_path) - config.delete_retention_ms if below else 0
        stats = CleanerStats()
        upper = to_clean.first_uncleanable_offset
        self._checked = {}
        self.build_offset_map(log, to_clean.first_dirty_offset, upper, stats)
        end_offset = self.offset_map.latest_offset + 1
        result = PassResult(to_clean.first_dirty_offset, upper, end_offset, now_ms + config.delete_retention_ms,
                            legacy_horizon, stats)
        txn = CleanedTransactionMetadata()
        groups = group_segments_by_size(log.segments.values(0, end_offset), config.segment_bytes,
                                        config.segment_index_bytes, upper)
        for seg in (s for group in groups for s in group):
            self._check_unread(log, seg)  # every batch the groups read, checked before the first swap
        for group in groups:
            result.groups.append(self.clean_segments(log, group, now_ms, stats, txn, legacy_horizon, upper,
                                                     dry_run=dry_run, step=step))
        stats.buffer_utilization = self.offset_map.utilization
        return result

    # --- the offset map ---------------------------------------------------------------------------------------

    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        """Fill the map with the latest offset of each key in [start, end) until it holds its share of entries."""
        omap = self.offset_map
        omap.clear()
        dirty = log.segments.values(start, end) if start != end else []
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(
            collect_aborted_transactions(log.segments.values(), log.log_start_offset, start, end))
        desired = omap.desired_size(self.config.dedupe_buffer_load_factor)
        marks = Superseded(start)
        self._superseded = None
        for i, seg in enumerate(dirty):
            self._check_done()
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(log, seg, start, next_start, desired, txn, stats, marks):
                break
        self._superseded = marks.for_decoder(omap)

    def _map_segment(self, log: Log, seg: LogSegment, start: int, next_start: int, desired: int,
                     txn: CleanedTransactionMetadata, stats: CleanerStats, marks: Superseded) -> bool:
        omap = self.offset_map
        position = seg.offset_index.lookup(start).position
        for chunk in self._chunks(log, seg, position):
            full = map_chunk(chunk, omap, start, desired, txn, stats) if chunk.columns is not None else None
            if full is not None:
                marks.note_chunk(chunk.columns)
            else:
                marks.usable = False  # records mapped one by one: their keyless ones are not noted
            if full:
                return True
            if full is not None:
                stats.map_bytes_read += chunk.valid
                continue
            for batch in chunk.batches:
                if batch.magic >= 2 and batch.is_control:
                    txn.on_control_batch_read(batch)
                    stats.map_messages_read += 1
                elif txn.on_batch_read(batch):
                    stats.map_messages_read += batch.record_count
                else:
                    for record in batch.records():
                        if record.key is not None and record.offset >= start:
                            if omap.size < desired:
                                omap.put(record.key, record.offset)
                            else:
                                return True
                        stats.map_messages_read += 1
                if batch.last_offset >= start:
                    omap.update_latest_offset(batch.last_offset)
            stats.map_bytes_read += chunk.valid
        omap.update_latest_offset(next_start - 1)
        return False

    def _chunks(self, log: Log, seg: LogSegment, position: int, end: int | None = None, *,
                decode: bool = True, superseded: tuple | None = None) -> Iterator[Chunk]:
        """The chunks from ``position`` to ``end`` (default: the end of the segment), one read buffer at a time
        (each holding whole batches); the buffer grows while not even one batch fits. Every batch's CRC is checked
        (``CleanerCorruptBatchError``) before its chunk is handed out. On the compiled path (the offset map's
        buffer exists) each chunk comes decoded into columns when it can be; ``decode=False`` only frames;
        ``superseded``: the batches to frame without their records (``Superseded.for_decoder``)."""
        compiled = self.offset_map.table is not None
        buffers = self._buffers
        path = seg.log_path
        max_message = log.config.max_message_bytes
        first = position
        with open(path, "rb") as fh:
            size = seg.size if end is None else end
            while position < size:
                self._check_done()
                data = pread(fh, position, min(buffers.size, size - position))
                self._throttle(len(data))
                if decode:
                    chunk = read_chunk(data, compiled, superseded)
                    check_chunk(chunk.data, chunk.valid, compiled, path, position)
                else:
                    view = memoryview(data)
                    valid, bad = crc_scan(view, 0, len(view), compiled)
                    if bad is not None:
                        raise_corrupt(view, bad, len(view), path, position)
                    chunk = Chunk(view, valid, None)
                if not chunk.valid:
                    buffers.grow_or_fail(path, position, data, size, max_message)
                    continue
                self._checked[seg.base_offset] = (first, position + chunk.valid)
                yield chunk
                position += chunk.valid
        buffers.restore()

    def _check_unread(self, log: Log, seg: LogSegment) -> None:
        """CRC-check the bytes of ``seg`` that building the map did not read (the clean section, the rest of the
        segment where the map filled), so that a pass refused for a bad batch has swapped nothing in."""
        read = self._checked.get(seg.base_offset)
        spans = [(0, seg.size)] if read is None else [(0, read[0]), (read[1], seg.size)]
        for start, end in spans:
            if start < end:
                for _ in self._chunks(log, seg, start, end, decode=False):
                    pass

    # --- one group --------------------------------------------------------------------------------------------

    def clean_segments(self, log: Log, group: list[LogSegment], now_ms: int, stats: CleanerStats,
                       txn: CleanedTransactionMetadata, legacy_horizon: int, upper_bound: int, *,
                       dry_run: bool = False, step: StepHook | None = None) -> CleanedGroup:
        """Rewrite ``group`` into one ``.cleaned`` segment and swap it in (Kafka's ``cleanSegments``)."""
        cleaned = create_cleaned_segment(log, group[0].base_offset)
        txn.cleaned_index = cleaned.txn_index
        before = sum(s.size for s in group)
        removed = 0
        try:
            last_records = {pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None,
                                            e.producer_epoch)
                            for pid, e in log.producer_state.active_producers.items()}
            segments = log.segments.values()
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                txn.add_aborted_transactions(
                    collect_aborted_transactions(segments, log.log_start_offset, seg.base_offset, upper))
                flt = CleanerFilter(self.offset_map, retain_legacy_deletes=last_modified_ms(seg.log_path) > legacy_horizon,
                                    txn=txn, last_records=last_records, upper_bound_offset=upper_bound, stats=stats,
                                    now_ms=now_ms, delete_retention_ms=log.config.delete_retention_ms)
                try:
                    removed += self._clean_into(log, seg, cleaned, flt, stats)
                except LogSegmentOffsetOverflowError as exc:
                    raise LogCleaningAbortedError(f"segment {seg.base_offset} overflows 32-bit relative offsets; "
                                                  f"it needs splitting first: {exc}") from exc
            # Kafka's onBecomeInactiveSegment reads both indexes, which creates their files (kept, trimmed, even
            # when nothing was appended)
            cleaned.offset_index.is_full()
            cleaned.time_index.is_full()
            cleaned.on_becoming_inactive()
            cleaned.flush()
            set_last_modified(cleaned, last_modified_ms(group[-1].log_path))
            after = cleaned.size
            if dry_run:
                cleaned.delete()
            else:
                replace_segments(log, cleaned, group, step=step)
        except BaseException:
            if not dry_run:
                _discard(cleaned)
            else:
                cleaned.delete()
            raise
        return CleanedGroup([s.base_offset for s in group], before, after, removed)

    def _clean_into(self, log: Log, source: LogSegment, dest: LogSegment, flt: CleanerFilter,
                    stats: CleanerStats) -> int:
        removed = 0
        for chunk in self._chunks(log, source, 0, superseded=self._superseded):
            result = filter_chunk(chunk, flt) if chunk.columns is not None else None
            if result is None:
                result = filter_batches(chunk.data, chunk.batches, flt)
            stats.messages_read += result.messages_read
            stats.bytes_read += result.bytes_read
            stats.messages_written += result.messages_retained
            stats.bytes_written += result.bytes_retained
            removed += chunk.record_count() - result.messages_retained
            if result.output:
                dest.append(result.output, largest_offset=result.max_offset, framed=result.framed)
                self._throttle(len(result.output))
        return removed


def _discard(cleaned: LogSegment) -> None:
    """Remove a cleaned segment that was not swapped in (still ``.cleaned``; after the rename the loader
    finishes the swap, so a ``.swap`` is left for it)."""
    if str(cleaned.log_path).endswith(".cleaned"):
        cleaned.delete()

"""Which part of a log a pass cleans (Kafka's ``LogCleanerManager.cleanableOffsets`` and ``LogToClean``): the
first dirty offset from the checkpoint, the first uncleanable offset, the cleanable ratio and whether
``max.compaction.lag.ms`` forces a pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalog.limits import LONG_MAX

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["INTERNAL_COMPACTED_TOPICS", "LogToClean", "OffsetsToClean", "cleanable_offsets", "dirty_ratio_from_sizes",
           "log_to_clean", "max_compaction_delay"]


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    #: the checkpointed offset was out of the log's range: the checkpoint is reset to the log start
    force_update_checkpoint: bool


def cleanable_offsets(log: Log, checkpointed: int | None, now_ms: int) -> OffsetsToClean:
    """First dirty offset (the checkpoint, else the log start; the log start when the checkpoint is below it or
    past the log end) and first uncleanable offset: the smallest of the last stable offset, the active segment's
    base and the first dirty segment whose largest timestamp is within ``min.compaction.lag.ms`` of now."""
    start = log.log_start_offset
    dirty = start if checkpointed is None else checkpointed
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, True
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in _non_active_from(log, dirty):
            if seg.largest_timestamp > now_ms - lag:
                candidates.append(seg.base_offset)
                break
    return OffsetsToClean(dirty, max(dirty, min(candidates)), force)


def _non_active_from(log: Log, offset: int) -> list:
    active = log.active_segment.base_offset
    if offset > active:
        return []
    return log.segments.values(offset, active) if offset != active else []


def max_compaction_delay(log: Log, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty non-active segment's first batch is (0: not)."""
    stamps = [t for t in (s.first_batch_timestamp for s in _non_active_from(log, first_dirty_offset)) if t > 0]
    earliest = min(stamps, default=LONG_MAX)
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass(frozen=True)
class LogToClean:
    """A log with its dirty range and the byte counts the cleaner ranks logs by."""

    first_dirty_offset: int
    #: the base of the segment holding the first uncleanable offset: a pass cleans whole segments below it
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    force_update_checkpoint: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else float("nan")

    def should_clean(self, min_cleanable_ratio: float) -> bool:
        """Kafka's filter in ``grabFilthiestCompactedLog``: a non-empty log whose dirty ratio passes
        ``min.cleanable.dirty.ratio``, or one ``max.compaction.lag.ms`` forces with something to clean."""
        if self.total_bytes <= 0:
            return False
        return (self.need_compaction_now and self.cleanable_bytes > 0) or self.cleanable_ratio > min_cleanable_ratio


def log_to_clean(log: Log, checkpointed: int | None, now_ms: int) -> LogToClean:
    """The dirty range of ``log`` and its sizes, as the cleaner manager computes them before choosing a log."""
    offsets = cleanable_offsets(log, checkpointed, now_ms)
    first_dirty = offsets.first_dirty_offset
    delay = max_compaction_delay(log, first_dirty, now_ms)
    non_active = _non_active_from(log, offsets.first_uncleanable_dirty_offset)
    first_uncleanable = non_active[0].base_offset if non_active else log.active_segment.base_offset
    clean_bytes = sum(s.size for s in log.segments.values(-1, first_dirty)) if first_dirty > -1 else 0
    low = min(first_dirty, first_uncleanable)
    cleanable = sum(s.size for s in log.segments.values(low, first_uncleanable)) if low != first_uncleanable else 0
    return LogToClean(first_dirty, first_uncleanable, clean_bytes, cleanable, delay > 0,
                      offsets.force_update_checkpoint)


#: Kafka's internal topics, compacted whatever the operator configured
INTERNAL_COMPACTED_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def dirty_ratio_from_sizes(segments: list[tuple[int, int]], log_start: int, log_end: int,
                           checkpointed: int | None) -> tuple[int, float | None]:
    """(first dirty offset, dirty ratio) of a partition from its segments' (base offset, ``.log`` size) alone,
    for a listing that does not load the log: the cleaner's rule with the active segment as the first
    uncleanable offset (open transactions and ``min.compaction.lag.ms`` can only hold it lower). None: no bytes
    below the active segment."""
    dirty = log_start if checkpointed is None or not log_start <= checkpointed <= log_end else checkpointed
    if not segments:
        return dirty, None
    bases = [b for b, _ in segments]
    active = bases[-1]
    clean = sum(size for base, size in segments if base < dirty)
    floor = max((b for b in bases if b <= dirty), default=bases[0])
    low = min(floor, active)
    cleanable = sum(size for base, size in segments if low <= base < active) if dirty < active else 0
    total = clean + cleanable
    return dirty, (cleanable / total if total else None)

"""One cleaner round over one partition as a cleaner thread makes it: choose (``min.cleanable.dirty.ratio``,
``max.compaction.lag.ms``), clean, then, cleaned or not, Kafka's ``deleteOldSegments`` (the round's
``deletableLogs`` step: segments wholly below the log start offset for every compacted log, and time and size
retention for a ``compact,delete`` one). The caller owns the checkpoint: the answer says what to write
(``checkpoint_offset``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .cleaner import Cleaner, PassResult
from .config import CleanerConfig
from .dirty_range import LogToClean, log_to_clean
from .swap import StepHook

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["CleanReport", "clean_partition"]


@dataclass
class CleanReport:
    """The dirty range the pass saw, whether it cleaned, and what it did."""

    to_clean: LogToClean
    cleaned: bool
    result: PassResult | None
    #: the first dirty offset to checkpoint (None: leave the checkpoint as it is)
    checkpoint_offset: int | None
    segments_deleted: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        tc = self.to_clean
        out: dict[str, Any] = {
            "cleaned": self.cleaned, "dryRun": self.dry_run,
            "firstDirtyOffset": tc.first_dirty_offset, "firstUncleanableOffset": tc.first_uncleanable_offset,
            "cleanBytes": tc.clean_bytes, "cleanableBytes": tc.cleanable_bytes,
            "cleanableRatio": tc.cleanable_ratio if tc.total_bytes else None,
            "needCompactionNow": tc.need_compaction_now, "checkpointAfter": self.checkpoint_offset,
            "retentionSegmentsDeleted": self.segments_deleted,
        }
        r = self.result
        if r is not None:
            out.update({
                "endOffset": r.end_offset, "deleteHorizonMs": r.delete_horizon_ms,
                "legacyDeleteHorizonMs": r.legacy_delete_horizon_ms, "stats": r.stats.to_json(),
                "recordsRemoved": r.records_removed, "bytesRemoved": r.bytes_removed,
                "segmentsRemoved": r.segments_removed,
                "groups": [{"sources": g.sources, "bytesBefore": g.bytes_before, "bytesAfter": g.bytes_after,
                            "recordsRemoved": g.records_removed} for g in r.groups],
            })
        return out


def clean_partition(log: Log, *, checkpointed: int | None, now_ms: int, config: CleanerConfig | None = None,
                    force: bool = False, dry_run: bool = False, cleaner: Cleaner | None = None,
                    step: StepHook | None = None) -> CleanReport:
    """One round over ``log`` (a compacted log): a pass from the checkpointed first dirty offset at clock
    ``now_ms`` when it is dirty enough, then ``Log.delete_old_segments`` (the LogManager's cleaner round calls the
    same method on every compacted log).

    ``force`` cleans whatever the dirty ratio; ``dry_run`` measures without changing the log (and deletes nothing).
    """
    cleaner = cleaner or Cleaner(config)
    to_clean = log_to_clean(log, checkpointed, now_ms)
    checkpoint = to_clean.first_dirty_offset if to_clean.force_update_checkpoint else None
    wanted = to_clean.should_clean(log.config.min_cleanable_dirty_ratio)
    if not (wanted or (force and to_clean.cleanable_bytes > 0)):
        report = CleanReport(to_clean, False, None, checkpoint, dry_run=dry_run)
    else:
        result = cleaner.clean(log, to_clean, now_ms, dry_run=dry_run, step=step)
        report = CleanReport(to_clean, True, result, result.end_offset, dry_run=dry_run)
    if not dry_run:
        report.segments_deleted = log.delete_old_segments()
    return report

"""The cleaned segment's files and how it replaces its sources (Kafka's ``createNewCleanedSegment`` and
``LocalLog.replaceSegments``).

The new segment is written as ``<base>.log.cleaned`` (+ ``.index.cleaned``, ...), flushed, given the mtime of the
last source segment, then swapped in: its files renamed ``.swap``, the sources renamed ``.deleted`` (removal
scheduled after ``file.delete.delay.ms``), the ``.swap`` suffix dropped, the dir fsynced. A crash leaves a state
the loader finishes: ``.cleaned`` files are deleted, a ``.swap`` replaces the segments of its offset range.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.names import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from kafkalog.segment.log_segment import LogSegment

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["create_cleaned_segment", "last_modified_ms", "replace_segments", "set_last_modified"]

#: called with the name of each step of the swap just done (tests crash there)
StepHook = Callable[[str], None]


def last_modified_ms(path: str | os.PathLike[str]) -> int:
    """A file's mtime in whole milliseconds, as Java's ``File.lastModified``."""
    return os.stat(path).st_mtime_ns // 1_000_000


def set_last_modified(segment: LogSegment, ms: int) -> None:
    """Kafka's ``LogSegment.setLastModified``: the ``.log``, ``.index`` and ``.timeindex`` get ``ms``."""
    for path in (segment.log_path, segment.offset_index.file, segment.time_index.file):
        if os.path.exists(path):
            os.utime(path, ns=(os.stat(path).st_atime_ns, ms * 1_000_000))


def create_cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    """An empty ``<base>.log.cleaned`` segment with the log's index settings, any leftover of that name removed."""
    LogSegment(log.dir, base_offset, file_suffix=CLEANED_SUFFIX, handles=log.handle_cache).delete()
    config = log.config
    return LogSegment.open(log.dir, base_offset, config=config, file_suffix=CLEANED_SUFFIX,
                           handles=log.handle_cache)


def _segment_paths(segment: LogSegment) -> list[Path]:
    return [Path(segment.log_path)] + [Path(i.file) for i in (segment.offset_index, segment.time_index,
                                                             segment.txn_index)]


def replace_segments(log: Log, new: LogSegment, old: Sequence[LogSegment], *,
                     step: StepHook | None = None) -> list[LogSegment]:
    """Swap ``new`` (suffix ``.cleaned``) in for ``old`` under the log's lock; returns the old segments whose base
    offset is not the new one's (their producer snapshots are removed too)."""
    hook = step or (lambda _name: None)
    with log._lock:  # noqa: SLF001 - the swap is a log-structure change made under the log's own lock
        segments = log._segments  # noqa: SLF001
        olds = sorted((s for s in old if s.base_offset in segments), key=lambda s: s.base_offset)
        hook("cleaned-written")
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        hook("renamed-swap")
        segments.add(new)
        deleted_not_replaced: list[LogSegment] = []
        for seg in olds:
            if seg.base_offset != new.base_offset:
                segments.remove(seg.base_offset)
            seg.rename_suffix(DELETED_SUFFIX)
            log._schedule_delete(_segment_paths(seg))  # noqa: SLF001
            hook(f"deleted-{seg.base_offset}")
            if seg.base_offset != new.base_offset:
                deleted_not_replaced.append(seg)
        new.change_file_suffixes(SWAP_SUFFIX, "")
        hook("renamed-log")
        fsync_dir(log.dir)
        log.mark_index_checked(new.base_offset)
        log._delete_producer_snapshots(deleted_not_replaced)  # noqa: SLF001
        hook("done")
        return deleted_not_replaced

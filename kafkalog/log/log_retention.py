"""Truncation and retention of a Log: the ``LogRetention`` mixin of ``Log`` (follower truncation, log start
offset, retention by time, size and log start, async deletion of ``.deleted`` files)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.log.loader import rebuild_producer_state
from kafkalog.log.storage_hooks import storage_op
from kafkalog.names import DELETED_SUFFIX
from kafkalog.segment.log_segment import LogSegment


class LogRetention:
    """Truncation and retention (Kafka's ``UnifiedLog.truncateTo``, ``deleteOldSegments``, ``LocalLog``'s
    async deletes). A mixin: the state it reads is set by ``Log._init``."""

    # ------------------------------------------------------------------ truncation

    @storage_op("truncate")
    def truncate_to(self, target_offset: int) -> bool:
        """Drop everything at and above ``target_offset`` (follower truncation); True if anything was removed."""
        if target_offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                self._epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            first = self._segments.first
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self._segments.values() if s.base_offset > target_offset]
            self._remove_and_delete_segments(doomed)
            self.active_segment.truncate_to(target_offset)
            self._log_end_offset = target_offset
            self._recovery_point = min(self._recovery_point, target_offset)
            self._delete_producer_snapshots(doomed)
            self._epoch_cache.truncate_from_end(target_offset)
            self._log_start_offset = min(target_offset, self._log_start_offset)
            rebuild_producer_state(
                self._psm, self._segments, self._log_start_offset, target_offset,
                reload_from_clean_shutdown=False, now=self._clock(),
            )
            if self._high_watermark is not None and self._high_watermark > target_offset:
                self._high_watermark = target_offset
            return True

    @storage_op("truncate")
    def truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None = None) -> None:
        """Delete every segment and start an empty one at ``new_offset`` (Kafka's truncateFullyAndStartAt)."""
        with self._lock:
            self._check_open()
            doomed = self._segments.values()
            self._remove_and_delete_segments(doomed)
            self._new_segment(new_offset)
            self._log_end_offset = new_offset
            self._recovery_point = new_offset
            self._delete_producer_snapshots(doomed)
            self._epoch_cache.clear_and_flush()
            self._psm.truncate_fully_and_start_at(new_offset)
            self._log_start_offset = new_offset if log_start_offset is None else log_start_offset
            rebuild_producer_state(
                self._psm, self._segments, self._log_start_offset, new_offset,
                reload_from_clean_shutdown=False, now=self._clock(),
            )
            if self._high_watermark is not None:
                self._high_watermark = new_offset

    # ------------------------------------------------------------------ retention

    @storage_op("log start offset update")
    def maybe_increment_log_start_offset(self, new_log_start: int) -> bool:
        """Move the log start forward (DeleteRecords or retention); never past the high watermark."""
        with self._lock:
            if new_log_start > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start to {new_log_start}: above the high watermark {self.high_watermark}"
                )
            if new_log_start <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start
            self._epoch_cache.truncate_from_start(new_log_start)
            self._psm.on_log_start_offset_incremented(new_log_start)
            self._recovery_point = max(self._recovery_point, new_log_start)
            return True

    @storage_op("retention")
    def delete_old_segments(self) -> int:
        """Kafka's retention pass: log-start breach, then ``retention.bytes``, then ``retention.ms`` (by each
        segment's largest timestamp against ``clock``). Deleted segments are renamed ``.deleted`` and removed by
        ``delete_expired_files`` after ``file.delete.delay.ms``. Returns the number of segments deleted."""
        with self._lock:
            self._check_open()
            deleted = self._delete_log_start_breached()
            if self._config.delete:
                deleted += self._delete_retention_size_breached()
                deleted += self._delete_retention_ms_breached()
            return deleted

    def _delete_log_start_breached(self) -> int:
        return self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt <= self._log_start_offset
        )

    def _delete_retention_size_breached(self) -> int:
        limit = self._config.retention_bytes
        if limit < 0:
            return 0  # before the size: it stats every segment
        size = self.size
        if size < limit:
            return 0
        diff = [size - limit]

        def pred(seg: LogSegment, _nxt: int | None) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False

        return self._delete_old_segments(pred)

    def _delete_retention_ms_breached(self) -> int:
        limit = self._config.retention_ms
        if limit < 0:
            return 0
        now = self._clock()
        return self._delete_old_segments(lambda seg, _nxt: now - seg.largest_timestamp > limit)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, int | None], bool]) -> int:
        """Delete the oldest segments while ``predicate(segment, next segment's base offset or None)`` holds.
        Walks base offsets and builds only the segments it asks about (usually one), so a pass that deletes
        nothing leaves a lazily loaded partition's other segments unbuilt."""
        bases = self._segments.base_offsets()
        deletable: list[LogSegment] = []
        hw = self.high_watermark
        for i, base in enumerate(bases):
            seg = self._segments.get(base)
            if seg is None:
                break  # removed meanwhile
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            upper = nxt if nxt is not None else self._log_end_offset
            if nxt is None and seg.size == 0:
                break
            if hw >= upper and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        to_delete = deletable
        if len(self._segments) == len(deletable):
            new_seg = self._roll(None)
            if deletable[-1].base_offset == new_seg.base_offset:
                to_delete = deletable[:-1]
        self._remove_and_delete_segments(to_delete)
        self._delete_producer_snapshots(deletable)
        first = self._segments.first
        assert first is not None
        if first.base_offset > self._log_start_offset:
            self._log_start_offset = first.base_offset
            self._epoch_cache.truncate_from_start(self._log_start_offset)
            self._psm.on_log_start_offset_incremented(self._log_start_offset)
            self._recovery_point = max(self._recovery_point, self._log_start_offset)
        return len(deletable)

    def _remove_and_delete_segments(self, doomed: Sequence[LogSegment]) -> None:
        """Take segments out of the map and rename their files ``.deleted``; removal is scheduled."""
        if not doomed:
            return
        paths: list[Path] = []
        for seg in doomed:
            self._segments.remove(seg.base_offset)
            seg.rename_suffix(DELETED_SUFFIX)
            paths.append(Path(seg.log_path))
            for idx in (seg.offset_index, seg.time_index, seg.txn_index):
                paths.append(Path(idx.file))
        self._schedule_delete(paths)

    def _delete_producer_snapshots(self, segments: Sequence[LogSegment]) -> None:
        paths = []
        for seg in segments:
            p = self._psm.remove_and_mark_snapshot_for_deletion(seg.base_offset)
            if p is not None:
                paths.append(p)
        if paths:
            self._schedule_delete(paths)

    def _schedule_delete(self, paths: list[Path]) -> None:
        due = self._clock() + self._config.file_delete_delay_ms
        self._pending_deletes.append((due, paths))
        if self._config.file_delete_delay_ms <= 0:
            self.delete_expired_files()

    @storage_op("file deletion")
    def delete_expired_files(self, now: int | None = None) -> int:
        """Remove ``.deleted`` files whose ``file.delete.delay.ms`` has passed (the manager's scheduler hook).
        Returns how many files were removed."""
        with self._lock:
            now = self._clock() if now is None else now
            keep: list[tuple[int, list[Path]]] = []
            removed = 0
            for due, paths in self._pending_deletes:
                if due > now:
                    keep.append((due, paths))
                    continue
                for p in paths:
                    try:
                        p.unlink()
                        removed += 1
                    except FileNotFoundError:
                        pass
            self._pending_deletes = keep
            return removed

    @property
    def pending_deletes(self) -> list[Path]:
        """Files renamed ``.deleted`` that wait for ``file.delete.delay.ms`` before they are removed."""
        return [p for _, paths in self._pending_deletes for p in paths]

"""The manager's periodic work (Kafka's LogManager scheduled tasks): recovery-point and log-start-offset
checkpoints, flushing logs whose ``flush.ms`` elapsed, retention, and removing ``-delete`` dirs after
``file.delete.delay.ms``. Each task is also a public LogManager method, so callers and tests run it on demand.

Periodic work never raises for one partition: a partition that fails (its dir goes offline through the funnel)
or disappears is skipped until the next period.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from typing import Any

from kafkalog.checkpoint.offset_checkpoint import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from kafkalog.errors import KafkaStorageError
from kafkalog.limits import LONG_MAX
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager.broker_config import BrokerConfig
from kafkalog.manager.partition_calls import PartitionCalls
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.manager.scheduler import Scheduler
from kafkalog.names import TopicPartition

__all__ = ["Housekeeping"]

#: ``write_checkpoint(dir path, file name, offsets) -> written``: the manager's checkpoint write (I/O errors go
#: through the failure funnel there).
WriteCheckpoint = Callable[[str, str, dict[TopicPartition, int]], bool]


class Housekeeping:
    """Runs the scheduled tasks over a registry (see the module docstring)."""

    def __init__(
        self,
        registry: LogRegistry,
        config: BrokerConfig,
        scheduler: Scheduler,
        calls: PartitionCalls,
        *,
        config_for: Callable[[str], LogConfig],
        write_checkpoint: WriteCheckpoint,
        report_and_process: Callable[[str, BaseException, str], None],
        clock: Callable[[], int],
        stopped: Callable[[], bool],
    ) -> None:
        self._reg = registry
        self._config = config
        self._scheduler = scheduler
        self._calls = calls
        self._config_for = config_for
        self._write_checkpoint = write_checkpoint
        self._report_and_process = report_and_process
        self._clock = clock
        self._stopped = stopped

    def entries_by_dir(self, dirs: Iterable[str] | None) -> dict[str, list[LogEntry]]:
        """Entries per online dir (``dirs``: paths of this manager's dirs; KeyError for another)."""
        return self._reg.entries_by_dir(None if dirs is None else {self._reg.dir(p).path for p in dirs})

    def checkpoint_recovery_offsets(self, dirs: Iterable[str] | None = None) -> None:
        for path, entries in self.entries_by_dir(dirs).items():
            self._write_checkpoint(path, RECOVERY_POINT_CHECKPOINT, {e.key: e.log.recovery_point for e in entries})

    def checkpoint_log_start_offsets(self, dirs: Iterable[str] | None = None) -> None:
        for path, entries in self.entries_by_dir(dirs).items():
            offsets = {}
            for e in entries:
                first = e.log.segments.first
                if first is not None and e.log.log_start_offset > first.base_offset:
                    offsets[e.key] = e.log.log_start_offset
            self._write_checkpoint(path, LOG_START_OFFSET_CHECKPOINT, offsets)

    def flush_dirty_logs(self) -> None:
        now = self._clock()
        for e in self._reg.entries():
            flush_ms = self._config_for(e.key[0]).flush_ms
            if now - e.last_flush_ms < flush_ms:
                continue
            try:
                self._calls.call(e.key[0], e.key[1], "flush", _flush, is_future=e.is_future)
                e.last_flush_ms = now
            except (KafkaStorageError, KeyError):
                continue

    def cleanup_logs(self) -> None:
        with self._reg.lock:
            entries = list(self._reg.current.values())
        for e in entries:
            if not self._config_for(e.key[0]).delete:
                continue
            try:
                self._calls.call(e.key[0], e.key[1], "retention", _delete_old_segments)
            except (KafkaStorageError, KeyError):
                continue

    def delete_logs(self) -> int:
        now = self._clock()
        due = self._reg.take_due(now, self._config.file_delete_delay_ms)
        done = 0
        with self._reg.lock:
            entries = list(self._reg.current.values())
        for e in entries:  # segments renamed .deleted by retention, removed after file.delete.delay.ms
            try:
                self._calls.call(e.key[0], e.key[1], "delete", _delete_expired_files)
            except (KafkaStorageError, KeyError):
                pass
        for log_dir, path, _ in due:
            d = self._reg.dirs[log_dir]
            if not d.online:
                continue
            try:
                shutil.rmtree(path)
                done += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._report_and_process(log_dir, exc, f"error deleting {path}")
        return done

    def schedule(self) -> None:
        """Start the scheduler with Kafka's tasks and intervals."""
        c = self._config
        s = self._scheduler
        s.startup()
        s.schedule("kafka-recovery-point-checkpoint", self._guard(self.checkpoint_recovery_offsets),
                   delay_ms=c.flush_checkpoint_ms, period_ms=c.flush_checkpoint_ms)
        s.schedule("kafka-log-start-offset-checkpoint", self._guard(self.checkpoint_log_start_offsets),
                   delay_ms=c.flush_start_offset_checkpoint_ms, period_ms=c.flush_start_offset_checkpoint_ms)
        if c.flush_scheduler_ms < LONG_MAX:
            s.schedule("kafka-log-flusher", self._guard(self.flush_dirty_logs),
                       delay_ms=c.flush_scheduler_ms, period_ms=c.flush_scheduler_ms)
        s.schedule("kafka-log-retention", self._guard(self.cleanup_logs),
                   delay_ms=c.retention_check_ms, period_ms=c.retention_check_ms)
        # Kafka re-schedules its delete task for the next due time; polling at a fraction of the delay is simpler.
        s.schedule("kafka-delete-logs", self._guard(self.delete_logs),
                   delay_ms=0, period_ms=max(10, min(c.file_delete_delay_ms, 30_000) // 2 or 10))

    def _guard(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            if self._stopped():
                return
            fn()

        return run


def _flush(log: Log) -> None:
    log.flush()


def _delete_old_segments(log: Log) -> int:
    return log.delete_old_segments()


def _delete_expired_files(log: Log) -> int:
    return log.delete_expired_files()

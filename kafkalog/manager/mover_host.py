"""The manager's side of ``move_copy.MoverHost``: what a replica move may ask of its ``LogManager``.

It lives apart from ``log_manager.py`` so the manager stays one concept; it reaches into the manager's private
parts on purpose, as the mover is a part of the manager that runs on its own threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager.partition_lock import PartitionLock
from kafkalog.manager.registry import LogEntry
from kafkalog.names import TopicPartition

if TYPE_CHECKING:
    from kafkalog.manager.log_manager import LogManager


class ManagerMoverHost:
    """What the replica mover may ask of its manager (``move_copy.MoverHost``), besides the registry."""

    def __init__(self, manager: LogManager) -> None:
        self._m = manager

    @property
    def stopped(self) -> bool:
        return self._m._stopped

    def ensure_running(self) -> None:
        self._m._ensure_running()

    def entry(self, topic: str, partition: int) -> LogEntry:
        return self._m._calls.entry(topic, partition)

    def config_for(self, topic: str) -> LogConfig:
        return self._m.config_for(topic)

    def now(self) -> int:
        return self._m._clock()

    def open_log(self, path: str, config: LogConfig, **kwargs: Any) -> Log:
        m = self._m
        return m.adopt_log(Log.open(path, config, clock=m._clock, handle_cache=m.handle_cache, **kwargs))

    def report(self, log_dir: str, cause: OSError, message: str) -> BaseException | None:
        return self._m._offline.report(log_dir, cause, message)

    def process_failures(self) -> None:
        self._m._offline.process_failures()

    def checkpoint(self, dirs: list[str] | None) -> None:
        self._m.checkpoint_recovery_offsets(dirs)
        self._m.checkpoint_log_start_offsets(dirs)

    def register_current(self, key: TopicPartition, log: Log, lock: PartitionLock) -> None:
        self._m._checker.forget(key)
        self._m._checker.register_new(key, log, lock)

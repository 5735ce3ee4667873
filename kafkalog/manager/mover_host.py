"""The manager's side of ``move_copy.MoverHost``: what a replica move may ask of its ``LogManager``.

It lives apart from ``log_manager.py`` so the manager stays one concept. The manager hands it the parts a move
uses (its clock, handle cache, failure funnel, checkpoints and sanity checker) rather than itself, so this module
never imports ``log_manager`` back and the import graph stays a tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager.partition_lock import PartitionLock
from kafkalog.manager.registry import LogEntry
from kafkalog.names import TopicPartition

if TYPE_CHECKING:
    from kafkalog.io.handle_cache import HandleCache
    from kafkalog.manager.offline import OfflineHandler
    from kafkalog.manager.partition_calls import PartitionCalls
    from kafkalog.manager.sanity_checker import SanityChecker


@dataclass(frozen=True)
class ManagerMoverHost:
    """What the replica mover may ask of its manager (``move_copy.MoverHost``), besides the registry."""

    is_stopped: Callable[[], bool]
    ensure_running: Callable[[], None]
    calls: PartitionCalls
    config_for: Callable[[str], LogConfig]
    now: Callable[[], int]
    adopt_log: Callable[[Log], Log]
    handle_cache: HandleCache
    offline: OfflineHandler
    checkpoint_recovery_offsets: Callable[[list[str] | None], None]
    checkpoint_log_start_offsets: Callable[[list[str] | None], None]
    checker: SanityChecker

    @property
    def stopped(self) -> bool:
        return self.is_stopped()

    def entry(self, topic: str, partition: int) -> LogEntry:
        return self.calls.entry(topic, partition)

    def open_log(self, path: str, config: LogConfig, **kwargs: Any) -> Log:
        return self.adopt_log(Log.open(path, config, clock=self.now, handle_cache=self.handle_cache, **kwargs))

    def report(self, log_dir: str, cause: OSError, message: str) -> BaseException | None:
        return self.offline.report(log_dir, cause, message)

    def process_failures(self) -> None:
        self.offline.process_failures()

    def checkpoint(self, dirs: list[str] | None) -> None:
        self.checkpoint_recovery_offsets(dirs)
        self.checkpoint_log_start_offsets(dirs)

    def register_current(self, key: TopicPartition, log: Log, lock: PartitionLock) -> None:
        self.checker.forget(key)
        self.checker.register_new(key, log, lock)

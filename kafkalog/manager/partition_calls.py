"""``PartitionCalls``: an operation on one partition's log through the manager, under the partition's lock.

The rule every manager operation follows (appends, reads, flushes, retention): the log is used only under its
partition lock and only while its dir is online; an I/O failure is caught inside the lock and reported after
leaving it (offline handling waits for partition locks), and the caller gets ``KafkaStorageError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kafkalog.errors import KafkaStorageError, io_cause
from kafkalog.log.log import Log
from kafkalog.manager.log_dir import LogDir
from kafkalog.manager.registry import LogEntry, LogRegistry

__all__ = ["PartitionCalls"]

T = TypeVar("T")


class PartitionCalls:
    """Looks partitions up in a registry and runs calls on their logs (see the module docstring)."""

    def __init__(self, registry: LogRegistry, *, ensure_running: Callable[[], None],
                 fail: Callable[[LogDir, OSError, str], KafkaStorageError]) -> None:
        self._reg = registry
        self._ensure_running = ensure_running
        self._fail = fail

    def entry(self, topic: str, partition: int, *, is_future: bool = False) -> LogEntry:
        """The partition's entry; the manager must be running (KafkaStorageError for an offline partition)."""
        self._ensure_running()
        return self._reg.lookup(topic, partition, is_future=is_future)

    def call(self, topic: str, partition: int, what: str, fn: Callable[[Log], T], *, is_future: bool = False,
             before: Callable[[LogEntry], None] | None = None) -> T:
        """Run ``fn(log)`` under the partition lock; an I/O failure takes the partition's dir offline and raises
        KafkaStorageError after the lock is released."""
        e = self.entry(topic, partition, is_future=is_future)
        failure: OSError | None = None
        with e.lock:
            if e.closed:
                raise KafkaStorageError(f"partition {topic}-{partition} is offline (log dir {e.dir.path})")
            try:
                if before is not None:
                    before(e)
                return fn(e.log)
            except BaseException as exc:
                failure = io_cause(exc)
                if failure is None:
                    raise
        raise self._fail(e.dir, failure, f"I/O error on {what} of {topic}-{partition}") from failure

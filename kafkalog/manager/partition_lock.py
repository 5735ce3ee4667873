"""The per-partition lock of a LogManager, which also knows whether the current thread holds any.

Offline handling (``LogManager._take_offline``) waits for the lock of every partition in the failed dir, so it
must never start on a thread that holds a partition lock: another thread already handling the same failure
could be waiting for that very lock. A Log's storage hooks fire on whatever thread called the Log, so they ask
:func:`holds_partition_lock` and, when it is true, leave the failure to the manager code higher up that stack,
which reports it after releasing its locks.
"""

from __future__ import annotations

import threading

__all__ = ["PartitionLock", "holds_partition_lock"]

_held = threading.local()


def holds_partition_lock() -> bool:
    """True while the current thread holds at least one PartitionLock."""
    return getattr(_held, "count", 0) > 0


class PartitionLock:
    """A re-entrant lock counting, per thread, the partition locks held (re-entries included)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ok = self._lock.acquire(blocking, timeout)
        if ok:
            _held.count = getattr(_held, "count", 0) + 1
        return ok

    def release(self) -> None:
        self._lock.release()
        _held.count -= 1

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


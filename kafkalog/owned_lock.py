"""A re-entrant lock that knows whether the current thread holds it.

CPython's ``RLock`` answers that only through the private ``_is_owned()``; code that must not start offline
handling (or evict a handle) while its own thread is inside a locked region needs the answer, so the owner and
the depth are tracked here explicitly. Both are written only by the thread holding the lock, so a reader on any
thread sees its own ident there exactly when it holds the lock.
"""

from __future__ import annotations

import threading

__all__ = ["OwnedRLock"]

_get_ident = threading.get_ident


class OwnedRLock:
    """``threading.RLock`` plus :meth:`held_by_current_thread`."""

    __slots__ = ("_lock", "_owner", "_depth")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ok = self._lock.acquire(blocking, timeout)
        if ok:
            self._owner = _get_ident()
            self._depth += 1
        return ok

    def release(self) -> None:
        depth = self._depth - 1
        self._depth = depth
        if depth == 0:
            self._owner = None
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()

    def held_by_current_thread(self) -> bool:
        return self._owner == _get_ident()

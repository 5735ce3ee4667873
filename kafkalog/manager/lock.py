"""The per-dir ``.lock`` file: one owner per log dir, across processes and within one process.

``fcntl.flock`` locks belong to an open file description, so a second ``open()`` + ``flock`` of the same file
conflicts even inside one process. A process-wide registry of held paths backs it up where ``flock`` is not real
(pyfakefs replaces ``fcntl`` with no-ops) and gives a clear message naming the holder.
"""

from __future__ import annotations

import errno
import os
import threading

from kafkalog.errors import LogDirLockedError

try:  # pragma: no cover - always present on POSIX
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE_NAME", "DirLock"]

LOCK_FILE_NAME = ".lock"

_held_lock = threading.Lock()
_held: set[str] = set()


class DirLock:
    """An exclusive, non-blocking lock on ``<log_dir>/.lock``. ``release()`` is idempotent."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, LOCK_FILE_NAME)
        self._key = os.path.realpath(log_dir)
        self._fd: int | None = None

    @classmethod
    def acquire(cls, log_dir: str) -> DirLock:
        """Take the lock or raise ``LogDirLockedError``; other ``OSError``s (dir gone, EIO) propagate."""
        lock = cls(log_dir)
        with _held_lock:
            if lock._key in _held:
                raise LogDirLockedError(
                    f"failed to acquire lock on {lock.path}: another LogManager in this process is using this directory"
                )
            fd = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise LogDirLockedError(
                        f"failed to acquire lock on {lock.path}: another process is using this directory"
                    ) from e
                raise
            lock._fd = fd
            _held.add(lock._key)
        return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock; errors closing a descriptor on a dead disk are ignored (the kernel drops it anyway)."""
        with _held_lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            _held.discard(self._key)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass
        try:
            os.close(fd)
        except OSError:
            pass

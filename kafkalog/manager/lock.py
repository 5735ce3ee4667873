"""The per-dir ``.lock`` file: one owner per log dir, the same lock a Kafka broker takes.

A broker locks ``<log dir>/.lock`` with Java's ``FileChannel.tryLock()`` (Kafka's ``FileLock``), which the JDK on
Linux and other POSIX systems turns into ``fcntl(F_SETLK)``: a classic POSIX write lock over the whole file
(position 0, size ``Long.MAX_VALUE``, passed to the kernel as ``l_len = 0``). ``flock`` locks never conflict with
those on Linux, so this module takes a record lock over the whole file too:

* Linux: an open-file-description lock (``F_OFD_SETLK``). It conflicts with the broker's POSIX lock both ways,
  and it belongs to the open file description, not the process: two ``DirLock`` objects on one dir conflict even
  inside one process, and closing some other descriptor of the file does not drop it.
* other systems (and Linux kernels before 3.15, which answer ``EINVAL``): a classic POSIX lock
  (``fcntl.lockf``). It still conflicts with a broker, but POSIX record locks belong to the process: a second
  lock taken in the same process succeeds, and closing *any* descriptor of the file in this process releases it.

The process-wide registry of held dirs is what refuses a second owner inside one process under the fallback (it is
checked first everywhere, so it also gives the clearer message); it is the only lock under pyfakefs, whose
``fcntl`` is a no-op.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import threading
from types import TracebackType

from kafkalog.errors import LogDirLockedError

try:  # pragma: no cover - always present on POSIX
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE_NAME", "DirLock", "lock_kind"]

LOCK_FILE_NAME = ".lock"

_held_lock = threading.Lock()
_held: set[str] = set()

#: ``struct flock`` with 64-bit offsets (glibc's layout on Linux; Python builds with large-file support):
#: l_type, l_whence, l_start, l_len, l_pid, padded to the struct's alignment.
_FLOCK = "hhqqi0q"
#: Open-file-description locks: Linux only (the struct layout above is Linux's), until a kernel says EINVAL.
_ofd = fcntl is not None and sys.platform.startswith("linux") and hasattr(fcntl, "F_OFD_SETLK")
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)
_WRITE, _READ, _UNLOCK = (fcntl.F_WRLCK, fcntl.F_RDLCK, fcntl.F_UNLCK) if fcntl is not None else (1, 0, 2)


def lock_kind() -> str:
    """Which lock ``DirLock`` takes here: ``"ofd"``, ``"posix"`` (the per-process fallback) or ``"none"``."""
    if fcntl is None:
        return "none"
    return "ofd" if _ofd else "posix"


def _flock(l_type: int) -> bytes:
    return struct.pack(_FLOCK, l_type, os.SEEK_SET, 0, 0, 0)


def _set_lock(fd: int, l_type: int) -> None:
    """Set (write or read) or drop (``F_UNLCK``) this descriptor's lock on the whole file, without waiting."""
    global _ofd
    if fcntl is None:
        return
    if _ofd:
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _flock(l_type))
            return
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            _ofd = False  # a kernel without OFD locks: the classic POSIX lock from now on
    op = {_WRITE: fcntl.LOCK_EX | fcntl.LOCK_NB, _READ: fcntl.LOCK_SH | fcntl.LOCK_NB, _UNLOCK: fcntl.LOCK_UN}[l_type]
    fcntl.lockf(fd, op)


def _holder_pid(fd: int) -> int | None:
    """The pid of the process whose lock conflicts (Linux; a broker's POSIX lock names its JVM), else None."""
    if fcntl is None or not _ofd:
        return None
    try:
        out = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _flock(_WRITE))
        l_type, _, _, _, pid = struct.unpack(_FLOCK, out)
    except (OSError, struct.error, TypeError):
        return None
    return pid if l_type != _UNLOCK and pid > 0 else None


def _busy(path: str, pid: int | None) -> LogDirLockedError:
    who = f"another process (pid {pid})" if pid else "another process"
    return LogDirLockedError(
        f"the log dir is in use: {who} holds this lock (a running Kafka broker, a LogManager or a kafkalog command); "
        "stop it first", path=path)


def _in_process(path: str) -> LogDirLockedError:
    return LogDirLockedError("the log dir is in use: a LogManager or command in this process holds this lock", path=path)


class DirLock:
    """An exclusive, non-blocking lock on ``<log_dir>/.lock`` that a Kafka broker's lock conflicts with both ways.

    ``release()`` is idempotent; ``with DirLock.acquire(d):`` releases on exit.
    """

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
                raise _in_process(lock.path)
            fd = os.open(lock.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                _set_lock(fd, _WRITE)
            except OSError as e:
                pid = _holder_pid(fd) if e.errno in _BUSY else None
                os.close(fd)
                if e.errno in _BUSY:
                    raise _busy(lock.path, pid) from e
                raise
            except BaseException:
                os.close(fd)
                raise
            lock._fd = fd
            _held.add(lock._key)
        return lock

    @classmethod
    def check_free(cls, log_dir: str) -> None:
        """Raise ``LogDirLockedError`` while anyone holds the dir's lock; create nothing, keep nothing.

        For readers that must not run beside a broker (``recover --dry-run``): a read lock is tried and dropped at
        once on a descriptor opened read-only, so a read-only user can ask too. No ``.lock`` file: nobody holds it.
        """
        probe = cls(log_dir)
        with _held_lock:
            if probe._key in _held:
                raise _in_process(probe.path)
            try:
                fd = os.open(probe.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return
            try:
                _set_lock(fd, _READ)
                _set_lock(fd, _UNLOCK)
            except OSError as e:
                if e.errno in _BUSY:
                    raise _busy(probe.path, _holder_pid(fd)) from e
                raise
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock; errors on a dead disk are ignored (closing the descriptor drops the lock anyway)."""
        with _held_lock:  # the kernel lock goes before the registry entry: no in-process taker meets it
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:  # explicit: a descriptor inherited by a forked child would otherwise keep an OFD lock alive
                _set_lock(fd, _UNLOCK)
            except OSError:
                pass
            try:
                os.close(fd)
            except OSError:
                pass
            _held.discard(self._key)

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

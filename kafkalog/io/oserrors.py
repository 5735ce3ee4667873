"""The one classification of an ``OSError``: a failed disk, an exhausted process limit, or bad input.

Kafka treats every ``IOException`` on a log dir as a failed disk and takes the dir offline; a broker that runs
out of file descriptors then loses every dir in turn. kafkalog separates three classes (the table is in
``docs/reliability.md``):

* **disk** (:attr:`OSErrorClass.DISK`): the storage cannot do what was asked (EIO, ENOSPC, EDQUOT, EROFS, a
  directory that vanished, EACCES/EPERM on it, ESTALE ...). Inside a log dir this takes the dir offline. Every
  errno this module does not name is a disk error, so an unknown failure is never retried blindly.
* **resource** (:attr:`OSErrorClass.RESOURCE`): the *process* hit a limit (EMFILE, ENFILE, ENOMEM, and mmap's
  EAGAIN / ENOBUFS). The disk is fine: the handle cache evicts and retries once, then the caller gets
  :class:`~kafkalog.errors.ResourceExhaustedError` (retriable) and the dir stays online.
* **input** (:attr:`OSErrorClass.INPUT`): the request names something unusable (a file missing inside a dir
  that exists, a symlink refused by ``O_NOFOLLOW`` (ELOOP), a name too long, a directory where a file was
  expected). Standalone callers (the CLI, a ``Log`` opened alone) report it as a usage/I/O problem of that path;
  inside a log dir its content cannot be served as written, which the manager handles like a disk failure.

This module depends on nothing but :mod:`kafkalog.errors`, so every layer (index, segment, log, manager, CLI)
can ask it.
"""

from __future__ import annotations

import enum
import errno
import os

from kafkalog.errors import ResourceExhaustedError, io_cause

#: The errors ``Path.exists`` and ``Path.is_file`` answer False for (pathlib's ignored errnos): nothing usable is at
#: the path, which code that skips a stat and tries the open directly must read the same way.
MISSING_PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})

__all__ = [
    "DISK_ERRNOS",
    "INPUT_ERRNOS",
    "MISSING_PATH_ERRNOS",
    "RESOURCE_ERRNOS",
    "OSErrorClass",
    "classify",
    "is_resource_exhaustion",
    "resource_error",
]


class OSErrorClass(str, enum.Enum):
    DISK = "disk"
    RESOURCE = "resource"
    INPUT = "input"


def _codes(*names: str) -> frozenset[int]:
    return frozenset(getattr(errno, n) for n in names if hasattr(errno, n))


#: The process ran out of something; the disk is fine. EAGAIN is mmap's "locked or mapped memory limit".
RESOURCE_ERRNOS = _codes("EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "ENOBUFS")
#: The request names something unusable: the path, not the device, is at fault.
INPUT_ERRNOS = _codes("ENOENT", "ELOOP", "ENAMETOOLONG", "EISDIR", "ENOTDIR", "EEXIST", "EINVAL")
#: Named for the documentation table; every errno in neither set above is a disk error too.
DISK_ERRNOS = _codes("EIO", "ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "ESTALE", "EBADF", "ENXIO", "ENODEV",
                     "EUCLEAN", "EFBIG")


def _dir_vanished(exc: OSError, path: str | os.PathLike[str] | None) -> bool:
    """A missing-path error whose directory is gone too: a lost mount or a removed log dir, not a missing file."""
    where = path if path is not None else exc.filename
    if where is None:
        return False  # raised by kafkalog itself for a file it looked for (a missing index): the file is missing
    try:
        parent = os.path.dirname(os.path.abspath(os.fspath(where)))
    except TypeError:
        return True
    return not os.path.isdir(parent)


def classify(exc: BaseException, *, path: str | os.PathLike[str] | None = None) -> OSErrorClass | None:
    """The class of the ``OSError`` behind ``exc`` (an ``OSError`` or a ``KafkaStorageError`` raised from one),
    or None when ``exc`` is not an I/O failure. ``path``: the file the operation was about, when the error does
    not carry it (it decides whether an ENOENT/ENOTDIR is a missing file or a vanished directory)."""
    if isinstance(exc, ResourceExhaustedError):
        return OSErrorClass.RESOURCE
    cause = io_cause(exc)
    if cause is None:
        return None
    code = cause.errno
    if code is None and isinstance(cause, FileNotFoundError):
        code = errno.ENOENT  # raised with a message only (a missing offset index)
    if code in RESOURCE_ERRNOS:
        return OSErrorClass.RESOURCE
    if code in (errno.ENOENT, errno.ENOTDIR):
        return OSErrorClass.DISK if _dir_vanished(cause, path) else OSErrorClass.INPUT
    if code in INPUT_ERRNOS:
        return OSErrorClass.INPUT
    return OSErrorClass.DISK


def is_resource_exhaustion(exc: BaseException) -> bool:
    """True for a process limit (descriptors, memory, mappings) rather than a failed disk or a bad path."""
    if isinstance(exc, ResourceExhaustedError):
        return True
    cause = io_cause(exc)
    return cause is not None and cause.errno in RESOURCE_ERRNOS


def resource_error(cause: BaseException, what: str = "") -> ResourceExhaustedError:
    """The typed, retriable error for an exhausted process limit (``cause`` kept as ``__cause__``)."""
    if isinstance(cause, ResourceExhaustedError):
        return cause
    inner = io_cause(cause) or cause
    err = ResourceExhaustedError(
        f"{what + ': ' if what else ''}process limit reached ({inner}); the log dir stays online, retry once "
        "handles are freed or raise the limit (ulimit -n, kafkalog.max.open.files)",
        errno=getattr(inner, "errno", None),
    )
    err.__cause__ = inner
    return err

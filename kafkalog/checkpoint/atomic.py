"""The one way kafkalog replaces a checkpoint or metadata file: never torn, never half-written.

Same steps as Kafka's ``CheckpointFile.write`` + ``Utils.atomicMoveWithFallback``: write ``<path>.tmp``, flush and
fsync it, rename it over the target (atomic on POSIX), then fsync the parent directory so the rename itself
survives a crash. A crash at any point leaves either the old file or the new one, plus at most a stale ``.tmp``
that the next write truncates. ``OSError`` propagates unchanged: deciding that a log dir is offline belongs to
the manager.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from kafkalog.errors import InvalidArgumentTypeError
from kafkalog.io.cpu_gate import io_wait

TMP_SUFFIX = ".tmp"


def tmp_path_for(path: str | os.PathLike[str]) -> Path:
    """Where :func:`atomic_write` stages the new content of ``path``."""
    p = Path(path)
    return p.with_name(p.name + TMP_SUFFIX)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename or create inside it is durable (no-op where dirs cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (IsADirectoryError, PermissionError):  # platforms that cannot open a directory for reading
        return
    try:
        with io_wait():
            os.fsync(fd)
    except OSError as e:  # some filesystems refuse fsync on a directory (EINVAL); Kafka ignores that too
        if e.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (tmp file, fsync, rename, fsync of the parent dir).

    ``sync=False`` skips both fsyncs (Kafka's ``write(entries, sync=false)``), keeping the atomic rename.
    On failure the tmp file is removed when possible and the original ``OSError`` is raised; the target is
    untouched unless the rename itself succeeded.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentTypeError(f"atomic_write takes bytes, got {type(data).__name__}")
    target = Path(path)
    tmp = tmp_path_for(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if sync:
                with io_wait():
                    os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(target.parent if str(target.parent) else Path("."))

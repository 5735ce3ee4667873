"""The one place segment and index code reach the operating system for file access.

Segments and indexes ask this module to open their files, read at a position, map a file (or learn that it
cannot be mapped), write at a position and reserve blocks. Each answer has two paths:

* **Descriptor path**: a real OS file: ``pread``/``pwrite``, ``mmap`` and ``posix_fallocate``.
* **Non-mapping path**: for filesystems that cannot map, ``pread`` or ``fallocate`` (some network filesystems,
  pyfakefs, which is one of them): whole-file reads, seek+read / seek+write through the file object (callers hold
  their own lock around it), and no block reservation. The bytes on disk are the same either way.

Which path a file takes is decided here (:func:`is_real_file`) and nowhere in the format code. Tests swap the
layer by patching this module's functions (or ``mmap.mmap`` / ``os.posix_fallocate`` underneath it).
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
from collections.abc import Callable, Iterator
from typing import IO

from kafkalog.io.oserrors import is_resource_exhaustion

__all__ = [
    "append_at", "drop_pages", "fallocate", "is_real_file", "map_file", "pread", "pwrite_all", "read_file", "read_fully",
    "read_whole", "sync", "truncate",
]  # fmt: skip

# posix_fallocate errors meaning "this filesystem (or file) cannot preallocate": callers write unguarded.
FALLOCATE_UNSUPPORTED = frozenset(
    getattr(errno, name) for name in ("EOPNOTSUPP", "ENOTSUP", "EINVAL", "ENOSYS", "ENODEV", "ESPIPE")
    if hasattr(errno, name)
)


def is_real_file(fh: object) -> bool:
    """True for a file object backed by a real OS descriptor.

    pyfakefs hands out fake descriptors that can equal a real, unrelated descriptor of this process; handing one
    to ``mmap``, ``pread`` or ``fallocate`` could reach the wrong file. Only real ``io`` objects take the
    descriptor path.
    """
    return isinstance(fh, (io.BufferedRandom, io.BufferedReader, io.FileIO))


def read_fully(fd: int, size: int | None = None) -> bytes:
    """The first ``size`` bytes of ``fd`` (fewer if the file is shorter; None: up to its end), by positional
    reads."""
    chunks = []
    got = 0
    while size is None or got < size:
        chunk = os.pread(fd, (1 << 16) if size is None else size - got, got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_file(path: str | os.PathLike[str]) -> bytes:
    """Every byte of the file at ``path``: ``open(path, "rb").read()`` through a bare descriptor (four syscalls
    instead of a buffered file object's nine), for the small files a partition load reads whole. The errors are
    ``open``'s (a directory fails at the read instead of the open, with the same IsADirectoryError)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return read_fully(fd)
    finally:
        os.close(fd)


def read_whole(fh: IO[bytes], size: int) -> bytes | None:
    """The first ``size`` bytes of ``fh`` by positional reads, or None where the file has no real descriptor (the
    caller then takes its non-mapping path)."""
    if not is_real_file(fh):
        return None
    return read_fully(fh.fileno(), size)


def pread(fh: IO[bytes], position: int, size: int) -> bytes:
    """``size`` bytes at ``position``; where ``pread`` fails (no real descriptor) seek+read, so the caller holds
    the lock that guards ``fh``'s position."""
    try:
        return os.pread(fh.fileno(), size, position)
    except OSError:
        fh.seek(position)
        return fh.read(size)


def append_at(fh: IO[bytes], data: bytes | memoryview, position: int) -> None:
    """Write all of ``data`` at ``position`` of an unbuffered file (a ``.log`` being appended to): seek, then
    ``write`` until done, so a short write continues where it stopped; the caller holds the file's lock."""
    fh.seek(position)
    view = memoryview(data)
    written = 0
    while written < len(view):
        written += fh.write(view[written:])


def pwrite_all(fh: IO[bytes], data: bytes | memoryview, position: int, name: str) -> None:
    """Write all of ``data`` at ``position``. A real file takes ``pwrite``, past Python's buffer (a failed buffered
    write stays in the buffer and fails every later flush, trim and close); others seek+write+flush."""
    if is_real_file(fh):
        fd = fh.fileno()
        view = memoryview(data)
        done = 0
        while done < len(view):
            n = os.pwrite(fd, view[done:], position + done)
            if n <= 0:
                raise OSError(errno.EIO, "short write", name)
            done += n
    else:
        fh.seek(position)
        fh.write(data)
        fh.flush()


def map_file(
    fh: IO[bytes],
    length: int,
    *,
    writable: bool = False,
    populate: bool = False,
    relieve: Callable[[], None] | None = None,
) -> mmap.mmap | None:
    """Map ``fh``'s first ``length`` bytes (0: the whole file), or None where the file cannot be mapped (no real
    descriptor, the filesystem refuses, an empty file). ``populate`` prefaults a read-only map's pages
    (``MAP_POPULATE`` where the platform has it: one kernel call instead of a fault per page). ``relieve`` frees
    descriptors or map space when the process is out of them; the map is then tried once more."""
    if not is_real_file(fh):
        return None
    try:
        return _map(fh.fileno(), length, writable, populate)
    except OSError as exc:
        if relieve is None or not is_resource_exhaustion(exc):
            return None
    except ValueError:
        return None
    relieve()
    try:
        return _map(fh.fileno(), length, writable, populate)
    except (OSError, ValueError):
        return None


def _map(fd: int, length: int, writable: bool, populate: bool) -> mmap.mmap:
    flag = getattr(mmap, "MAP_POPULATE", 0) if populate and not writable else 0
    if flag:
        return mmap.mmap(fd, length, flags=mmap.MAP_SHARED | flag, prot=mmap.PROT_READ)
    return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)


def no_readahead(fh: IO[bytes]) -> IO[bytes]:
    """``fh`` with the kernel's readahead off (``POSIX_FADV_RANDOM``): a reader of a few known ranges (an index
    entry's batch, a ranged chunk) gets those pages only. With readahead on, one small read marks pages for an
    asynchronous window of the device's readahead size (8 MiB on this project's disks), which the next reader of
    the file then pays for. Returns ``fh``; a no-op where ``posix_fadvise`` does not exist or fails."""
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    return fh


#: bytes one ``MADV_WILLNEED`` asks for (the kernel caps one request at the device's readahead size)
_WILLNEED_STEP = 4 << 20


@contextlib.contextmanager
def mapped_range(path: str, start: int, end: int) -> Iterator[mmap.mmap | None]:
    """A read-only map of ``path`` for reading ``[start, end)`` and nothing else: its page faults read nothing
    ahead (``MADV_RANDOM``) and that range alone is asked for (``MADV_WILLNEED``). A fault on a plain map reads
    around it by the device's readahead size (8 MiB on this project's disks): a whole 8 MiB segment for a few
    batches near its start or end. None where the file cannot be mapped or ``madvise`` is missing (the caller
    reads the path its own way). A chunk still viewing the map keeps it open until collected."""
    if getattr(mmap, "MADV_RANDOM", None) is None or not hasattr(mmap.mmap, "madvise") or end <= start:
        yield None
        return
    with open(path, "rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            mm = None
    if mm is None:
        yield None
        return
    try:
        mm.madvise(mmap.MADV_RANDOM)
        at, end = start - start % mmap.PAGESIZE, min(end, len(mm))
        while at < end:
            step = min(_WILLNEED_STEP, end - at)
            mm.madvise(mmap.MADV_WILLNEED, at, step)
            at += step
        yield mm
    finally:
        with contextlib.suppress(BufferError):
            mm.close()


def drop_pages(mm: mmap.mmap, start: int, length: int) -> bool:
    """Give back this process's pages of a read-only file map in ``[start, start + length)`` (``MADV_DONTNEED``:
    the page cache keeps them); False where the platform or the map refuses."""
    try:
        mm.madvise(mmap.MADV_DONTNEED, start, length)
    except (OSError, ValueError, AttributeError):
        return False
    return True


def sync(fh: IO[bytes]) -> None:
    """Flush ``fh``'s buffer and fsync its file."""
    fh.flush()
    os.fsync(fh.fileno())


def truncate(fh: IO[bytes], size: int) -> None:
    """Cut (or extend with zeros) ``fh``'s file to ``size`` bytes, nothing left in Python's buffer."""
    fh.truncate(size)
    fh.flush()


def can_fallocate(fh: object | None = None) -> bool:
    """Whether blocks can be reserved at all (for ``fh``, when given): no ``os.posix_fallocate`` or no real
    descriptor means no."""
    return hasattr(os, "posix_fallocate") and (fh is None or is_real_file(fh))


def fallocate(fd: int, start: int, length: int) -> bool:
    """Reserve blocks for ``[start, start + length)`` of ``fd``; False where the filesystem cannot preallocate.
    Other failures (ENOSPC, EDQUOT, EIO ...) raise ``OSError``."""
    try:
        os.posix_fallocate(fd, start, length)
    except OSError as exc:
        if exc.errno in FALLOCATE_UNSUPPORTED:
            return False
        raise
    return True

"""Rewrite a derived file (index, producer snapshot) in place, leaving it alone when it already holds the bytes.

Recovery rebuilds indexes and producer snapshots that, after most crashes, are already on disk byte for byte.
Rewriting them the obvious ways is the dearest part of recovering a small segment on ext4:

* truncating a file to zero and writing it again makes ext4 (``auto_da_alloc``) flush it on close;
* renaming a new file over it does the same, and deleting then creating it costs two directory updates.

Reading a small file and comparing costs a few microseconds. These files are only ever *derived* from the log, and
their readers detect damage (index sanity checks, the snapshot CRC) and rebuild, so a write torn by a crash costs
a rebuild, never data. Checkpoints and metadata, which are not derived, go through
:func:`kafkalog.checkpoint.atomic.atomic_write` instead.
"""

from __future__ import annotations

import os

__all__ = ["rewrite_in_place"]


def rewrite_in_place(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> bool:
    """Make ``path`` hold exactly ``data``; returns False when it already did (nothing was written).

    The file is created if missing, overwritten from offset 0 and cut to ``len(data)``; it is never truncated
    to zero first. ``OSError`` propagates (the caller's failure channel decides what it means).
    """
    view = memoryview(data).cast("B")
    size = len(view)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        length = os.fstat(fd).st_size
        if length == size and os.pread(fd, size, 0) == view:
            return False
        written = 0
        while written < size:
            written += os.pwrite(fd, view[written:], written)
        if length > size:
            os.ftruncate(fd, size)
        return True
    finally:
        os.close(fd)

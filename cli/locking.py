"""The one way a command that writes under a log dir takes the dir: Kafka's ``.lock``, as the broker takes it.

Every CLI writer (``recover``, ``recover --salvage``, ``checkpoints set``) runs its writes inside
:func:`log_dir_writer`, so none can edit a dir a running broker or a ``LogManager`` holds: the library's
``DirLock`` conflicts with a broker's ``FileChannel.tryLock`` both ways (``kafkalog.manager.lock``). Refusal is
``LogDirLockedError``, which the CLI prints as one line naming the lock file and exits 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafkalog.manager.lock import DirLock

__all__ = ["log_dir_writer"]


@contextmanager
def log_dir_writer(log_dir: str, *, dry_run: bool = False) -> Iterator[None]:
    """Hold ``log_dir``'s lock for the block (``LogDirLockedError`` while anyone else holds it).

    ``dry_run``: the block only reads, but its answer is about files a live broker keeps changing, so it is
    refused the same way; nothing is taken or created (``DirLock.check_free``), a read-only user can run it.
    """
    if dry_run:
        DirLock.check_free(log_dir)
        yield
        return
    with DirLock.acquire(log_dir):
        yield

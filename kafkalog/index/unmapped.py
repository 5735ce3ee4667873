"""An index's file read or resized without mapping it: what a one-shot check or a partition load needs.

Mapping a small file costs several times reading it (see ``READ_NOT_MAP_BYTES``), and a load that maps an
active segment's indexes only to grow them, then unmaps them after, pays for maps nobody uses. This mixin of
``AbstractIndex`` serves checks from a copy of the entries and grows an unmapped file through a bare descriptor;
it uses the state ``AbstractIndex`` keeps (lock, loaded/suspended entry counts, ``_install``/``_release``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from kafkalog.errors import IndexStateError
from kafkalog.io.file_access import read_fully
from kafkalog.io.handle_cache import HandleCache

# Files up to this size are read rather than mapped when they will be read whole, once (a check, a recovery):
# mmap + a page fault per page + munmap (a TLB flush on every CPU running the process) cost 16-19 us for a
# small cached file on the reference VM (38-53 us when its pages come from disk), open + read 7-10 us. Larger
# files are mapped: no allocation grows with a file.
READ_NOT_MAP_BYTES = 1 << 20


class UnmappedAccess:
    """``read_for_check`` and the resize of an index nobody has mapped (see the module docstring)."""

    ENTRY_SIZE: ClassVar[int]
    _lock: threading.RLock
    _busy: int
    _loaded: bool
    _use_mmap: bool
    _fspath: str
    _suspended_entries: int | None

    _cache: Callable[[], HandleCache]
    _install: Callable[..., None]
    _release: Callable[[], None]

    @contextmanager
    def read_for_check(self) -> Iterator[None]:
        """Serve the body from a copy of the file's bytes instead of a mapping, when the index is not loaded.

        A one-shot check of a closed segment reads every entry once; mapping the file for that costs several
        times a read (see ``READ_NOT_MAP_BYTES``). A suspended (preallocated) index copies just its entries.
        The copy is dropped on exit, leaving the index unloaded (or suspended) as before. The index lock is held
        throughout, so no writer sees the copy. Loaded, fallback-mode, missing or large files take the normal
        path inside the body.
        """
        with self._lock:
            self._busy += 1  # the body uses this index while it opens others: the cache must not close it
            try:
                with self._copy_for_check():
                    yield
            finally:
                self._busy -= 1

    @contextmanager
    def _copy_for_check(self) -> Iterator[None]:
        """``read_for_check``'s body (caller holds the lock)."""
        if self._loaded or not self._use_mmap:
            yield
            return
        try:
            fd = self._cache().call(lambda: os.open(self._fspath, os.O_RDONLY), f"opening {self._fspath}")
        except FileNotFoundError:
            yield
            return
        suspended = self._suspended_entries
        try:
            length = os.fstat(fd).st_size
            # A suspended (preallocated) index: only its entries are read; the length stays the file's.
            entries = length // self.ENTRY_SIZE if suspended is None else min(length // self.ENTRY_SIZE, suspended)
            used = entries * self.ENTRY_SIZE if suspended is not None else length
            data = read_fully(fd, used) if used <= READ_NOT_MAP_BYTES else None
        finally:
            os.close(fd)
        if data is None:
            yield
            return
        self._install(bytearray(data), None, None, length, entries)
        try:
            yield
        finally:
            self._release()

    def _resize_unloaded(self, rounded: int) -> bool | None:
        """``resize`` of an index nobody has mapped: set the file's size through a bare descriptor and leave the
        index suspended with its entry count (as ``_load(resize_to=...)`` then ``suspend`` would, without the
        map and unmap: a loaded partition's active index is mapped by its first append, not by the load). None
        when the file does not exist (``_load`` creates it). Caller holds the lock."""
        try:
            fd = self._cache().call(lambda: os.open(self._fspath, os.O_RDWR), f"opening {self._fspath}")
        except FileNotFoundError:
            return None
        try:
            length = os.fstat(fd).st_size
            entries = length // self.ENTRY_SIZE
            if self._suspended_entries is not None:
                entries = min(entries, self._suspended_entries)
            changed = rounded != length
            if changed:
                if rounded < entries * self.ENTRY_SIZE:
                    raise IndexStateError(
                        f"Cannot resize {self._path} to {rounded} bytes: it holds {entries} entries"
                    )
                os.ftruncate(fd, rounded)
        finally:
            os.close(fd)
        self._suspended_entries = entries
        return changed

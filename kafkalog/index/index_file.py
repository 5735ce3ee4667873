"""The file side every index kind shares: its path (kept as a string, made a ``Path`` only when asked), base
offset, handle-cache bookkeeping and delete/rename (OS file access itself is :mod:`kafkalog.io.file_access`'s).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TypeVar

from kafkalog.io.handle_cache import HandleCache, default_cache
from kafkalog.io.oserrors import MISSING_PATH_ERRNOS
from kafkalog.names import LazyPath

_Index = TypeVar("_Index", bound="IndexFile")


class IndexFile:
    """The file name and base offset every index kind carries. The path is kept as a string and made a ``Path``
    only when asked: building thousands of Path objects showed up in startup profiles."""

    _fspath: str
    _path_obj: Path | None
    _base_offset: int
    # Handle-cache bookkeeping (kafkalog.io.handle_cache), as class defaults so an index never opened carries none.
    _handles: HandleCache | None = None  # None: the process-wide default cache
    _handle_used = False  # CLOCK bit: used since the cache's last sweep
    _busy = 0  # >0 while this thread's region keeps using the handle (read_for_check)
    _dirty = False  # entries written since the last flush (a flush after eviction fsyncs the file)

    def _cache(self) -> HandleCache:
        return self._handles or default_cache()

    def set_handle_cache(self, cache: HandleCache | None) -> None:
        """Count this index's mapping/handle in ``cache`` (None: the process-wide default)."""
        self._handles = cache

    def _sync_closed_file(self) -> None:
        """fsync the file through a short-lived descriptor: entries written through a mapping or handle the cache
        has closed since are in the page cache, not yet on disk."""
        try:
            fd = self._cache().call(lambda: os.open(self._fspath, os.O_RDONLY), f"opening {self._fspath}")
        except FileNotFoundError:  # deleted since: nothing left to make durable
            self._dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    _path = LazyPath("_fspath", "_path_obj")

    @property
    def file(self) -> Path:
        """The index file's path (follows renames to ``.deleted``/``.cleaned``/``.swap`` and moves)."""
        return self._path

    def exists(self) -> bool:
        """``self.file.exists()`` without building the Path: False for the errors ``Path.exists`` answers False
        for, any other error raised."""
        try:
            os.stat(self._fspath)
        except OSError as exc:
            if exc.errno in MISSING_PATH_ERRNOS:
                return False
            raise
        return True

    path = file

    @property
    def base_offset(self) -> int:
        """The base offset of the segment the index belongs to (the number in its file name)."""
        return self._base_offset

    # --- the file itself: the same for every index kind ------------------------------------------------------

    _lock: threading.RLock

    def _let_go(self) -> None:
        """Drop whatever the index holds of its file (map, handle) before the file is deleted."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Index) -> _Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def delete(self) -> bool:
        """Let go of the file and delete it; False if it did not exist."""
        with self._lock:
            self._let_go()
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            return True

    delete_if_exists = delete

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the backing file (if it exists yet) and follow it."""
        new = Path(path)
        with self._lock:
            try:
                os.replace(self._path, new)
            except FileNotFoundError:
                if self._path.exists():
                    raise
            finally:
                self._path = new

    def update_parent_dir(self, parent: str | os.PathLike[str]) -> None:
        """Point at the same file name in ``parent`` after the partition dir was renamed."""
        self._path = Path(parent) / self._path.name

"""Shared machinery for Kafka's fixed-size, big-endian index files (``.index``, ``.timeindex``).

Kafka keeps these files memory-mapped and preallocated to ``segment.index.bytes`` (rounded down to a whole entry)
while a segment is active, trims them to the used size on roll/close, and takes an existing file as full
(entries = length // entry size). ``AbstractIndex`` reproduces that, with three choices of its own:

* **Lazy** (Kafka's ``LazyIndex``, KIP-263): the constructor touches no file; the file is opened, created or mapped
  on first use, so loading thousands of segments costs nothing until an index is needed.
* **Fallback**: where :mod:`kafkalog.io.file_access` says the file cannot be mapped, it is read into a
  ``bytearray`` and entries are written through that layer's positional writes, with identical results on disk.
* **Disk full**: a preallocated index is a sparse file, and a store into a mapped page with no block behind it on
  a full filesystem kills the process with SIGBUS. Before an entry lands past the blocks known to back the file,
  ``posix_fallocate`` reserves the next chunk (64 KiB, doubling up to 1 MiB; page aligned and inside the file, so
  its size and bytes do not change; on a nearly full disk just the pages the entry needs). A full disk is then an
  ``OSError`` (ENOSPC, EDQUOT, EROFS, EIO ...) from the append, with the index as it was. One call per chunk, one
  integer compare per entry. Where the file access layer cannot fallocate (EOPNOTSUPP / EINVAL, no
  real descriptor, no ``os.posix_fallocate``) or the mapped file is no longer at its path, entries are written unguarded (without a reserve).
  (glibc emulates ``posix_fallocate`` where the filesystem lacks ``fallocate`` by writing a zero byte per block,
  only where a zero is already read: the content stays the same.) Copy-on-write filesystems (btrfs, ZFS) may
  still need new blocks when a reserved page is written, so there the guard narrows the window rather than
  closing it.
* **Search**: Kafka's warm/cold slot search, in ``search.IndexSearch``; the file name, handle bookkeeping and
  rename/delete are ``index_file.IndexFile``'s.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import struct
import threading
from typing import ClassVar

import numpy as np

from kafkalog.errors import ConfigError, IndexOffsetOverflowError, IndexStateError
from kafkalog.index.index_file import IndexFile
from kafkalog.index.search import KEY, VALUE, IndexSearch, first_true
from kafkalog.index.unmapped import READ_NOT_MAP_BYTES, UnmappedAccess
from kafkalog.io import file_access
from kafkalog.io.file_access import read_fully
from kafkalog.io.handle_cache import HandleCache
from kafkalog.io.rewrite import rewrite_in_place

# IndexFile, KEY, VALUE, first_true and read_fully stay importable from here (their homes: index_file, search,
# file_access).
__all__ = ["DEFAULT_MAX_INDEX_SIZE", "KEY", "READ_NOT_MAP_BYTES", "VALUE", "WARM_SECTION_BYTES", "AbstractIndex",
           "IndexFile", "first_true", "read_fully"]

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # Kafka's segment.index.bytes default
WARM_SECTION_BYTES = 8192  # Kafka's warm section: the last 8 KiB of entries stay in page cache
_INT32_MAX = 2**31 - 1

_PAGE = mmap.PAGESIZE
# Blocks reserved ahead of index writes per posix_fallocate call: 64 KiB first, doubling per chunk up to 1 MiB, so
# a quiet index holds little unused disk and a busy one pays ~14 fallocate calls per 10 MiB of entries.
_RESERVE_MIN = max(64 * 1024, 4 * _PAGE)
_RESERVE_MAX = max(1024 * 1024, _RESERVE_MIN)



#: Up to this many entries, the strict checks given Python lists of batches (``small_batch_table``: a small
#: ``.log``) run as plain loops: numpy's fixed cost per call is most of a vectorised check of a few entries.
SMALL_CHECK_ENTRIES = 256


def _is_list_or_none(value: object) -> bool:
    """The strict checks' test for the lists ``small_batch_table`` gives (arrays take the vectorised path)."""
    return value is None or type(value) is list


class AbstractIndex(IndexFile, IndexSearch, UnmappedAccess):
    """A file of fixed-size big-endian entries, searched by Kafka's rules. Subclasses define the entry layout."""

    ENTRY_SIZE: ClassVar[int]
    DTYPE: ClassVar[np.dtype]  # big-endian structured dtype of one entry
    KEY_FIELD: ClassVar[str]
    VALUE_FIELD: ClassVar[str]
    _FIELD_STRUCTS: ClassVar[tuple[struct.Struct, struct.Struct]]  # key, value
    _FIELD_OFFSETS: ClassVar[tuple[int, int]]  # byte offset of key, value inside an entry
    _OFFSET_FIELD: ClassVar[int]  # KEY or VALUE: the field holding the relative offset

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        *,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        use_mmap: bool = True,
        handles: HandleCache | None = None,
    ) -> None:
        # Nothing here may touch the file system: see the module docstring (lazy loading). The Path object is
        # also made lazily (the ``file`` property): a loader opening thousands of segments only needs the string.
        self._path = path
        self._base_offset = int(base_offset)
        self._max_index_size = int(max_index_size)
        self._writable = writable
        self._use_mmap = use_mmap
        self._lock = threading.RLock()
        self._loaded = False
        self._buf: mmap.mmap | bytearray = bytearray()
        self._mm: mmap.mmap | None = None
        self._fh: io.BufferedRandom | None = None  # only in fallback mode, for writes
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        self._generation = 0  # bumped on every change, invalidates the key cache
        self._key_cache: tuple[int, np.ndarray, bool] | None = None
        self._warm_entries = WARM_SECTION_BYTES // self.ENTRY_SIZE
        self._suspended_entries: int | None = None  # set by suspend(), used by the next load
        # Disk-full guard (module docstring): the file has blocks from the write position's page up to
        # _reserved_end; 0 after every (re)map, truncation or resize, so the next write reserves from its own page
        # on. _reserve_bytes is the next chunk's size. _file_id is the mapped file's (st_dev, st_ino): reservations
        # go through a new descriptor, and only into that file.
        self._reserved_end = 0
        self._reserve_bytes = _RESERVE_MIN
        self._fallocate_ok = file_access.can_fallocate()
        self._file_id: tuple[int, int] | None = None
        if handles is not None:
            self._handles = handles

    # ------------------------------------------------------------------------------------------------ properties


    @property
    def max_index_size(self) -> int:
        """The most bytes the file may hold (``segment.index.bytes``), which sets ``max_entries``."""
        return self._max_index_size

    @property
    def writable(self) -> bool:
        """False for an index opened read-only (a segment below the active one, or a dump)."""
        return self._writable

    @property
    def is_loaded(self) -> bool:
        """Whether the file has been opened (Kafka's ``LazyIndex`` holding an index rather than a file name)."""
        return self._loaded

    @property
    def is_mmapped(self) -> bool:
        """True while the file is mapped; the handle cache unmaps idle indexes and reloads on use."""
        return self._mm is not None

    @property
    def entry_count(self) -> int:
        """Number of entries in use (loads the index)."""
        self._ensure_loaded()
        return self._entries

    def entries(self) -> np.ndarray:
        """Every entry as a numpy structured array with absolute offsets (api.md's ``entries()``); a copy."""
        return self.entries_array()

    @property
    def max_entries(self) -> int:
        """How many entries fit in ``max_index_size``: when reached, Kafka rolls the segment."""
        self._ensure_loaded()
        return self._max_entries

    @property
    def length(self) -> int:
        """Current file length in bytes (the preallocated size while writable)."""
        self._ensure_loaded()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes actually used by entries."""
        self._ensure_loaded()
        return self._entries * self.ENTRY_SIZE

    def __len__(self) -> int:
        return self.entry_count

    def is_full(self) -> bool:
        """True when no entry fits any more, one of the conditions that roll the segment."""
        self._ensure_loaded()
        return self._entries >= self._max_entries

    def __repr__(self) -> str:
        state = f"entries={self._entries}/{self._max_entries}" if self._loaded else "not loaded"
        return f"{type(self).__name__}({str(self._path)!r}, base_offset={self._base_offset}, {state})"

    @classmethod
    def from_bytes(cls, path: str, base_offset: int, data: bytes | bytearray) -> AbstractIndex:
        """A read-only index over ``data`` held in memory (a remote object's bytes): checked and searched as the
        file would be, with ``path`` the name its messages give; no file is opened."""
        idx = cls(path, base_offset, writable=False)
        with idx._lock:
            idx._install(bytearray(data), None, None, len(data), len(data) // cls.ENTRY_SIZE)
        return idx

    # ------------------------------------------------------------------------------------------------ loading

    def _ensure_loaded(self) -> None:
        self._handle_used = True
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    self._load()

    def _load(self, resize_to: int | None = None) -> bool:
        """Open and map the file; with ``resize_to`` (whole entries) set its size first, so a resize of an index
        not loaded yet maps it once instead of map, unmap, truncate, map. True when the size changed."""
        es = self.ENTRY_SIZE
        newly_created = False
        if not os.path.exists(self._fspath):
            if not self._writable:
                # A reader never creates files: a missing read-only index is simply empty.
                self._install(bytearray(), None, None, 0, 0)
                return False
            if self._max_index_size < es:
                raise ConfigError(f"Invalid max index size {self._max_index_size} for {self._path}")
            newly_created = True
            with self._cache().call(lambda: open(self._fspath, "xb"), f"creating {self._fspath}") as fh:
                file_access.truncate(fh, es * (self._max_index_size // es))
        mode = "r+b" if self._writable else "rb"
        fh = self._cache().call(lambda: open(self._fspath, mode), f"opening {self._fspath}")
        try:
            st = os.fstat(fh.fileno())
            length = st.st_size
            entries = 0 if newly_created else length // es
            if self._suspended_entries is not None:  # unmapped by suspend(): the file is preallocated, not full
                entries = min(entries, self._suspended_entries)
                self._suspended_entries = None
            changed = resize_to is not None and resize_to != length
            if changed:
                if resize_to < entries * es:  # type: ignore[operator]
                    raise IndexStateError(
                        f"Cannot resize {self._path} to {resize_to} bytes: it holds {entries} entries"
                    )
                file_access.truncate(fh, resize_to)
                length = resize_to  # type: ignore[assignment]
            self._map(fh, length, entries, st)
        except BaseException:
            fh.close()
            raise
        return changed

    def _map(self, fh: io.BufferedRandom, length: int, entries: int, st: os.stat_result | None = None) -> None:
        """Map ``fh`` (taking ownership of it) or fall back to an in-memory copy plus file writes.

        ``st`` is ``fh``'s stat when the caller has it (saves a syscall per lazy load).
        """
        mappable = self._use_mmap and file_access.is_real_file(fh)
        if length == 0 and mappable:
            # Nothing to map (a trimmed empty index); a later resize maps the grown file.
            fh.close()
            self._install(bytearray(), None, None, 0, entries)
            return
        if length > 0 and mappable:
            mm = file_access.map_file(fh, length, writable=self._writable, relieve=self._cache().relieve)
            if mm is not None:
                if self._writable:
                    if st is None:
                        st = os.fstat(fh.fileno())
                    self._file_id = (st.st_dev, st.st_ino)
                fh.close()  # the mapping outlives the descriptor, as in Kafka
                self._install(mm, mm, None, length, entries)
                return
        fh.seek(0)
        data = bytearray(fh.read(length))
        if self._writable:
            self._install(data, None, fh, length, entries)
        else:
            fh.close()
            self._install(data, None, None, length, entries)

    def _install(
        self,
        buf: mmap.mmap | bytearray,
        mm: mmap.mmap | None,
        fh: io.BufferedRandom | None,
        length: int,
        entries: int,
    ) -> None:
        self._buf, self._mm, self._fh = buf, mm, fh
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        self._entries = entries
        self._reserved_end = 0
        self._reserve_bytes = _RESERVE_MIN
        self._loaded = True
        self._changed()
        if mm is not None or fh is not None:
            self._cache().add(self)

    def _release(self) -> None:
        """Drop the mapping / file handle and go back to the not-loaded state (the file stays as it is)."""
        mm, fh = self._mm, self._fh
        self._buf, self._mm, self._fh = bytearray(), None, None
        self._key_cache = None
        self._reserved_end = 0
        self._file_id = None
        self._loaded = False
        if mm is not None or fh is not None:
            self._cache().discard(self)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a numpy view is still alive somewhere; the mapping goes when it does
        if fh is not None:
            fh.close()

    def _evict_handles(self) -> bool:
        """The handle cache wants the mapping back: give it unless another thread is inside this index or this
        thread is in a region that keeps using it. A preallocated (active) index is suspended, keeping its entry
        count and room; a trimmed one is released outright (it reopens as a full, existing index)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._busy:
                return False
            if self._loaded and (self._mm is not None or self._fh is not None):
                if self._writable and self._length != self._entries * self.ENTRY_SIZE:
                    self.suspend()
                else:
                    self._release()
            return True
        finally:
            self._lock.release()

    def _changed(self) -> None:
        """Called after entries change; subclasses refresh their cached last entry."""
        self._generation += 1
        self._key_cache = None

    # ------------------------------------------------------------------------------------------------ writing

    def _check_writable(self) -> None:
        if not self._writable:
            raise IndexStateError(f"Index {self._path} is read-only")

    def relative_offset(self, offset: int) -> int:
        """``offset`` relative to the base offset; raises if it does not fit in an i32 (Kafka's rule)."""
        rel = offset - self._base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self._path})")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        """True when ``offset`` fits the 4-byte relative offset an entry stores (base .. base + 2^31-1)."""
        return 0 <= offset - self._base_offset <= _INT32_MAX

    def _write_entry(self, packed: bytes) -> None:
        """Write one packed entry into the next free slot (caller holds the lock and checked for room).

        Raises ``OSError`` (ENOSPC, EIO, EROFS ...) with the index unchanged when the blocks for the entry cannot
        be had, instead of a SIGBUS from the mapping.
        """
        pos = self._entries * self.ENTRY_SIZE
        end = pos + len(packed)
        if end > self._reserved_end:
            self._reserve(pos, end)
        fh = self._fh
        if fh is not None:
            # Written through before anything changes, so a write error is this entry's and leaves the index as it
            # was.
            file_access.pwrite_all(fh, packed, pos, self._fspath)
        self._buf[pos:end] = packed
        self._dirty = True
        self._entries += 1
        self._changed()

    def _reserve(self, pos: int, end: int) -> None:
        """Make sure blocks back the file from ``pos``'s page through ``end`` (and up to a chunk beyond) before an
        entry is written there, so a full filesystem is an ``OSError`` now rather than a SIGBUS in the store.
        Caller holds the lock; ``end`` is inside the file."""
        length = self._length
        if not self._fallocate_ok:
            self._reserved_end = length  # no guard possible: no further checks until the next (re)map
            return
        start = pos - pos % _PAGE
        stop = min(length, start + self._reserve_bytes)
        fh = self._fh
        if fh is not None:
            if not file_access.can_fallocate(fh):
                self._reserved_end = length  # no descriptor the layer can reserve through
                return
            self._fallocate(fh.fileno(), start, stop, end, length)
            return
        if self._mm is None:
            return
        # The mapping closed its descriptor: reserve through a short-lived one, in the mapped file only.
        try:
            fd = os.open(self._fspath, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self._reserved_end = length  # the mapped file left its path: unguarded until the next map
            return
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._file_id or st.st_size < stop:
                # Another file now has this path (or ours shrank behind our back): fallocate there would grow or
                # allocate a file that is not the one mapped. Unguarded until the next map.
                self._reserved_end = length
                return
            self._fallocate(fd, start, stop, end, length)
        finally:
            os.close(fd)

    def _fallocate(self, fd: int, start: int, stop: int, end: int, length: int) -> None:
        """Reserve [start, stop) (``end``: where the pending entry ends); ENOSPC / EDQUOT on the whole chunk falls
        back to just the pages up to ``end``. Raises ``OSError`` naming the file; marks unsupported filesystems."""
        try:
            supported = file_access.fallocate(fd, start, stop - start)
        except OSError as exc:
            code = exc.errno
            need = min(length, -(-end // _PAGE) * _PAGE)
            if code not in (errno.ENOSPC, errno.EDQUOT) or need >= stop:
                raise OSError(code, exc.strerror, self._fspath) from exc
            # Not a whole chunk left: the pages this entry needs may still fit.
            try:
                supported = file_access.fallocate(fd, start, need - start)
            except OSError as exc2:
                raise OSError(exc2.errno, exc2.strerror, self._fspath) from exc2
            stop = need
        else:
            if supported and self._reserve_bytes < _RESERVE_MAX:
                self._reserve_bytes *= 2
        if not supported:
            self._fallocate_ok = False  # remembered for this index, across remaps
            self._reserved_end = length
            return
        self._reserved_end = stop

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (no effect past the last entry)."""
        with self._lock:
            self._ensure_loaded()
            rel = offset - self._base_offset
            field = self._OFFSET_FIELD
            slot = self._slot_for(rel, field)
            at = slot * self.ENTRY_SIZE + self._FIELD_OFFSETS[field]
            if slot < 0:
                n = 0
            elif self._FIELD_STRUCTS[field].unpack_from(self._buf, at)[0] == rel:
                n = slot
            else:
                n = slot + 1
            self._truncate_to_entries(n)

    def _truncate_to_entries(self, entries: int) -> None:
        # Like Kafka, only the entry count moves back; stale bytes stay until overwritten or trimmed.
        entries = max(0, min(entries, self._entries))
        if entries < self._entries:
            self._reserved_end = 0  # the next write may land below the reserved chunk: reserve from its page on
        self._entries = entries
        self._changed()

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) to ``new_size`` rounded down to whole entries; True if it changed.

        Used to trim on roll/close and to grow back to the max size when a segment becomes active again.
        """
        self._check_writable()
        with self._lock:
            es = self.ENTRY_SIZE
            rounded = es * (max(0, int(new_size)) // es)
            if not self._loaded:
                changed = self._resize_unloaded(rounded) if self._use_mmap else None
                return self._load(resize_to=rounded) if changed is None else changed
            if rounded == self._length:
                return False
            if rounded < self._entries * es:
                raise IndexStateError(
                    f"Cannot resize {self._path} to {rounded} bytes: it holds {self._entries} entries"
                )
            entries = self._entries
            if self._fh is not None:  # fallback: resize the file through the open handle
                file_access.truncate(self._fh, rounded)
                data = bytearray(rounded)
                keep = min(rounded, self._length)
                data[:keep] = self._buf[:keep]
                self._buf = data  # a new object: numpy views of the old one may still be alive
                self._length = rounded
                self._max_entries = rounded // es
                self._reserved_end = 0  # a grown tail is a hole again
                self._reserve_bytes = _RESERVE_MIN
                self._changed()
                return True
            self._release()
            opener = self._cache().call
            with opener(lambda: open(self._fspath, "r+b"), f"opening {self._fspath}") as fh:
                file_access.truncate(fh, rounded)
            fh = opener(lambda: open(self._fspath, "r+b"), f"opening {self._fspath}")
            try:
                self._map(fh, rounded, entries)
            except BaseException:
                fh.close()
                raise
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to the bytes in use (on roll and close). A never-loaded index is left untouched; a
        suspended one is mapped again first (its file is still preallocated)."""
        with self._lock:
            if self._suspended_entries is not None and self._writable:
                self._ensure_loaded()
            if self._loaded and self._writable:
                self.resize(self._entries * self.ENTRY_SIZE)

    def replace_entries(self, packed: bytes | bytearray | memoryview) -> None:
        """Make the file hold exactly ``packed`` (whole big-endian entries) and leave the index unloaded.

        What ``reset`` + one ``append`` per entry + ``trim_to_valid_size`` leave on disk, with one open and
        one write instead of a preallocate, two maps and a trim per rebuild (segment recovery), through
        :func:`kafkalog.io.rewrite.rewrite_in_place` (a file that already holds these bytes is left alone). The
        index reopens lazily, as an existing file (entries = length / entry size).
        """
        self._check_writable()
        data = memoryview(packed).cast("B")
        size = len(data)
        if size % self.ENTRY_SIZE:
            raise IndexStateError(f"{size} bytes are not whole entries of {self._path}")
        with self._lock:
            self._release()
            self._suspended_entries = None  # the file now holds exactly these entries
            rewrite_in_place(self._fspath, data)

    def reset(self) -> None:
        """Remove every entry and grow back to the max size."""
        self.truncate()
        self.resize(self._max_index_size)

    def truncate(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._ensure_loaded()
            self._truncate_to_entries(0)

    def flush(self) -> None:
        """fsync what was appended, so a crash after this call cannot lose those entries."""
        with self._lock:
            if not self._loaded:
                if self._dirty:  # written, then unmapped by the handle cache before this flush
                    self._sync_closed_file()
                return
            if self._mm is not None and self._writable:
                self._mm.flush()
            elif self._fh is not None:
                file_access.sync(self._fh)
            self._dirty = False

    def close(self) -> None:
        """Trim to the valid size (writable indexes) and release the mapping and file handle.

        A later call on this object reopens the file lazily (as an existing, hence full, index).
        """
        with self._lock:
            if not self._loaded and self._suspended_entries is None:
                return
            try:
                self.trim_to_valid_size()
            finally:
                self._release()

    def suspend(self) -> None:
        """Unmap without trimming and remember the entry count, so the next use maps the file again with the same
        entries and room (an active segment's preallocated index). A loaded partition then holds no descriptor
        for it: Python's mmap keeps a duplicate descriptor per mapping, three per partition otherwise."""
        with self._lock:
            if self._loaded:
                entries = self._entries
                self._release()
                self._suspended_entries = entries

    def close_handler(self) -> None:
        """Release the mapping and file handle without trimming (Kafka's ``closeHandler``)."""
        with self._lock:
            self._release()

    def _let_go(self) -> None:
        self._release()

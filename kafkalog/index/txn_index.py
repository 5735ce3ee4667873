"""``.txnindex`` files: the aborted transactions whose abort markers sit in one segment (Kafka's
``TransactionIndex``).

Unlike the offset and time indexes this file is append-only, never preallocated and not memory-mapped; it is
created only when the first aborted transaction is appended. Each 34-byte entry is (i16 version 0, i64 producerId,
i64 firstOffset, i64 lastOffset, i64 lastStableOffset), big-endian. Files are tiny, so once loaded the content is
kept in memory and every write goes to the file too.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kafkalog.errors import CorruptIndexError, IndexStateError, InvalidOffsetError
from kafkalog.index.index_file import IndexFile
from kafkalog.index.search import first_true
from kafkalog.io import file_access
from kafkalog.io.handle_cache import HandleCache

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0

#: big-endian on-disk layout of one entry
TXN_DTYPE = np.dtype(
    [
        ("version", ">i2"),
        ("producer_id", ">i8"),
        ("first_offset", ">i8"),
        ("last_offset", ">i8"),
        ("last_stable_offset", ">i8"),
    ]
)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: its producer, first and last offsets, and the LSO when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def to_bytes(self) -> bytes:
        """The 34-byte entry as Kafka writes it to a ``.txnindex`` file."""
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> AbortedTxn:
        """Parse one 34-byte ``.txnindex`` entry at ``offset`` of ``data``."""
        version, pid, first, last, lso = _ENTRY.unpack_from(data, offset)
        return cls(pid, first, last, lso, version)


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch, and whether no later segment can add more (Kafka's
    ``TxnIndexSearchResult.isComplete``)."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex(IndexFile):
    """Kafka's transaction index for the segment starting at ``base_offset``. The constructor touches no file."""

    def __init__(self, path: str | os.PathLike[str], base_offset: int, *, writable: bool = True,
                 handles: HandleCache | None = None) -> None:
        if handles is not None:
            self._handles = handles
        self._path = path  # the Path object itself is made on first use (see ``_path``)
        self._base_offset = int(base_offset)
        self._writable = writable
        self._lock = threading.RLock()
        self._loaded = False
        self._data = bytearray()
        self._fh = None  # opened on first write
        self._last_offset: int | None = None

    start_offset = IndexFile.base_offset  # Kafka's name for a txn index's base

    @property
    def is_loaded(self) -> bool:
        """True once the file was read into memory (it loads on first use, not at open)."""
        return self._loaded

    @property
    def entry_count(self) -> int:
        """Number of whole entries (a partial tail, which Kafka also skips, is not counted)."""
        self._ensure_loaded()
        return len(self._data) // ENTRY_SIZE

    def entries(self) -> np.ndarray:
        """Every entry as a numpy structured array (api.md's ``entries()``); a copy."""
        return self.entries_array()

    @property
    def size_in_bytes(self) -> int:
        """The file's length: 34 bytes per aborted transaction recorded."""
        self._ensure_loaded()
        return len(self._data)

    @property
    def last_offset(self) -> int | None:
        """Last offset of the last entry, None when empty."""
        self._ensure_loaded()
        return self._last_offset

    def __repr__(self) -> str:
        state = f"entries={len(self._data) // ENTRY_SIZE}" if self._loaded else "not loaded"
        return f"TransactionIndex({str(self._path)!r}, base_offset={self._base_offset}, {state})"

    @classmethod
    def from_bytes(cls, path: str, base_offset: int, data: bytes | bytearray) -> TransactionIndex:
        """A read-only index over ``data`` held in memory (a remote object's bytes), named ``path`` in messages."""
        idx = cls(path, base_offset, writable=False)
        with idx._lock:
            idx._data = bytearray(data)
            idx._loaded = True
            idx._refresh_last_offset()
        return idx

    # ------------------------------------------------------------------------------------------------ loading

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            try:
                with self._cache().call(lambda: open(self._fspath, "rb"), f"opening {self._fspath}") as fh:
                    data = bytearray(fh.read())
            except FileNotFoundError:
                data = bytearray()
            self._data = data
            self._loaded = True
            self._refresh_last_offset()

    def note_absent(self) -> None:
        """The caller listed the dir a moment ago and found no file: take the state a load reaches when the open
        fails (no entries), without the failed open (a lookup of a name not in the dentry cache costs a
        directory search)."""
        with self._lock:
            if not self._loaded:
                self._data = bytearray()
                self._loaded = True
                self._last_offset = None

    def _refresh_last_offset(self) -> None:
        # Kafka forgets the last offset when it reopens a file; kafkalog reads it back, so appends after a reopen
        # are checked against what is already on disk.
        n = len(self._data) // ENTRY_SIZE
        self._last_offset = AbortedTxn.from_bytes(self._data, (n - 1) * ENTRY_SIZE).last_offset if n else None

    def _view(self) -> np.ndarray:
        n = len(self._data) // ENTRY_SIZE
        if n == 0:
            return np.empty(0, dtype=TXN_DTYPE)
        return np.frombuffer(bytes(self._data[: n * ENTRY_SIZE]), dtype=TXN_DTYPE, count=n)

    def _entry(self, i: int) -> AbortedTxn:
        txn = AbortedTxn.from_bytes(self._data, i * ENTRY_SIZE)
        if txn.version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {txn.version} in transaction index {self._path}, current "
                f"version is {CURRENT_VERSION}"
            )
        return txn

    # ------------------------------------------------------------------------------------------------ writing

    def append(self, txn: AbortedTxn) -> None:
        """Append an aborted transaction; last offsets must strictly increase (creates the file if needed)."""
        with self._lock:
            self._ensure_loaded()
            if self._last_offset is not None and self._last_offset >= txn.last_offset:
                raise InvalidOffsetError(
                    f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is "
                    f"not greater than current last offset {self._last_offset} of index {self._path}"
                )
            data = txn.to_bytes()
            file_access.pwrite_all(self._handle(), data, len(self._data), self._fspath)
            self._data += data
            self._last_offset = txn.last_offset

    def _handle(self):  # noqa: ANN202 - a binary file object
        self._handle_used = True
        if self._fh is None:
            if not self._writable:
                raise IndexStateError(f"Transaction index {self._path} is read-only")
            mode = "r+b" if os.path.exists(self._fspath) else "w+b"
            self._fh = self._cache().call(lambda: open(self._fspath, mode), f"opening {self._fspath}")
            self._cache().add(self)
        self._dirty = True
        return self._fh

    def _evict_handles(self) -> bool:
        """The handle cache wants the write handle back (the entries stay loaded; every write was flushed to
        the OS, and ``flush`` fsyncs through a new descriptor)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            fh, self._fh = self._fh, None
            if fh is not None:
                fh.close()
            return True
        finally:
            self._lock.release()

    def _truncate_bytes(self, size: int) -> None:
        if size >= len(self._data):
            return
        if self._fh is not None or os.path.exists(self._fspath):
            file_access.truncate(self._handle(), size)
        del self._data[size:]
        self._refresh_last_offset()

    def truncate_to(self, offset: int) -> None:
        """Drop the first entry whose last offset is >= ``offset`` and everything after it."""
        with self._lock:
            self._ensure_loaded()
            view = self._view()
            hit = np.flatnonzero(view["last_offset"] >= offset)
            if hit.size:
                self._truncate_bytes(int(hit[0]) * ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry (the file, if any, is cut to zero bytes)."""
        with self._lock:
            self._ensure_loaded()
            self._truncate_bytes(0)
            self._last_offset = None

    # ------------------------------------------------------------------------------------------------ reading

    def all_entries(self) -> list[AbortedTxn]:
        """Every aborted transaction, in file order."""
        with self._lock:
            self._ensure_loaded()
            return [self._entry(i) for i in range(len(self._data) // ENTRY_SIZE)]

    all_aborted_txns = all_entries

    def entries_array(self) -> np.ndarray:
        """Every entry as a native-endian structured array (a copy)."""
        with self._lock:
            self._ensure_loaded()
            return self._view().astype(TXN_DTYPE.newbyteorder("="))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), in file order (Kafka's rule:
        last offset >= fetch offset and first offset < upper bound); complete once an entry's last stable offset
        reaches the upper bound, at which point no later segment can hold an overlapping one."""
        with self._lock:
            self._ensure_loaded()
            view = self._view()
            if view.size == 0:
                return TxnIndexSearchResult([], False)
            stop = np.flatnonzero(view["last_stable_offset"] >= upper_bound_offset)
            complete = bool(stop.size)
            end = int(stop[0]) + 1 if complete else view.size
            part = view[:end]
            bad = first_true(part["version"] > CURRENT_VERSION)
            if bad >= 0:
                self._entry(bad)  # raises with Kafka's message
            hits = np.flatnonzero((part["last_offset"] >= fetch_offset) & (part["first_offset"] < upper_bound_offset))
            return TxnIndexSearchResult([self._entry(int(i)) for i in hits], complete)

    # ------------------------------------------------------------------------------------------------ checks

    def sanity_check(self) -> None:
        """Kafka's check: an entry whose last offset is below the segment's base offset is corrupt."""
        with self._lock:
            self._ensure_loaded()
            if not self._data:
                return  # no entries (most segments have no txn index file at all): nothing to look at
            view = self._view()
        bad = first_true(view["version"] > CURRENT_VERSION)
        if bad >= 0:
            with self._lock:
                self._entry(bad)
        bad = first_true(view["last_offset"] < self._base_offset)
        if bad >= 0:
            txn = AbortedTxn.from_bytes(self._data, bad * ENTRY_SIZE)
            raise CorruptIndexError(
                f"Last offset of aborted transaction {txn} in index {self._path} is less than start offset "
                f"{self._base_offset}"
            )

    def strict_check(self, next_offset: int | None = None) -> None:
        """kafkalog's stricter check: Kafka's, plus a whole number of entries, version 0, first offset <= last
        offset, last offsets strictly increasing and (given the segment's next offset) below it."""
        self.sanity_check()
        with self._lock:
            size = len(self._data)
            if not size:
                return
            view = self._view()
        if size % ENTRY_SIZE:
            raise CorruptIndexError(f"Transaction index {self._path} has {size} bytes, not a multiple of {ENTRY_SIZE}")
        checks = [
            (view["version"] != CURRENT_VERSION, "has an unknown version"),
            (view["first_offset"] > view["last_offset"], "starts after it ends"),
            (np.concatenate([[False], view["last_offset"][1:] <= view["last_offset"][:-1]]),
             "does not increase the last offset"),
        ]
        if next_offset is not None:
            checks.append((view["last_offset"] >= next_offset, f"ends at or past the next offset {next_offset}"))
        for mask, why in checks:
            bad = first_true(mask)
            if bad >= 0:
                i = bad
                raise CorruptIndexError(
                    f"Transaction index {self._path}: entry {i} "
                    f"{AbortedTxn.from_bytes(self._data, i * ENTRY_SIZE)} {why}"
                )

    # ------------------------------------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        """fsync appended entries, so a crash after this call cannot lose them."""
        with self._lock:
            if self._fh is not None:
                file_access.sync(self._fh)
                self._dirty = False
            elif self._dirty:  # written, then closed by the handle cache before this flush
                self._sync_closed_file()

    def close(self) -> None:
        """Close the file handle; a later call reloads lazily."""
        with self._lock:
            if self._fh is not None:
                self._cache().discard(self)
                self._fh.close()
                self._fh = None
            self._loaded = False
            self._data = bytearray()
            self._last_offset = None

    def _let_go(self) -> None:
        self.close()

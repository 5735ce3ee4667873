"""The cleaner's dedupe map: each key's MD5 -> the latest offset of that key in the dirty range.

Kafka's ``SkimpyOffsetMap`` stores (MD5, offset) entries of 24 bytes in a fixed buffer, so its capacity is
``memory // 24`` slots and the cleaner stops filling it at ``int(slots * load factor)`` entries: that capacity rule
decides where a partial pass ends, so it is reproduced exactly. With the compiled core (``native.py``) the map is
that buffer: one ``slots * 24``-byte array, open addressing with Kafka's probe sequence, so its memory is the
configured share of ``log.cleaner.dedupe.buffer.size`` whatever the number of keys. The pure-Python path keys a
dict by the digest: the same answers (two keys are the same key iff their MD5s are equal, as in Kafka), Python's
memory per entry.
"""

from __future__ import annotations

from hashlib import md5

import numpy as np

from kafkalog.errors import CleanerError, InvalidArgumentError

from . import native

__all__ = ["BYTES_PER_ENTRY", "OffsetMap"]

#: an MD5 hash (16 bytes) and an offset (8 bytes)
BYTES_PER_ENTRY = 24


class OffsetMap:
    """Key hash -> offset with Kafka's slot count, size and latest-offset bookkeeping. ``table`` is the compiled
    map's buffer (None on the pure-Python path, where ``_entries`` holds the map)."""

    __slots__ = ("slots", "table", "_entries", "_size", "_latest_offset")

    def __init__(self, memory: int, *, compiled: bool | None = None) -> None:
        if memory < BYTES_PER_ENTRY:
            raise InvalidArgumentError(f"an offset map of {memory} bytes holds no entry of {BYTES_PER_ENTRY} bytes")
        self.slots = memory // BYTES_PER_ENTRY
        if compiled is None:
            compiled = native.available()
        if compiled and native.compiled is None:
            raise InvalidArgumentError("the compiled cleaner core is not built (kafkalog.cleaner._cleaner)")
        # np.zeros maps zeroed pages: untouched slots cost no resident memory until the map reaches them
        self.table: np.ndarray | None = np.zeros(self.slots * BYTES_PER_ENTRY, np.uint8) if compiled else None
        self._entries: dict[bytes, int] = {}
        self._size = 0
        self._latest_offset = -1

    @property
    def allocated_bytes(self) -> int | None:
        """Bytes of the map's buffer (``slots * 24``); None on the pure-Python path (a dict's memory)."""
        return None if self.table is None else self.table.nbytes

    def desired_size(self, load_factor: float) -> int:
        """How many entries a pass puts in before it stops (Kafka's ``(int) (slots * dupBufferLoadFactor)``)."""
        return int(self.slots * load_factor)

    def put(self, key: bytes, offset: int) -> None:
        """Kafka's ``put``: refused once every slot is taken (a load factor above 1 lets a pass get there)."""
        if self._size >= self.slots:
            raise CleanerError(f"offset map is full ({self.slots} slots)")
        if self.table is not None:
            self._size = native.compiled.table_put(self.table, self._size, key, offset)
        else:
            self._entries[md5(key).digest()] = offset
            self._size = len(self._entries)
        self._latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset stored for ``key``, -1 when absent."""
        if self.table is not None:
            return native.compiled.table_get(self.table, self._size, key)
        return self._entries.get(md5(key).digest(), -1)

    def update_latest_offset(self, offset: int) -> None:
        self._latest_offset = offset

    def set_state(self, size: int, latest_offset: int) -> None:
        """After the compiled core filled ``table`` in bulk: its entry count and the last offset it recorded."""
        self._size = size
        self._latest_offset = latest_offset

    def clear(self) -> None:
        if self.table is not None and self._size:
            # fresh zero pages rather than writing zeros over the old ones: the same empty buffer, and a pass
            # that maps few keys does not keep the whole buffer resident
            self.table = np.zeros(self.table.nbytes, np.uint8)
        self._entries.clear()
        self._size = 0
        self._latest_offset = -1

    @property
    def size(self) -> int:
        return self._size

    @property
    def latest_offset(self) -> int:
        return self._latest_offset

    @property
    def utilization(self) -> float:
        return self._size / self.slots

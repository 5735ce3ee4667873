"""The cleaner's dedupe map: each key's MD5 -> the latest offset of that key in the dirty range.

Kafka's ``SkimpyOffsetMap`` stores (MD5, offset) entries of 24 bytes in a fixed buffer, so its capacity is
``memory // 24`` slots and the cleaner stops filling it at ``int(slots * load factor)`` entries: that capacity rule
decides where a partial pass ends, so it is reproduced exactly. Two keys are the same key when their MD5s are
equal, exactly as in Kafka (a probe sequence over the buffer finds an entry iff its hash matches); a dict keyed by
the digest gives the same answers without the buffer.
"""

from __future__ import annotations

from hashlib import md5

from kafkalog.errors import InvalidArgumentError

__all__ = ["BYTES_PER_ENTRY", "OffsetMap"]

#: an MD5 hash (16 bytes) and an offset (8 bytes)
BYTES_PER_ENTRY = 24


class OffsetMap:
    """Key hash -> offset with Kafka's slot count, size and latest-offset bookkeeping."""

    __slots__ = ("slots", "_entries", "_latest_offset")

    def __init__(self, memory: int) -> None:
        if memory < BYTES_PER_ENTRY:
            raise InvalidArgumentError(f"an offset map of {memory} bytes holds no entry of {BYTES_PER_ENTRY} bytes")
        self.slots = memory // BYTES_PER_ENTRY
        self._entries: dict[bytes, int] = {}
        self._latest_offset = -1

    def desired_size(self, load_factor: float) -> int:
        """How many entries a pass puts in before it stops (Kafka's ``(int) (slots * dupBufferLoadFactor)``)."""
        return int(self.slots * load_factor)

    def put(self, key: bytes, offset: int) -> None:
        digest = md5(key).digest()
        if digest not in self._entries and len(self._entries) >= self.slots:
            raise InvalidArgumentError(f"offset map is full ({self.slots} slots)")
        self._entries[digest] = offset
        self._latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset stored for ``key``, -1 when absent."""
        return self._entries.get(md5(key).digest(), -1)

    def update_latest_offset(self, offset: int) -> None:
        self._latest_offset = offset

    def clear(self) -> None:
        self._entries.clear()
        self._latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._entries)

    @property
    def latest_offset(self) -> int:
        return self._latest_offset

    @property
    def utilization(self) -> float:
        return len(self._entries) / self.slots

"""Producer-state ``.snapshot`` files (Kafka's ``ProducerStateManager.readSnapshot`` / ``writeSnapshot``).

Layout, big-endian: i16 version (1) · u32 CRC32C of every byte after the CRC field · i32 entry count · entries of
producerId i64, producerEpoch i16, lastSequence i32, lastOffset i64, offsetDelta i32, timestamp i64,
coordinatorEpoch i32, currentTxnFirstOffset i64 (-1: no open transaction). 10 header bytes + 46 per entry.

Entries are written in the order given. Kafka writes the iteration order of its ``HashMap<Long, ...>`` of
producers; :func:`java_hashmap_order` reproduces that order when the map's capacity is known (for a handful of
producers with nearby ids it is simply ascending producer id).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import crc32c

from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import CorruptSnapshotError, InvalidArgumentError
from kafkalog.io.file_access import read_file
from kafkalog.limits import NO_SEQUENCE

PRODUCER_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
HEADER_SIZE = _HEADER.size  # 10
ENTRY_SIZE = _ENTRY.size  # 46
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6  # the CRC covers everything from the entry count on
NO_OFFSET = -1

_RANGES = {
    "producer_id": 64,
    "producer_epoch": 16,
    "last_sequence": 32,
    "last_offset": 64,
    "offset_delta": 32,
    "timestamp": 64,
    "coordinator_epoch": 32,
    "current_txn_first_offset": 64,
}


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer as the snapshot stores it: its last batch (sequence, offset, offset delta, max timestamp),
    the epoch of the last coordinator that wrote a marker for it, and its open transaction (if any)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET

    def __post_init__(self) -> None:
        for name, bits in _RANGES.items():
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not -(1 << (bits - 1)) <= value < (1 << (bits - 1))
            ):
                raise InvalidArgumentError(f"{name} must be a {bits}-bit int, got {value!r}")

    @property
    def has_batch(self) -> bool:
        """Kafka keeps batch metadata only for a non-negative last offset (else the entry is epoch-only)."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch (Kafka: lastSeq - offsetDelta, as sequences wrap like offsets)."""
        return self.last_sequence - self.offset_delta if self.has_batch else NO_SEQUENCE

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta if self.has_batch else NO_OFFSET

    @property
    def txn_first_offset(self) -> int | None:
        """The open transaction's first offset; None when there is none (Kafka: any negative value)."""
        return self.current_txn_first_offset if self.current_txn_first_offset >= 0 else None


def parse_producer_snapshot(
    data: bytes | bytearray | memoryview, *, path: object = None
) -> list[ProducerSnapshotEntry]:
    """Decode snapshot bytes. CorruptSnapshotError on a short file, bad version, bad CRC, a count that does not
    match the size (checked before anything is allocated), or trailing bytes after the entries."""
    where = f"{path}: " if path is not None else ""
    buf = memoryview(data)
    if len(buf) < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"{where}snapshot failed schema validation: {len(buf)} bytes, header needs {HEADER_SIZE}"
        )
    version, stored_crc, count = _HEADER.unpack_from(buf, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{where}snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(buf[_ENTRIES_OFFSET:])
    if stored_crc != computed:
        raise CorruptSnapshotError(
            f"{where}snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}"
        )
    if count < 0:
        raise CorruptSnapshotError(f"{where}snapshot failed schema validation: negative entry count {count}")
    body = len(buf) - HEADER_SIZE
    if count > body // ENTRY_SIZE:
        raise CorruptSnapshotError(
            f"{where}snapshot failed schema validation: {count} entries need {count * ENTRY_SIZE} bytes, "
            f"only {body} present"
        )
    if body != count * ENTRY_SIZE:
        raise CorruptSnapshotError(
            f"{where}snapshot has {body - count * ENTRY_SIZE} unexpected bytes after its {count} entries"
        )
    return [ProducerSnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(buf[HEADER_SIZE:])]


def read_producer_snapshot(path: str | os.PathLike[str]) -> list[ProducerSnapshotEntry]:
    """Read a ``.snapshot`` file; OSError for I/O trouble, CorruptSnapshotError for bad content."""
    data = read_file(path)
    return parse_producer_snapshot(data, path=path)


def format_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The exact bytes Kafka writes for these entries in this order."""
    entries = list(entries)
    out = bytearray(HEADER_SIZE + ENTRY_SIZE * len(entries))
    _HEADER.pack_into(out, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(entries))
    pos = HEADER_SIZE
    for e in entries:
        _ENTRY.pack_into(
            out,
            pos,
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        pos += ENTRY_SIZE
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[_ENTRIES_OFFSET:]))
    return bytes(out)


def write_producer_snapshot(
    path: str | os.PathLike[str], entries: Iterable[ProducerSnapshotEntry], *, sync: bool = True
) -> None:
    """Write a snapshot atomically (Kafka writes in place; a rename never leaves a half-written snapshot)."""
    atomic_write(path, format_producer_snapshot(entries), sync=sync)


def java_long_hash(value: int) -> int:
    """``Long.hashCode``: the two 32-bit halves xor-ed (as an unsigned 32-bit value)."""
    v = value & 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & 0xFFFFFFFF


def java_hashmap_capacity(max_size: int) -> int:
    """Table size of a default ``HashMap`` that once held ``max_size`` entries (it doubles past 0.75 full)."""
    n = 16
    while max_size > n * 3 // 4:
        n <<= 1
    return n


def java_hashmap_order(
    entries: Iterable[ProducerSnapshotEntry], *, capacity: int | None = None
) -> list[ProducerSnapshotEntry]:
    """Entries in the iteration order of Kafka's ``HashMap<Long, ProducerStateEntry>``.

    ``entries`` in insertion order; ``capacity`` is the map's table size (a power of two; by default the one for
    the current count, which is right unless the map once held more producers: it never shrinks). Bins with
    eight or more colliding ids (treeified) are not modelled.
    """
    entries = list(entries)
    n = capacity or java_hashmap_capacity(len(entries))
    if n & (n - 1):
        raise InvalidArgumentError(f"capacity must be a power of two, got {n}")

    def bin_of(e: ProducerSnapshotEntry) -> int:
        h = java_long_hash(e.producer_id)
        return (h ^ (h >> 16)) & (n - 1)

    return sorted(entries, key=bin_of)

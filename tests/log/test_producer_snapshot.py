"""Producer-state .snapshot files: every golden snapshot vs its manifest, bad input, round trips."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptSnapshotError
from kafkalog.log.producer_snapshot import (
    ENTRY_SIZE,
    HEADER_SIZE,
    ProducerSnapshotEntry,
    format_producer_snapshot,
    java_hashmap_capacity,
    java_hashmap_order,
    parse_producer_snapshot,
    read_producer_snapshot,
    write_producer_snapshot,
)
from tests.checkpoint.test_checkpoint_offsets import partition_manifests
from tests.conftest import needs_golden


def _expected(entry: dict) -> ProducerSnapshotEntry:
    return ProducerSnapshotEntry(
        producer_id=entry["producerId"],
        producer_epoch=entry["producerEpoch"],
        last_sequence=entry["lastSeq"],
        last_offset=entry["lastDataOffset"],
        offset_delta=entry["lastOffsetDelta"],
        timestamp=entry["lastTimestamp"],
        coordinator_epoch=entry["coordinatorEpoch"],
        current_txn_first_offset=-1 if entry["currentTxnFirstOffset"] is None else entry["currentTxnFirstOffset"],
    )


@needs_golden
def test_every_golden_snapshot(tmp_path: Path) -> None:
    checked = corrupt = 0
    for manifest, pdir in partition_manifests():
        for snap in manifest["producerSnapshots"]:
            path = pdir / snap["file"]
            raw = path.read_bytes()
            assert len(raw) == snap["sizeBytes"]
            if "readError" in snap:
                # Kafka: "Snapshot is corrupt (CRC is no longer valid). Stored crc: X. Computed crc: Y"
                stored_computed = snap["readError"].split("Stored crc:")[1]
                with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid") as info:
                    read_producer_snapshot(path)
                assert stored_computed.strip() in str(info.value)
                corrupt += 1
                continue
            entries = read_producer_snapshot(path)
            assert entries == [_expected(e) for e in snap["entries"]], path
            for got, e in zip(entries, snap["entries"], strict=True):
                assert got.first_sequence == e["firstSeq"] and got.first_offset == e["firstDataOffset"]
                assert got.txn_first_offset == e["currentTxnFirstOffset"]
                assert [got.first_sequence, got.last_sequence, got.first_offset, got.last_offset] == [
                    e["batchMetadata"][0][k] for k in ("firstSeq", "lastSeq", "firstOffset", "lastOffset")
                ]
            assert format_producer_snapshot(entries) == raw, path
            # Kafka's HashMap order is what the file holds
            assert java_hashmap_order(entries) == entries
            write_producer_snapshot(tmp_path / "s.snapshot", entries)
            assert (tmp_path / "s.snapshot").read_bytes() == raw
            checked += 1
    assert checked == 225 and corrupt == 1


def _entry(pid: int = 1000, **kw: int) -> ProducerSnapshotEntry:
    base = dict(producer_epoch=0, last_sequence=4, last_offset=10, offset_delta=2, timestamp=1700000000000)
    base.update(kw)
    return ProducerSnapshotEntry(pid, **base)


def test_layout_and_empty_snapshot() -> None:
    empty = format_producer_snapshot([])
    assert len(empty) == HEADER_SIZE == 10 and empty[:2] == b"\x00\x01" and empty[6:] == b"\x00\x00\x00\x00"
    assert struct.unpack(">I", empty[2:6])[0] == crc32c.crc32c(empty[6:])
    assert parse_producer_snapshot(empty) == []
    one = format_producer_snapshot([_entry()])
    assert len(one) == HEADER_SIZE + ENTRY_SIZE == 56


def _recrc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    return bytes(data)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d[:5], "header needs 10"),
        (lambda d: b"", "header needs 10"),
        (lambda d: d[:-1], "CRC is no longer valid"),
        (lambda d: d + b"\x00", "CRC is no longer valid"),
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "CRC is no longer valid"),
        (lambda d: d[:2] + bytes([d[2] ^ 0x80]) + d[3:], "CRC is no longer valid"),
        (lambda d: b"\x00\x02" + d[2:], "unknown file version 2"),
        (lambda d: b"\x00\x00" + d[2:], "unknown file version 0"),
        (lambda d: _recrc(bytearray(d[:-1])), "only 91 present"),  # CRC fixed up: the size check still catches it
        (lambda d: _recrc(bytearray(d + b"\x00")), "unexpected bytes after"),
        (lambda d: _recrc(bytearray(d[:6] + b"\x7f\xff\xff\xff" + d[10:])), r"2147483647 entries need .* only 92"),
        (lambda d: _recrc(bytearray(d[:6] + b"\xff\xff\xff\xff" + d[10:])), "negative entry count"),
    ],
)
def test_bad_snapshots(mutate, match: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = format_producer_snapshot([_entry(1000), _entry(1001)])
    bad = mutate(good)
    with pytest.raises(CorruptSnapshotError, match=match):
        parse_producer_snapshot(bad)
    p = tmp_path / "00000000000000000005.snapshot"
    p.write_bytes(bad)
    with pytest.raises(CorruptSnapshotError, match=str(p).replace(".", r"\.")):
        read_producer_snapshot(p)


def test_huge_count_in_tiny_file_allocates_nothing() -> None:
    data = bytearray(b"\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff")
    with pytest.raises(CorruptSnapshotError, match="2147483647 entries"):
        parse_producer_snapshot(_recrc(data))


def test_missing_file_is_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_producer_snapshot(tmp_path / "nope.snapshot")


def test_entry_field_ranges() -> None:
    with pytest.raises(ValueError):
        _entry(producer_epoch=1 << 15)
    with pytest.raises(ValueError):
        _entry(2**63)
    with pytest.raises(ValueError):
        _entry(last_sequence=True)  # type: ignore[arg-type]
    e = _entry(last_offset=-1)
    assert not e.has_batch and e.first_sequence == -1 and e.first_offset == -1


def test_java_hashmap_order() -> None:
    # ids 1000 and 1016 share bin 8 of a 16-slot table: insertion order inside the bin, before 1001 (bin 9)
    entries = [_entry(1016), _entry(1001), _entry(1000)]
    assert [e.producer_id for e in java_hashmap_order(entries)] == [1016, 1000, 1001]
    assert [e.producer_id for e in java_hashmap_order(entries, capacity=32)] == [1000, 1001, 1016]
    assert java_hashmap_capacity(12) == 16 and java_hashmap_capacity(13) == 32
    # Long.hashCode(-1) is 0 (both halves xor-ed): -1 and 0 share bin 0 and keep insertion order
    assert [e.producer_id for e in java_hashmap_order([_entry(-1), _entry(0)])] == [-1, 0]
    assert [e.producer_id for e in java_hashmap_order([_entry(0), _entry(-1)])] == [0, -1]
    with pytest.raises(ValueError):
        java_hashmap_order(entries, capacity=24)


i = st.integers
entries_st = st.lists(
    st.builds(
        ProducerSnapshotEntry,
        i(-(2**63), 2**63 - 1),
        i(-(2**15), 2**15 - 1),
        i(-(2**31), 2**31 - 1),
        i(-(2**63), 2**63 - 1),
        i(-(2**31), 2**31 - 1),
        i(-(2**63), 2**63 - 1),
        i(-(2**31), 2**31 - 1),
        i(-(2**63), 2**63 - 1),
    ),
    max_size=30,
)


@given(entries_st)
def test_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    data = format_producer_snapshot(entries)
    assert len(data) == HEADER_SIZE + ENTRY_SIZE * len(entries)
    assert parse_producer_snapshot(data) == entries


@given(st.binary(max_size=200))
def test_garbage_never_crashes(data: bytes) -> None:
    try:
        parse_producer_snapshot(data)
    except CorruptSnapshotError:
        pass

"""Property tests: our writer and reader agree with each other and with kafka-python's independent codec."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkalog.errors import CorruptRecordError
from kafkalog.records import (
    CompressionType,
    EndTransactionMarker,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    build_legacy_batch,
    compress,
    decompress,
    read_batches,
    scan_batches,
)
from kafkalog.records.batch_patch import set_base_offset, set_max_timestamp, set_partition_leader_epoch
from kafkalog.records.control import ControlRecordType
from kafkalog.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=12), blobs), max_size=4)
timestamps = st.integers(min_value=0, max_value=(1 << 45))


@st.composite
def record_lists(draw, min_size=1, max_size=25):
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    base = draw(st.integers(min_value=0, max_value=(1 << 40)))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=3), min_size=n, max_size=n))
    out = []
    off = base
    for i in range(n):
        if i:
            off += gaps[i]
        out.append(Record(off, draw(timestamps), draw(blobs), draw(blobs), tuple(draw(headers))))
    return base, out


codecs = st.sampled_from(list(CompressionType))


@SETTINGS
@given(v=st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1), w=st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_roundtrip(v: int, w: int) -> None:
    enc = encode_varint(v)
    assert len(enc) <= 5 and decode_varint(enc + b"\xff", 0) == (v, len(enc))
    enc = encode_varlong(w)
    assert len(enc) <= 10 and decode_varlong(enc, 0) == (w, len(enc))


@SETTINGS
@given(data=record_lists(), codec=codecs, epoch=st.integers(-1, 1000), pid=st.integers(-1, 1 << 40),
       seq=st.integers(-1, (1 << 31) - 1), txn=st.booleans(), lat=st.booleans())
def test_own_roundtrip(data, codec, epoch, pid, seq, txn, lat) -> None:
    base, records = data
    ts_type = TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME
    raw = build_batch(records, base_offset=base, compression=codec, timestamp_type=ts_type, producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq, partition_leader_epoch=epoch, is_transactional=txn,
                      log_append_time=1_700_000_000_000 if lat else None)
    batches = list(read_batches(raw + raw))
    assert len(batches) == 2 and batches[1].position == len(raw)
    b = batches[0]
    assert b.is_valid() and b.compression is codec and b.timestamp_type is ts_type
    assert (b.base_offset, b.last_offset, b.record_count) == (base, records[-1].offset, len(records))
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (pid, epoch, seq, txn)
    assert b.max_timestamp == (1_700_000_000_000 if lat else max(r.timestamp for r in records))
    got = b.records(stored_timestamps=True)
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    if lat:
        assert {r.timestamp for r in b.records()} == {1_700_000_000_000}
    if seq >= 0:
        assert got[0].sequence == seq
    scan = scan_batches(raw)
    assert scan.all_crc_ok and scan.valid_bytes == len(raw)


@SETTINGS
@given(data=record_lists(max_size=15), codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
       txn=st.booleans())
def test_kafka_python_reads_ours(data, codec, txn) -> None:
    base, records = data
    raw = build_batch(records, base_offset=base, compression=codec, producer_id=7 if txn else -1,
                      producer_epoch=1 if txn else -1, base_sequence=0 if txn else -1, is_transactional=txn)
    mr = MemoryRecords(raw)
    kb = mr.next_batch()
    assert kb.validate_crc()
    assert kb.base_offset == base and kb.is_transactional == txn and kb.compression_type == int(codec)
    got = list(kb)
    assert [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]
    assert mr.next_batch() is None


@SETTINGS
@given(data=record_lists(max_size=15), codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
       txn=st.booleans())
def test_we_read_kafka_pythons(data, codec, txn) -> None:
    _, records = data
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=txn,
                                        producer_id=9 if txn else -1, producer_epoch=2 if txn else -1,
                                        base_sequence=5 if txn else -1, batch_size=1 << 30)
    # kafka-python numbers from 0 and rejects null header values, so adapt the generated records
    expected = []
    for i, r in enumerate(records):
        hdrs = [(k, v if v is not None else b"") for k, v in r.headers]
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=hdrs)
        expected.append((i, r.timestamp, r.key, r.value, tuple(hdrs)))
    raw = bytes(builder.build())
    b = RecordBatch(raw)
    assert b.is_valid()
    assert b.is_transactional == txn and b.record_count == len(records)
    got = b.records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == expected
    if txn:
        assert [r.sequence for r in got] == [5 + i for i in range(len(records))]
    # our rebuild of the same records is byte-identical when uncompressed (kafka-python writes epoch 0)
    if codec is CompressionType.NONE:
        ours = build_batch([Record(o, t, k, v, h) for o, t, k, v, h in expected], producer_id=b.producer_id,
                           producer_epoch=b.producer_epoch, base_sequence=b.base_sequence, is_transactional=txn,
                           partition_leader_epoch=0)
        assert ours == raw


@SETTINGS
@given(data=st.binary(max_size=200_000), codec=codecs)
def test_codec_roundtrip(data: bytes, codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, data)) == data


@SETTINGS
@given(data=record_lists(max_size=10), magic=st.sampled_from([0, 1]),
       codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]),
       lat=st.booleans())
def test_legacy_roundtrip(data, magic, codec, lat) -> None:
    base, records = data
    ts_type = TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME
    raw = build_legacy_batch(records, magic=magic, base_offset=base, compression=codec, timestamp_type=ts_type,
                             log_append_time=123)
    batches = list(read_batches(raw))
    assert all(isinstance(b, LegacyBatch) and b.is_valid() and b.magic == magic for b in batches)
    got = [r for b in batches for r in b.records()]
    if magic == 0:
        want_ts = [-1] * len(records)
    elif lat:
        want_ts = [123] * len(records)
    else:
        want_ts = [r.timestamp for r in records]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (r.offset, t, r.key, r.value) for r, t in zip(records, want_ts, strict=True)]
    assert batches[-1].last_offset == records[-1].offset and batches[0].base_offset == records[0].offset


def test_end_txn_marker_roundtrip() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 17)
    raw = build_end_txn_marker_batch(marker, offset=42, timestamp=5, producer_id=3, producer_epoch=1)
    b = RecordBatch(raw)
    assert b.is_control and b.is_transactional and b.control_marker() == marker
    assert RecordBatch(build_batch([(b"k", b"v")], timestamp=1)).control_marker() is None


def test_tuple_records_are_numbered_from_base_offset() -> None:
    raw = build_batch([(b"a", b"1"), (None, None, [("h", b"x")])], base_offset=10, timestamp=99)
    recs = RecordBatch(raw).records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] == [
        (10, 99, b"a", b"1", ()), (11, 99, None, None, (("h", b"x"),))]


def test_sequence_wraps_like_kafka() -> None:
    raw = build_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], base_sequence=(1 << 31) - 2, producer_id=1,
                      producer_epoch=0, timestamp=1)
    b = RecordBatch(raw)
    assert [r.sequence for r in b.records()] == [(1 << 31) - 2, (1 << 31) - 1, 0]
    assert b.last_sequence == 0


def test_legacy_crc_is_crc32() -> None:
    raw = build_legacy_batch([(b"k", b"v")], magic=1, timestamp=5)
    b = LegacyBatch(raw)
    assert b.crc == zlib.crc32(raw[16:])
    bad = bytearray(raw)
    bad[-1] ^= 1
    assert not LegacyBatch(bytes(bad)).is_valid()
    with pytest.raises(CorruptRecordError):
        LegacyBatch(bytes(bad)).ensure_valid()


def test_kafka_python_decodes_records_like_us_over_a_segment() -> None:
    raws = [build_batch([(b"k%d" % i, b"v" * i)], base_offset=i, timestamp=i) for i in range(50)]
    seg = b"".join(raws)
    mr = MemoryRecords(seg)
    theirs = []
    while (kb := mr.next_batch()) is not None:
        assert isinstance(kb, DefaultRecordBatch)
        theirs += [(r.offset, r.key, r.value) for r in kb]
    ours = [(r.offset, r.key, r.value) for b in read_batches(seg) for r in b.records()]
    assert ours == theirs and len(ours) == 50


def test_header_setters_match_a_batch_built_with_those_fields() -> None:
    """set_base_offset / set_partition_leader_epoch (outside the CRC) give the bytes build_batch writes for the
    same fields; set_max_timestamp (Kafka's setMaxTimestamp) changes the type bit and max timestamp and keeps the
    CRC valid."""
    recs = [Record(i, 1000 + i, b"k", b"v%d" % i) for i in range(3)]
    plain = bytearray(build_batch(recs, base_offset=0))
    set_base_offset(plain, 0, 42)
    set_partition_leader_epoch(plain, 0, 7)
    moved = [Record(42 + i, r.timestamp, r.key, r.value) for i, r in enumerate(recs)]
    assert bytes(plain) == build_batch(moved, base_offset=42, partition_leader_epoch=7)
    set_max_timestamp(plain, 0, len(plain), TimestampType.LOG_APPEND_TIME, 5555)
    batch = next(iter(read_batches(bytes(plain))))
    assert batch.is_valid() and (batch.base_offset, batch.partition_leader_epoch) == (42, 7)
    assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.LOG_APPEND_TIME, 5555)
    assert [r.timestamp for r in batch.records()] == [5555] * 3  # Kafka reads LogAppendTime records so
    before = bytes(plain)
    set_max_timestamp(plain, 0, len(plain), TimestampType.LOG_APPEND_TIME, 5555)  # already so: untouched
    assert bytes(plain) == before
    set_max_timestamp(plain, 0, len(plain), TimestampType.CREATE_TIME, 1002)
    assert bytes(plain) == build_batch(moved, base_offset=42, partition_leader_epoch=7)

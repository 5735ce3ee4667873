"""Bad bytes give typed errors or an invalid-bytes report: no crash, no hang, no allocation from a lying length."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, KafkaLogError, UnsupportedCompressionError, UnsupportedMagicError
from kafkalog.records import (
    CompressionType,
    LegacyBatch,
    RecordBatch,
    build_batch,
    build_legacy_batch,
    compress,
    decompress,
    read_batches,
    scan_batches,
)
from kafkalog.records.varint import decode_varint, decode_varlong
from kafkalog.verify import verify_log_file


def _batch(n: int = 3, base: int = 0, codec=CompressionType.NONE) -> bytes:
    return build_batch([(b"key%d" % i, b"value" * i) for i in range(n)], base_offset=base, compression=codec,
                       timestamp=1000)


def _segment() -> bytes:
    return _batch(3, 0) + _batch(2, 3) + _batch(4, 5)


def _read_all(data, **kw):
    reader = read_batches(data, **kw)
    return list(reader), reader


def test_clean_segment_reports_nothing_invalid() -> None:
    seg = _segment()
    batches, r = _read_all(seg)
    assert len(batches) == 3 and r.valid_bytes == len(seg) and r.invalid_bytes == 0 and r.error is None


@pytest.mark.parametrize("cut", [1, 5, 12, 16, 17, 30, 60, 61, 70])
def test_truncated_tail_is_reported(cut: int) -> None:
    seg = _segment()
    data = seg[:-cut]
    batches, r = _read_all(data)
    good = len(_batch(3, 0)) + len(_batch(2, 3))
    assert len(batches) == 2
    assert (r.valid_bytes, r.invalid_bytes) == (good, len(data) - good)
    assert isinstance(r.error, CorruptRecordError) and r.error.position == good
    s = scan_batches(data)
    assert (s.valid_bytes, s.invalid_bytes, len(s)) == (good, len(data) - good, 2)
    rep = verify_log_file(data)
    assert not rep.ok and rep.invalid_position == good and rep.invalid_bytes == len(data) - good


def test_flipped_byte_fails_crc() -> None:
    seg = bytearray(_segment())
    second = len(_batch(3, 0))
    seg[second + 70] ^= 0x5A
    batches, r = _read_all(bytes(seg))
    assert len(batches) == 3 and not batches[1].is_valid() and batches[0].is_valid() and batches[2].is_valid()
    with pytest.raises(CorruptRecordError):
        batches[1].ensure_valid()
    batches, r = _read_all(bytes(seg), validate=True)
    assert len(batches) == 1 and r.valid_bytes == second and r.invalid_bytes == len(seg) - second
    s = scan_batches(bytes(seg))
    assert s.crc_ok.tolist() == [True, False, True] and s.first_bad_crc == 1
    s = scan_batches(bytes(seg), stop_at_bad_crc=True)
    assert len(s) == 1 and s.valid_bytes == second
    rep = verify_log_file(bytes(seg))
    assert rep.bad_crc_count == 1 and rep.first_bad_crc_position == second and not rep.ok


def test_wrong_magic_stops_with_typed_error() -> None:
    seg = bytearray(_segment())
    second = len(_batch(3, 0))
    seg[second + 16] = 7
    batches, r = _read_all(bytes(seg))
    assert len(batches) == 1 and isinstance(r.error, UnsupportedMagicError) and r.valid_bytes == second
    assert isinstance(scan_batches(bytes(seg)).error, UnsupportedMagicError)


@pytest.mark.parametrize("length", [-1, -(1 << 31), 0, 10, 48, (1 << 31) - 1, 1 << 30])
def test_bad_length_fields(length: int) -> None:
    seg = bytearray(_segment())
    struct.pack_into(">i", seg, 8, length)
    tracemalloc.start()
    try:
        batches, r = _read_all(bytes(seg))
        s = scan_batches(bytes(seg))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batches == [] and r.valid_bytes == 0 and r.invalid_bytes == len(seg) and r.error is not None
    assert len(s) == 0 and s.invalid_bytes == len(seg)
    assert peak < 1 << 20


def test_two_gib_length_in_a_tiny_file(tmp_path) -> None:
    data = bytearray(100)
    struct.pack_into(">qi", data, 0, 0, 0x7FFFFFF0)
    data[16] = 2
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        batches, r = _read_all(path)
        rep = verify_log_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batches == [] and (r.valid_bytes, r.invalid_bytes) == (0, 100)
    assert rep.invalid_bytes == 100 and rep.batch_count == 0
    assert peak < 1 << 20


def test_empty_file(tmp_path) -> None:
    path = tmp_path / "empty.log"
    path.write_bytes(b"")
    batches, r = _read_all(path)
    assert batches == [] and r.valid_bytes == 0 and r.invalid_bytes == 0 and r.error is None
    assert verify_log_file(path).ok


def test_position_and_end_window() -> None:
    seg = _segment()
    first = len(_batch(3, 0))
    batches, r = _read_all(seg, position=first, end=first + len(_batch(2, 3)))
    assert [b.base_offset for b in batches] == [3] and r.valid_bytes == first + len(_batch(2, 3))


@pytest.mark.parametrize("data", [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\xff\xff", b"\x80", b""])
def test_malformed_varint(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(data, 0)


def test_malformed_varlong() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 11, 0)
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 4, 0)


def _resign(raw: bytearray) -> bytes:
    from crc32c import crc32c

    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_malformed_record_varint_inside_a_valid_crc() -> None:
    raw = bytearray(_batch(1))
    raw[61:66] = b"\xff\xff\xff\xff\xff"  # record length varint too long
    b = RecordBatch(_resign(raw))
    assert b.is_valid()
    with pytest.raises(CorruptRecordError):
        b.records()


@pytest.mark.parametrize("count", [-1, 0, 2, 1 << 30])
def test_record_count_mismatch(count: int) -> None:
    raw = bytearray(_batch(1))
    struct.pack_into(">i", raw, 57, count)
    b = RecordBatch(_resign(raw))
    with pytest.raises(CorruptRecordError):
        b.records()


def test_record_size_lies() -> None:
    raw = bytearray(_batch(1))
    raw[61] = 0x7E  # zig-zag 63: larger than the record
    with pytest.raises(CorruptRecordError):
        RecordBatch(_resign(raw)).records()


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_corrupt_compressed_payload(codec: CompressionType) -> None:
    raw = bytearray(_batch(20, codec=codec))
    for i in range(70, min(len(raw), 90)):
        raw[i] ^= 0xA5
    b = RecordBatch(_resign(raw))
    with pytest.raises(CorruptRecordError):
        b.records()


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_decompression_is_capped(codec: CompressionType) -> None:
    bomb = compress(codec, bytes(8 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            decompress(codec, bomb, max_size=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    assert len(decompress(codec, bomb, max_size=8 << 20)) == 8 << 20


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
@settings(max_examples=40, deadline=None)
@given(junk=st.binary(max_size=300))
def test_random_garbage_never_escapes(codec: CompressionType, junk: bytes) -> None:
    try:
        decompress(codec, junk, max_size=1 << 20)
    except CorruptRecordError:
        pass


@settings(max_examples=80, deadline=None)
@given(junk=st.binary(max_size=400), prefix=st.sampled_from([b"", _batch(2)]))
def test_random_garbage_after_good_batches(junk: bytes, prefix: bytes) -> None:
    data = prefix + junk
    r = read_batches(data)
    for b in r:
        try:
            b.records()
        except KafkaLogError:
            pass
    assert r.valid_bytes + r.invalid_bytes == len(data) and r.valid_bytes >= len(prefix)
    s = scan_batches(data)
    assert s.valid_bytes == r.valid_bytes
    verify_log_file(data)


def test_unknown_codec_id() -> None:
    raw = bytearray(_batch(1))
    struct.pack_into(">h", raw, 21, 6)
    b = RecordBatch(_resign(raw))
    with pytest.raises(UnsupportedCompressionError):
        b.records()


def test_lz4_bad_header_checksum_only_tolerated_for_magic0() -> None:
    frame = bytearray(compress(CompressionType.LZ4, b"hello world" * 50))
    frame[6] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, bytes(frame))
    assert decompress(CompressionType.LZ4, bytes(frame), ignore_lz4_header_checksum=True) == b"hello world" * 50


def test_legacy_bad_inner_set() -> None:
    raw = build_legacy_batch([(b"k", b"v"), (b"k2", b"v2")], magic=1, compression=CompressionType.GZIP, timestamp=1)
    # a wrapper whose value is not a valid gzip stream
    bad = bytearray(raw)
    bad[-5] ^= 0xFF
    b = LegacyBatch(bytes(bad))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError):
        b.records()


def test_legacy_size_below_minimum_stops_reader() -> None:
    raw = bytearray(build_legacy_batch([(b"k", b"v")], magic=1, timestamp=1))
    struct.pack_into(">i", raw, 8, 15)  # below magic 1's 22-byte minimum
    batches, r = _read_all(bytes(raw))
    assert batches == [] and r.invalid_bytes == len(raw)


def test_repr_of_a_batch_with_an_unknown_codec_does_not_raise():
    """repr is used by loggers and debuggers: it must describe a damaged batch, not raise."""
    from kafkalog.records import build_batch, read_batches

    raw = bytearray(build_batch([(b"k", b"v")]))
    raw[22] |= 0x07  # attributes low byte: codec id 7
    (batch,) = list(read_batches(bytes(raw)))
    assert "unknown(7)" in repr(batch)

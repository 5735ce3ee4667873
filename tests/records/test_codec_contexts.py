"""The codecs' fast paths: zstd decoded and encoded with a context reused per thread (``zstandard``), gzip written
as the JVM's GZIPOutputStream writes it. Each gives what the reference path gives (cramjam for zstd: the same
bytes, or the same error), never allocates past its room, and gzip batches come out as Kafka's bytes."""

from __future__ import annotations

import os
import struct
import tracemalloc

import cramjam
import pytest
import zstandard
from crc32c import crc32c

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, read_batches
from kafkalog.records.compression import (
    BLOCK_DECODERS,
    _zstd_bound,
    _zstd_fast,
    _zstd_into,
    compress,
    decompress,
    decompress_into,
)
from kafkalog.records.native import compiled
from tests.conftest import golden_segment_logs, needs_golden
from tests.records.test_decoder_reliability import batch_of
from tests.records.test_record_columns_codec import assert_same, with_body
from tests.threads import run_threads

ZSTD, GZIP = CompressionType.ZSTD, CompressionType.GZIP


def _golden_batches(codec: CompressionType):
    for log in golden_segment_logs():
        for b in read_batches(log.read_bytes()):
            if b.magic == 2 and b.compression is codec:
                yield b


def _cramjam_zstd(body: bytes, max_size: int) -> bytes | CorruptRecordError:
    """The reference: cramjam alone, into a buffer of the room decompress gives (its header bound, capped)."""
    try:
        room = min(_zstd_bound(memoryview(body)), max_size)
    except CorruptRecordError as exc:
        return exc
    out = bytearray(room)
    try:
        return bytes(out[: cramjam.zstd.decompress_into(body, out)])
    except Exception as exc:  # noqa: BLE001 -- any cramjam failure is a CorruptRecordError in decompress
        return CorruptRecordError(str(exc))


def _kafka_like_zstd(raw: bytes) -> bytes:
    """A frame as zstd-jni's ZstdOutputStream writes it for Kafka: no content size, a 2 MiB window, the data
    block not marked last, then an empty last block."""
    o = zstandard.ZstdCompressor(level=3).compressobj()
    return o.compress(raw) + o.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + o.flush()


@needs_golden
def test_zstd_golden_batches_decode_as_cramjam_does() -> None:
    n = 0
    for b in _golden_batches(ZSTD):
        body = bytes(b.raw[61:])
        assert _zstd_fast(body, 1 << 20) is not None  # Kafka's frames take the fast path
        want = _cramjam_zstd(body, 1 << 20)
        assert decompress(ZSTD, body) == want
        out = bytearray(1 << 20)
        assert out[: decompress_into(ZSTD, body, out)] == want
        n += 1
    assert n >= 30


def _our_zstd(raw: bytes) -> bytes:
    return compress(ZSTD, raw)


@pytest.mark.parametrize("make", [_our_zstd, _kafka_like_zstd], ids=["ours", "kafka_like"])
def test_zstd_same_bytes_or_error_as_cramjam(make) -> None:
    raw = os.urandom(3000) + b"kafka" * 40_000
    body = make(raw)
    assert decompress(ZSTD, body) == raw
    for max_size in (len(raw), len(raw) - 1, 1000):
        want = _cramjam_zstd(body, max_size)
        try:
            got = decompress(ZSTD, body, max_size=max_size)
        except CorruptRecordError as exc:
            assert isinstance(want, CorruptRecordError), (max_size, exc)
        else:
            assert got == want == raw
    # damage anywhere: the fast path declines and cramjam's answer stands (the same bytes or an error)
    for i in range(0, len(body), max(1, len(body) // 60)):
        bad = bytearray(body)
        bad[i] ^= 0x5A
        want = _cramjam_zstd(bytes(bad), 1 << 20)
        try:
            got = decompress(ZSTD, bytes(bad), max_size=1 << 20)
        except CorruptRecordError:
            assert isinstance(want, CorruptRecordError), i
        else:
            assert got == want, i


def test_zstd_shapes_the_fast_path_leaves_to_cramjam() -> None:
    raw = b"record " * 500
    one = compress(ZSTD, raw)
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    for body in (one + one, skippable + one, one + skippable):
        assert _zstd_fast(body, 1 << 20) is None
        assert decompress(ZSTD, body) == _cramjam_zstd(body, 1 << 20)
    assert decompress(ZSTD, one + one) == raw * 2
    # trailing garbage: both refuse it
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, one + b"\x00\x01")


def test_zstd_lying_content_size_allocates_nothing_large() -> None:
    """A header claiming 1 GiB of content (here patched into a real frame): the fast path must not allocate what
    the header claims; decompress refuses it as before."""
    raw = b"x" * 1000
    body = bytearray(compress(ZSTD, raw))
    fhd = body[4]
    assert fhd & 0x20 and (fhd >> 6) == 1  # single segment, 2-byte content size
    body[4] = (fhd & 0x3F) | 0x80  # 4-byte content size
    body[5:7] = b""
    body[5:5] = struct.pack("<I", 1 << 30)
    tracemalloc.start()
    try:
        assert _zstd_fast(bytes(body), 1 << 20) is None
        with pytest.raises(CorruptRecordError):
            decompress(ZSTD, bytes(body))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_zstd_bomb_is_capped_on_the_fast_path() -> None:
    for body in (compress(ZSTD, bytes(8 << 20)), _kafka_like_zstd(bytes(8 << 20))):
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRecordError, match="expands beyond"):
                decompress(ZSTD, body, max_size=64 * 1024)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20
        assert decompress(ZSTD, body, max_size=8 << 20) == bytes(8 << 20)


def test_zstd_into_keeps_cramjams_contract() -> None:
    """BLOCK_DECODERS' zstd call: bytes written, or cramjam's exception (whose message says "output full")."""
    assert BLOCK_DECODERS[1] is _zstd_into
    raw = b"abc" * 10_000
    for body in (compress(ZSTD, raw), _kafka_like_zstd(raw)):
        out = bytearray(len(raw))
        assert _zstd_into(body, memoryview(out)) == len(raw) and out == raw
        small = bytearray(len(raw) - 1)
        with pytest.raises(Exception) as fast_exc:  # noqa: PT011 -- cramjam's own error type
            _zstd_into(body, memoryview(small))
        with pytest.raises(Exception) as ref_exc:  # noqa: PT011
            cramjam.zstd.decompress_into(body, memoryview(bytearray(len(raw) - 1)))
        assert type(fast_exc.value) is type(ref_exc.value) and str(fast_exc.value) == str(ref_exc.value)


def test_zstd_contexts_are_per_thread() -> None:
    payloads = [os.urandom(200) + bytes([i]) * (1000 + 37 * i) for i in range(16)]
    bodies = [compress(ZSTD, p) for p in payloads]

    def work(k: int) -> None:
        for _ in range(300):
            for i in range(k % 4, len(bodies), 4):
                assert decompress(ZSTD, bodies[i]) == payloads[i]
                assert decompress(ZSTD, compress(ZSTD, payloads[i])) == payloads[i]

    assert not run_threads(work, 4)


@needs_golden
def test_gzip_batches_compress_to_kafkas_bytes() -> None:
    n = 0
    for b in _golden_batches(GZIP):
        assert compress(GZIP, b.records_payload()) == bytes(b.raw[61:])
        n += 1
    assert n >= 30


def test_gzip_members_and_trailing_bytes() -> None:
    a, b = b"first " * 100, b"second " * 100
    one, two = compress(GZIP, a), compress(GZIP, b)
    assert decompress(GZIP, one) == a
    assert decompress(GZIP, one + two) == a + b
    assert decompress(GZIP, one + b"junk") == a  # GZIPInputStream ignores bytes that are not another member
    assert decompress(GZIP, one + two + b"\x00") == a + b
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(GZIP, one + two[:-3])
    with pytest.raises(CorruptRecordError, match="expands beyond"):
        decompress(GZIP, one + two, max_size=len(a) + 10)
    with pytest.raises(CorruptRecordError, match="expands beyond"):
        decompress(GZIP, one, max_size=len(a) - 1)
    assert decompress(GZIP, one, max_size=len(a)) == a
    with pytest.raises(CorruptRecordError, match="corrupt gzip"):
        decompress(GZIP, one[:10] + bytes(20) + one[30:])


# --- the compiled walker: gzip inflated in C, zstd's fast path called from C ------------------------------------


def _gzip_shapes() -> dict[str, bytes]:
    """Records sections of a gzip batch as kafkalog's decoder meets them: Kafka's one member, several members,
    trailing bytes, damage of each kind."""

    good = batch_of(GZIP)
    section = decompress(GZIP, good[61:])
    one = compress(GZIP, section)
    half = len(section) // 2
    two = compress(GZIP, section[:half]) + compress(GZIP, section[half:])
    return {
        "one_member": one,
        "two_members": two,
        "trailing_junk": one + b"junk",
        "trailing_magic_byte": one + b"\x1f",
        "truncated": one[:-5],
        "second_member_truncated": two[:-3],
        "corrupt_deflate": one[:12] + bytes(b ^ 0x55 for b in one[12:30]) + one[30:],
        "bad_crc": one[:-8] + b"\0\0\0\0" + one[-4:],
        "not_gzip": b"\x00" * 40,
        "records_do_not_decode": compress(GZIP, section[:-3] + b"\xff\xff\xff"),
        "beyond_the_scratch": compress(GZIP, section + bytes(3 << 20)),
    }


@pytest.mark.parametrize("name", sorted(_gzip_shapes()))
def test_gzip_in_c_equals_python(name: str) -> None:
    data = batch_of(CompressionType.NONE) + with_body(batch_of(GZIP, base_offset=20), _gzip_shapes()[name])
    assert_same(data)


def test_gzip_is_inflated_in_c() -> None:
    """The walker takes gzip batches without the decompress callback (when built with zlib's headers)."""


    if compiled is None or not compiled.gzip_in_c:
        pytest.skip("the record decoder was built without zlib's headers")
    shapes = _gzip_shapes()
    for name in ("one_member", "two_members", "trailing_junk"):
        data = with_body(batch_of(GZIP), shapes[name])
        b = compiled.ColumnBuilder()
        assert b.run(data, 0, len(data), True, crc32c, 1 << 40, 1 << 40, None, BLOCK_DECODERS) == len(data), name
    for name in ("truncated", "corrupt_deflate", "records_do_not_decode"):
        data = with_body(batch_of(GZIP), shapes[name])
        assert compiled.ColumnBuilder().run(data, 0, len(data), True, crc32c, 1 << 40, 1 << 40, None,
                                            BLOCK_DECODERS) == 0, name


def test_zstd_fast_path_from_c_equals_python() -> None:
    """Payloads the C walker hands to this thread's zstd decoder itself, and those it leaves to ``_zstd_into``."""
    good = batch_of(ZSTD)
    section = decompress(ZSTD, good[61:])
    one = compress(ZSTD, section)
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    bodies = [one, _kafka_like_zstd(section), one + one, skippable + one, one + b"\0\0", one[:-4],
              compress(ZSTD, section[:-3] + b"\xff\xff\xff")]
    for body in bodies:
        assert_same(batch_of(CompressionType.NONE) + with_body(batch_of(ZSTD, base_offset=20), body))

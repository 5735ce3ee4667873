"""The compiled walker's own lz4 frame walk and zstd bound (``_columns_codec.h``): every frame shape Kafka's
readers accept is decoded in C with the columns of the pure path, anything ``decompress`` rejects (malformed
frames, fuzzed bytes, payloads past the size limit) is declined so the Python path raises its own error, and
the C zstd bound is ``_zstd_bound``'s."""

from __future__ import annotations

import os
import struct

import cramjam
import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, KafkaLogError
from kafkalog.records import CompressionType, build_batch, read_batches, read_record_columns
from kafkalog.records.compression import BLOCK_DECODERS, _zstd_bound, compress, decompress, xxh32
from kafkalog.records.native import compiled
from tests.conftest import GOLDEN, golden_segment_logs

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")

EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))
LZ4, ZSTD = CompressionType.LZ4, CompressionType.ZSTD
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None)  # fmt: skip


def lz4_frame(raw: bytes, *, bsize: int = 4, block_checksum: bool = False, content_checksum: bool = False,
              content_size: bool = False, dict_id: bool = False, stored: bool = False, hc: int | None = None,
              end_mark: bool = True) -> bytes:  # fmt: skip
    """An lz4 frame of ``raw`` with the given descriptor flags (checksum fields zero: kafkalog does not check them)."""
    flg = 0x60 | 0x10 * block_checksum | 0x08 * content_size | 0x04 * content_checksum | 0x01 * dict_id
    desc = bytes((flg, bsize << 4)) + (struct.pack("<Q", len(raw)) if content_size else b"") + b"\0" * 4 * dict_id
    out = [struct.pack("<I", 0x184D2204), desc, bytes([(xxh32(desc) >> 8) & 0xFF if hc is None else hc])]
    size = {4: 64, 5: 256, 6: 1024, 7: 4096}[bsize] << 10
    for i in range(0, len(raw), size):
        chunk = raw[i : i + size]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if stored or len(block) >= len(chunk):
            out += [struct.pack("<I", len(chunk) | 0x80000000), chunk]
        else:
            out += [struct.pack("<I", len(block)), block]
        out.append(b"\0" * 4 * block_checksum)
    if end_mark:
        out.append(b"\0" * 4 + b"\0" * 4 * content_checksum)
    return b"".join(out)


def with_body(batch: bytes, body: bytes) -> bytes:
    """``batch`` with its records section replaced by ``body``, length and CRC fixed (so the codec path runs)."""
    out = bytearray(batch[:61] + body)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _records(n: int, seed: int = 0) -> list:
    return [(b"k%d" % i if i % 5 else None, (b"value-%d-" % (i + seed)) * (i % 13) if i % 7 else None,
             [("h", b"x")] if i % 4 == 0 else []) for i in range(n)]  # fmt: skip


def _section(codec: CompressionType, recs: list) -> tuple[bytes, bytes]:
    """(a batch of ``recs`` compressed with ``codec``, its decompressed records section)."""
    batch = build_batch(recs, base_offset=0, timestamp=1_700_000_000_000, compression=codec)
    return batch, decompress(codec, batch[61:])


def outcome(data: bytes, impl: str):
    try:
        cols = read_record_columns(data, implementation=impl)
    except KafkaLogError as exc:
        return exc
    return cols


def assert_same(data: bytes) -> None:
    """Compiled and pure paths give identical arrays, positions and errors."""
    a, b = outcome(data, "compiled"), outcome(data, "python")
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert (a.valid_bytes, a.invalid_bytes, str(a.error)) == (b.valid_bytes, b.invalid_bytes, str(b.error))
    assert a.arrays.keys() == b.arrays.keys()
    for name in a.arrays:
        assert a.arrays[name].dtype == b.arrays[name].dtype and np.array_equal(a.arrays[name], b.arrays[name]), name


def c_takes(data: bytes, max_size: int = BLOCK_DECODERS[2]) -> int:
    """Where the C walker alone (no Python decompress to fall back on) stops in ``data``."""
    codecs = (BLOCK_DECODERS[0], BLOCK_DECODERS[1], max_size)
    return compiled.ColumnBuilder().run(data, 0, len(data), True, crc32c, 1 << 62, 1 << 62, None, codecs)


_FRAMES = {
    "kafka": {},
    "block_checksum": {"block_checksum": True},
    "content_checksum": {"content_checksum": True},
    "content_size_and_dict_id": {"content_size": True, "dict_id": True},
    "all_flags": {"block_checksum": True, "content_checksum": True, "content_size": True, "dict_id": True},
    "stored_blocks": {"stored": True},
    "256k_blocks": {"bsize": 5},
    "1m_blocks": {"bsize": 6},
}


@pytest.mark.parametrize("name", sorted(_FRAMES))
def test_lz4_frame_shapes_decode_in_c_like_python(name: str) -> None:
    batch, section = _section(LZ4, _records(3000))
    assert len(section) > 64 << 10  # several 64 KiB blocks
    data = with_body(batch, lz4_frame(section, **_FRAMES[name]))
    assert c_takes(data) == len(data)
    assert_same(data)
    assert len(read_record_columns(data, implementation="compiled")) == 3000


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_empty_and_tiny_sections_in_c(codec: CompressionType) -> None:
    for n in (1, 2, 5):
        batch, _ = _section(codec, _records(n))
        assert c_takes(batch) == len(batch)
        assert_same(batch)


_BAD_LZ4 = {
    "bad_magic": lambda s: b"\x05" + lz4_frame(s)[1:],
    "version_0": lambda s: lz4_frame(s)[:4] + bytes([0x20]) + lz4_frame(s)[5:],
    "bad_block_size_id": lambda s: lz4_frame(s)[:5] + b"\x30" + lz4_frame(s)[6:],
    "wrong_header_checksum": lambda s: lz4_frame(s, hc=(((xxh32(bytes((0x60, 0x40))) >> 8) + 1) & 0xFF)),
    "no_end_mark": lambda s: lz4_frame(s, end_mark=False),
    "content_checksum_cut": lambda s: lz4_frame(s, content_checksum=True)[:-2],
    "block_checksum_cut": lambda s: lz4_frame(s, block_checksum=True)[:-7],
    "header_cut": lambda s: lz4_frame(s)[:6],
    "stored_block_over_max": lambda s: lz4_frame(b"", end_mark=False) + struct.pack("<I", 0x80010001) + s * 2,
    "corrupt_block": lambda s: lz4_frame(s)[:11] + b"\xff" * 40 + lz4_frame(s)[51:],
}


@pytest.mark.parametrize("name", sorted(_BAD_LZ4))
def test_malformed_lz4_frames_declined_and_raise_like_python(name: str) -> None:
    good, section = _section(LZ4, _records(400))
    data = good + with_body(good, _BAD_LZ4[name](section))
    assert c_takes(data) == len(good)  # the first batch decoded, the bad one left to Python
    got = outcome(data, "compiled")
    assert isinstance(got, CorruptRecordError)
    assert_same(data)


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_size_limit_holds_in_c(codec: CompressionType) -> None:
    batch, section = _section(codec, _records(2000))
    n = len(section)
    assert c_takes(batch, max_size=n) == len(batch)
    assert c_takes(batch, max_size=n - 1) == 0
    assert c_takes(batch, max_size=n // 3) == 0
    with pytest.raises(CorruptRecordError):
        decompress(codec, batch[61:], max_size=n - 1)


@pytest.mark.parametrize("codec", [LZ4, ZSTD])
def test_decompression_bomb_raises_on_both_paths(codec: CompressionType) -> None:
    """A batch whose section expands past the 256 MiB limit: the same error, and no column is made of it."""
    limit = BLOCK_DECODERS[2]
    ok, _ = _section(codec, _records(10))
    bomb = with_body(ok, compress(codec, bytes(limit + 1)))
    data = ok + bomb
    assert c_takes(data) == len(ok)
    got = outcome(data, "compiled")
    assert isinstance(got, CorruptRecordError) and "expands beyond" in str(got), got
    assert_same(data)


_BASES = [
    with_body(_section(LZ4, _records(120, 1))[0], lz4_frame(_section(LZ4, _records(120, 1))[1], **kw))
    for kw in ({}, {"block_checksum": True, "content_checksum": True, "content_size": True}, {"stored": True})
] + [_section(ZSTD, _records(120, 2))[0], _section(ZSTD, _records(3, 3))[0], _section(LZ4, _records(3, 4))[0]]


@FUZZ
@given(which=st.integers(0, len(_BASES) - 1), cut=st.integers(0, 1 << 16),
       edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4),
       head=st.booleans())  # fmt: skip
def test_fuzzed_compressed_sections_same_on_both_paths(which, cut, edits, head) -> None:
    """Edited or truncated lz4/zstd sections, CRC fixed so they reach the codecs (edits land in the first 40
    bytes, the frame and block headers, when ``head``)."""
    base = _BASES[which]
    body = bytearray(base[61:])
    for pos, val in edits:
        body[(pos % 40 if head else pos) % len(body)] = val
    data = with_body(base, bytes(body[: max(1, cut % (len(body) + 1))]))
    assert_same(data)


def _zstd_headers() -> st.SearchStrategy[bytes]:
    """zstd-like payloads: magic (or a skippable magic), random header and block-header bytes."""
    magic = st.sampled_from([struct.pack("<I", 0xFD2FB528), struct.pack("<I", 0x184D2A53), b"\x28\xb5"])
    return st.builds(lambda m, rest: m + rest, magic, st.binary(max_size=40))


@FUZZ
@given(payload=_zstd_headers() | st.binary(max_size=30),
       real=st.sampled_from([compress(ZSTD, b""), compress(ZSTD, b"abc" * 50_000), compress(ZSTD, b"abc" * 1000),
                             compress(ZSTD, os.urandom(300))]),
       cut=st.integers(0, 200))  # fmt: skip
def test_zstd_bound_in_c_is_pythons(payload: bytes, real: bytes, cut: int) -> None:
    for p in (payload, real, real[:cut], real + payload):
        try:
            want = _zstd_bound(memoryview(p))
        except CorruptRecordError:
            want = -1
        assert compiled.zstd_bound(p) == want, p


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
def test_golden_compressed_batches_taken_in_c() -> None:
    seen = 0
    for path in golden_segment_logs():
        for batch in read_batches(path.read_bytes(), validate=False):
            if batch.magic == 2 and batch.compression in (LZ4, ZSTD):
                assert c_takes(batch.raw) == len(batch.raw), path
                assert_same(batch.raw)
                seen += 1
    assert seen > 0

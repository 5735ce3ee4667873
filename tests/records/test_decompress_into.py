"""``decompress_into`` (the columnar decoder's reused-buffer path for lz4 and zstd) writes exactly what
``decompress`` returns, declines (None) rather than differ, and the compiled decoder gives the same columns
whether a batch took that path or the ``decompress`` fallback."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, build_batch, read_batches, read_record_columns
from kafkalog.records.columns import _decompress_payload
from kafkalog.records.compression import compress, decompress, decompress_into, xxh32
from kafkalog.records.native import compiled
from tests.conftest import GOLDEN, golden_segment_logs

EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))
INTO = (CompressionType.LZ4, CompressionType.ZSTD)


def _outcome_into(codec, body, room: int = 4 << 20, max_size: int = 256 << 20):
    out = bytearray(room)
    try:
        n = decompress_into(codec, body, out, max_size=max_size)
    except CorruptRecordError as exc:
        return exc
    return None if n is None else bytes(out[:n])


def _outcome(codec, body, max_size: int = 256 << 20):
    try:
        return decompress(codec, body, max_size=max_size)
    except CorruptRecordError as exc:
        return exc


def _agree(codec, body, **kw) -> bool:
    """into == decompress (bytes, or the same error); False when into declined."""
    got, want = _outcome_into(codec, body, **kw), _outcome(codec, body, max_size=kw.get("max_size", 256 << 20))
    if got is None:
        return False
    if isinstance(got, Exception) or isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want)
    else:
        assert got == want
    return True


@pytest.mark.parametrize("codec", INTO)
def test_into_equals_decompress_on_built_payloads(codec) -> None:
    for size in (0, 1, 100, 65_535, 65_536, 200_001):
        raw = os.urandom(size // 2) + b"kafka" * (size // 10)
        body = compress(codec, raw)
        assert _agree(codec, body)
        assert _outcome_into(codec, body) == raw
        if raw:  # too little room: declined, never a partial answer
            assert _outcome_into(codec, body, room=len(raw) // 2) is None


def test_other_codecs_have_no_into_path() -> None:
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY):
        assert decompress_into(codec, compress(codec, b"abc"), bytearray(100)) is None


@pytest.mark.parametrize("codec", INTO)
def test_into_honours_max_size_like_decompress(codec) -> None:
    body = compress(codec, b"x" * 100_000)
    for max_size in (99_999, 100_000, 5_000):
        got = _outcome_into(codec, body, max_size=max_size)
        want = _outcome(codec, body, max_size=max_size)
        if got is not None:  # zstd declines what it cannot decode in the room; decompress then raises
            assert type(got) is type(want) and str(got) == str(want)
        else:
            assert codec is CompressionType.ZSTD and isinstance(want, CorruptRecordError)


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
def test_into_equals_decompress_on_golden_batches() -> None:
    seen = 0
    for path in golden_segment_logs():
        for batch in read_batches(path.read_bytes(), validate=False):
            if batch.magic == 2 and batch.compression in INTO:
                assert _agree(batch.compression, batch.raw[61:])
                seen += 1
    assert seen > 0


_BODIES = [compress(c, b"value-%d " % i * 40) for c in INTO for i in range(3)]


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None)  # fmt: skip
@given(which=st.integers(0, len(_BODIES) - 1), edits=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)),
       max_size=3), cut=st.integers(0, 400))  # fmt: skip
def test_fuzzed_payloads_into_equals_decompress(which, edits, cut) -> None:
    body = bytearray(_BODIES[which])
    for pos, val in edits:
        if pos < len(body):
            body[pos] = val
    codec = INTO[which // 3]
    agreed = _agree(codec, bytes(body[: max(cut, 8)]))
    assert agreed or codec is CompressionType.ZSTD  # lz4 never declines with room to spare


def _lz4_big_blocks(raw: bytes) -> bytes:
    """An lz4 frame with 4 MiB blocks declared (block size index 7): more room than the decoder's scratch."""
    frame = bytearray(compress(CompressionType.LZ4, raw))
    frame[5] = 0x70
    frame[6] = (xxh32(bytes(frame[4:6])) >> 8) & 0xFF
    return bytes(frame)


@pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")
def test_compiled_columns_same_through_scratch_and_fallback() -> None:
    recs = [(b"k%d" % i, os.urandom(i % 90), []) for i in range(300)]
    parts = [build_batch(recs, base_offset=300 * i, compression=INTO[i % 2]) for i in range(4)]
    big = bytearray(build_batch(recs, base_offset=1200, compression=CompressionType.LZ4))
    body = _lz4_big_blocks(decompress(CompressionType.LZ4, bytes(big[61:])))
    struct.pack_into(">i", big, 8, 61 - 12 + len(body))
    big = big[:61] + body
    struct.pack_into(">I", big, 17, crc32c(bytes(big[21:])))
    data = b"".join(parts) + bytes(big)
    assert _outcome_into(CompressionType.LZ4, body, room=1 << 20) is None  # this batch takes the fallback
    builder = compiled.ColumnBuilder()  # and the compiled walker takes every batch, none left to Python
    assert builder.run(data, 0, len(data), True, crc32c, 1 << 62, 1 << 62, _decompress_payload) == len(data)
    a = read_record_columns(data, implementation="compiled")
    b = read_record_columns(data, implementation="python")
    assert len(a) == 1500 and a.error is None and a.valid_bytes == len(data)
    for name in a.arrays:
        assert a.arrays[name].dtype == b.arrays[name].dtype and np.array_equal(a.arrays[name], b.arrays[name]), name

"""snappy in the compiled walker: xerial blocks walked in C (``_columns_snappy.h``) and cramjam's
``decompress_raw_into`` called per block. It takes Kafka's batches, declines every damaged or oversized payload
(the pure path then raises its ``CorruptRecordError``), gives what the pure path gives, and the cleaner's snappy
framing writes the bytes it always wrote."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, read_batches
from kafkalog.records.compression import (
    BLOCK_DECODERS,
    SNAPPY_BLOCK_INTO,
    _snappy_compress,
    compress,
    decompress,
)
from kafkalog.records.native import compiled
from tests.conftest import golden_segment_logs, needs_golden
from tests.records.test_decoder_reliability import batch_of
from tests.records.test_record_columns_codec import FUZZ, assert_same, with_body

SNAPPY, NONE = CompressionType.SNAPPY, CompressionType.NONE
MAGIC = b"\x82SNAPPY\x00"
HEADER = MAGIC + struct.pack(">ii", 1, 1)
needs_c = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")


def c_alone(data: bytes, max_size: int = BLOCK_DECODERS[2]) -> int:
    """Where the C walker stops in ``data`` with no Python decompress to fall back on."""
    codecs = (BLOCK_DECODERS[0], BLOCK_DECODERS[1], max_size, None, SNAPPY_BLOCK_INTO)
    return compiled.ColumnBuilder().run(data, 0, len(data), True, crc32c, 1 << 62, 1 << 62, None, codecs)


def _golden_snappy() -> list[bytes]:
    return [bytes(b.raw) for log in golden_segment_logs() for b in read_batches(log.read_bytes())
            if b.magic == 2 and b.compression is SNAPPY]  # fmt: skip


def _xerial(*blocks: bytes) -> bytes:
    return HEADER + b"".join(struct.pack(">i", len(b)) + b for b in blocks)


def _raw(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


@needs_golden
@needs_c
def test_golden_snappy_batches_taken_in_c() -> None:
    """Kafka's snappy batches (snappy-java's xerial framing) decode in C alone, as the pure path decodes them."""
    batches = _golden_snappy()
    assert batches
    for raw in batches:
        assert c_alone(raw) == len(raw)
        assert_same(raw)


def _section() -> bytes:
    return decompress(SNAPPY, batch_of(SNAPPY)[61:])


def _damaged() -> dict[str, bytes]:
    section = _section()
    block = _raw(section)
    return {
        "header_only_truncated": MAGIC + b"\x00\x00",
        "block_length_truncated": HEADER + b"\x00\x00",
        "negative_length": HEADER + struct.pack(">i", -1) + block,
        "length_beyond_payload": HEADER + struct.pack(">i", len(block) + 1) + block,
        "block_truncated": _xerial(block)[:-3],
        "corrupt_block": _xerial(block[:1] + b"\xff" * (len(block) - 1)),
        "empty_block": _xerial(b""),
        "varint_too_long": _xerial(b"\xff\xff\xff\xff\xff\xff" + block),
        "declares_more_than_it_holds": _xerial(b"\x80\x80\x80\x80\x0f" + block[1:]),
        "raw_corrupt": b"\x05" + b"\xff" * 12,
        "raw_declares_4gib": b"\xff\xff\xff\xff\x0f\x00",
        "second_block_corrupt": _xerial(block, b"\x10\xff\xff"),
    }


@needs_c
def test_damaged_snappy_declined_in_c_and_raise_on_both_paths() -> None:
    """Each damaged payload: C alone declines it, both paths raise the same CorruptRecordError."""
    for name, body in _damaged().items():
        try:
            decompress(SNAPPY, body)
        except CorruptRecordError:
            pass
        else:
            raise AssertionError(f"{name}: decompress accepted it")
        data = with_body(batch_of(SNAPPY), body)
        assert c_alone(data) == 0, name
        assert_same(batch_of(NONE) + with_body(batch_of(SNAPPY, base_offset=20), body))


@needs_c
def test_snappy_shapes_taken_in_c_like_python() -> None:
    """Several blocks, a bare raw payload, no block at all: C takes what decompress takes, with the same result."""
    section = _section()
    half = len(section) // 2
    bodies = {
        "two_blocks": _xerial(_raw(section[:half]), _raw(section[half:])),
        "raw": _raw(section),
        "no_block": HEADER,
    }
    for name, body in bodies.items():
        assert decompress(SNAPPY, body) == (b"" if name == "no_block" else section), name
        data = with_body(batch_of(SNAPPY), body)
        if name != "no_block":  # an empty section holds none of the batch's records: declined by the record walk
            assert c_alone(data) == len(data), name
        assert_same(data)
    big = batch_of(SNAPPY, n=4000)  # a section of several 32 KiB blocks, as the writer frames it
    assert struct.unpack_from(">i", big, 61 + 16)[0] < len(big) - 61 - 20
    assert c_alone(big) == len(big)
    assert_same(big)


@needs_c
def test_snappy_size_limit_holds_in_c() -> None:
    """A section one byte over max_size is declined in C before decoding, and decompress raises for it."""
    section = _section()
    for body in (_xerial(_raw(section)), _raw(section), _xerial(_raw(section[:10]), _raw(section[10:]))):
        data = with_body(batch_of(SNAPPY), body)
        assert c_alone(data, max_size=len(section)) == len(data)
        assert c_alone(data, max_size=len(section) - 1) == 0
        try:
            decompress(SNAPPY, body, max_size=len(section) - 1)
        except CorruptRecordError as exc:
            assert "expands beyond" in str(exc)
        else:
            raise AssertionError("decompress went past max_size")


@needs_c
@FUZZ
@given(cut=st.integers(0, 200), edits=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 255)), max_size=4),
       raw=st.booleans())
def test_fuzzed_snappy_same_on_both_paths(cut: int, edits: list, raw: bool) -> None:
    """Edited or truncated snappy payloads (xerial or raw), CRC fixed: both paths give the same columns or error."""
    section = _section()
    body = bytearray(_raw(section) if raw else _xerial(_raw(section[:40]), _raw(section[40:])))
    for at, value in edits:
        if at < len(body):
            body[at] = value
    body = body[: max(0, len(body) - cut)] if cut < 100 else body
    assert_same(batch_of(NONE) + with_body(batch_of(SNAPPY, base_offset=20), bytes(body)))


def _reference_xerial(data: bytes) -> bytes:
    """The xerial writer as a plain loop over 32 KiB blocks: the bytes the cleaner's snappy rebuilds are held to."""
    parts = [HEADER]
    for i in range(0, len(data), 32 * 1024):
        block = _raw(data[i : i + 32 * 1024])
        parts += [struct.pack(">i", len(block)), block]
    return b"".join(parts)


def test_snappy_writer_bytes_unchanged() -> None:
    """One-block and many-block sections (at and around the 32 KiB block size) frame as the block loop does."""
    for n in (0, 1, 1000, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 100_000):
        data = bytes((i * 7 + i // 300) & 0xFF for i in range(n))
        assert compress(SNAPPY, data) == _reference_xerial(data), n
        assert _snappy_compress(memoryview(data)) == _reference_xerial(data), n
        assert decompress(SNAPPY, compress(SNAPPY, data)) == data


@needs_golden
def test_golden_snappy_sections_rewritten_as_before() -> None:
    """Kafka's snappy sections, decoded and written again, come out as the block loop writes them."""
    for raw in _golden_snappy():
        section = decompress(SNAPPY, raw[61:])
        assert compress(SNAPPY, section) == _reference_xerial(section)

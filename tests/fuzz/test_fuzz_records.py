"""Fuzzing the record parsers (magic 2 batches, legacy magic 0/1 messages, codecs, varints, ``read_batches``).

Bounded for CI (``KAFKALOG_FUZZ_EXAMPLES`` scales every test, default 200 examples each). Invariants, checked by
``tests/reliability/targets.py``: only ``kafkalog.errors`` types escape, the reader's positions add up, no hang
(a watchdog aborts an input that runs for ``KAFKALOG_FUZZ_HANG_S`` seconds, a hang detector rather than a speed
limit) and memory stays bounded whatever the length fields claim (tracemalloc peak for lying-length inputs).
"""

from __future__ import annotations

import os
import signal
import struct
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.records import CompressionType, Record, TimestampType, build_batch, read_batches
from kafkalog.records.compression import compress
from tests.reliability.targets import (
    target_decompress,
    target_legacy_batch,
    target_read_batches,
    target_record_batch,
    target_varint,
)

EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))
HANG_S = float(os.environ.get("KAFKALOG_FUZZ_HANG_S", "20"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None,
    database=None,
)


class Hang(AssertionError):
    """An input kept a parser busy for longer than the hang watchdog allows."""


@contextmanager
def watchdog(seconds: float = HANG_S) -> Iterator[None]:
    """Raise ``Hang`` in the main thread when the body runs longer than ``seconds`` (SIGALRM)."""

    def _fire(signum, frame):  # noqa: ANN001
        raise Hang(f"parser still busy after {seconds} s: hang")

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- strategies --------------------------------------------------------------------------------------------------

small_bytes = st.binary(max_size=40)
header_value = st.one_of(st.none(), small_bytes)
headers = st.lists(st.tuples(st.text(max_size=8), header_value), max_size=3)
record_tuple = st.tuples(st.one_of(st.none(), small_bytes), st.one_of(st.none(), st.binary(max_size=200)), headers)
codecs = st.sampled_from(list(CompressionType))


@st.composite
def valid_batches(draw) -> bytes:
    """A valid magic 2 batch as ``build_batch`` writes it, with random header fields and codec."""
    recs = draw(st.lists(record_tuple, min_size=1, max_size=8))
    base = draw(st.integers(0, (1 << 62)))
    ts = draw(st.integers(0, 1 << 45))
    return build_batch(
        recs,
        base_offset=base,
        compression=draw(codecs),
        timestamp_type=draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])),
        producer_id=draw(st.sampled_from([-1, 0, 7, (1 << 63) - 1])),
        producer_epoch=draw(st.sampled_from([-1, 0, 32767])),
        base_sequence=draw(st.sampled_from([-1, 0, (1 << 31) - 3])),
        partition_leader_epoch=draw(st.integers(-1, 100)),
        is_transactional=draw(st.booleans()),
        timestamp=ts,
        log_append_time=ts + 1,
    )


def fix_crc(buf: bytearray) -> None:
    """Recompute a magic 2 CRC so a mutation gets past the CRC check into the record decoder."""
    if len(buf) >= 21:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


# Header fields worth lying in: (offset, struct format).
V2_FIELDS = [(0, ">q"), (8, ">i"), (12, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (27, ">q"), (35, ">q"),
             (43, ">q"), (51, ">h"), (53, ">i"), (57, ">i")]
LYING = st.sampled_from([0, 1, -1, -2, 12, 49, 60, 61, 127, 255, 65535, (1 << 31) - 1, -(1 << 31), 1 << 20])


@st.composite
def mutations(draw, data: bytes, fields: list[tuple[int, str]]) -> bytearray:
    """Apply 1-4 random edits: flip, insert, delete, truncate, or overwrite a header field with a lying value."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "field", "byte"]))
        n = len(buf)
        if op == "flip" and n:
            i = draw(st.integers(0, n - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte" and n:
            buf[draw(st.integers(0, n - 1))] = draw(st.integers(0, 255))
        elif op == "insert":
            i = draw(st.integers(0, n))
            buf[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and n:
            i = draw(st.integers(0, n - 1))
            del buf[i : i + draw(st.integers(1, 16))]
        elif op == "truncate" and n:
            del buf[draw(st.integers(0, n - 1)) :]
        elif op == "field":
            off, fmt = draw(st.sampled_from(fields))
            size = struct.calcsize(fmt)
            if off + size <= len(buf):
                bits = 8 * size
                v = draw(LYING)
                if fmt[-1].isupper():  # unsigned field: take the value's bit pattern
                    v &= (1 << bits) - 1
                else:
                    v = max(-(1 << (bits - 1)), min(v, (1 << (bits - 1)) - 1))
                struct.pack_into(fmt, buf, off, v)
    return buf


# --- magic 2 ----------------------------------------------------------------------------------------------------


@FUZZ
@given(st.data(), valid_batches())
def test_mutated_v2_batches(data: st.DataObject, batch: bytes) -> None:
    """Mutated valid batches (with and without a repaired CRC) through read_batches and RecordBatch."""
    buf = data.draw(mutations(batch, V2_FIELDS))
    if data.draw(st.booleans()):
        fix_crc(buf)
    raw = bytes(buf)
    with watchdog():
        for validate in (False, True):
            target_read_batches(raw, validate=validate)
        target_record_batch(raw)


@FUZZ
@given(st.lists(valid_batches(), min_size=1, max_size=4), st.binary(max_size=64))
def test_valid_batches_then_garbage(batches: list[bytes], tail: bytes) -> None:
    """A run of valid batches followed by garbage: every valid batch is served, nothing after the first bad byte."""
    data = b"".join(batches)
    with watchdog():
        got = target_read_batches(data + tail, validate=True)
    assert len(got) >= len(batches)
    assert [bytes(b.raw) for b in got[: len(batches)]] == batches
    end = sum(b.size_in_bytes for b in got)
    assert end <= len(data) + len(tail)


@FUZZ
@given(valid_batches())
def test_valid_batch_round_trips(batch: bytes) -> None:
    """Unmutated batches decode without error and re-encode to the same bytes (sanity of the fuzz baseline)."""
    (b,) = list(read_batches(batch, validate=True))
    recs = b.records(stored_timestamps=True)
    again = build_batch(
        recs,
        base_offset=b.base_offset,
        compression=b.compression,
        timestamp_type=b.timestamp_type,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence,
        partition_leader_epoch=b.partition_leader_epoch,
        is_transactional=b.is_transactional,
        max_timestamp=b.max_timestamp,
    )
    if b.compression in (CompressionType.NONE, CompressionType.SNAPPY, CompressionType.LZ4):
        assert again == batch


def _v2_with_payload(codec: int, payload: bytes, count: int, attrs_extra: int = 0) -> bytes:
    """A magic 2 batch with a correct CRC around an arbitrary records section (compressed or not)."""
    attributes = (codec & 7) | attrs_extra
    body = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count) + payload
    length = 4 + 1 + 4 + len(body)
    head = struct.pack(">qiib", 0, length, 0, 2)
    return head + struct.pack(">I", crc32c(body)) + body


@FUZZ
@given(st.integers(0, 7), st.binary(max_size=400), st.integers(-2, 40), st.sampled_from([0, 0x08, 0x10, 0x20, 0x40]))
def test_random_codec_payloads(codec: int, payload: bytes, count: int, extra: int) -> None:
    """Random codec ids (including 5-7) around random payloads with a valid CRC: the decoders see garbage."""
    raw = _v2_with_payload(codec, payload, count, extra)
    with watchdog():
        target_read_batches(raw, validate=True)
        target_decompress(codec if codec < 5 else 0, payload)


@FUZZ
@given(codecs.filter(lambda c: c != CompressionType.NONE), st.binary(max_size=300), st.integers(0, 30), st.data())
def test_compressed_random_records_section(codec: CompressionType, section: bytes, count: int, data) -> None:
    """Well-formed compression of a garbage records section: the record decoder sees garbage after decompressing;
    also mutate the compressed stream itself (each codec's framing)."""
    payload = bytearray(compress(codec, section))
    if data.draw(st.booleans()) and payload:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(payload) - 1))
            payload[i] = data.draw(st.integers(0, 255))
    raw = _v2_with_payload(int(codec), bytes(payload), count)
    with watchdog():
        target_read_batches(raw, validate=True)
        target_decompress(int(codec), bytes(payload))


@FUZZ
@given(st.binary(max_size=2048), st.integers(0, 64), st.booleans())
def test_read_batches_random_bytes(data: bytes, position: int, validate: bool) -> None:
    """``read_batches`` over random bytes, from a random position."""
    with watchdog():
        target_read_batches(data, position=position, validate=validate)


@FUZZ
@given(st.binary(min_size=0, max_size=12), st.binary(max_size=500))
def test_read_batches_magic_prefix(prefix: bytes, rest: bytes) -> None:
    """Random bytes behind a plausible prefix (magic 0, 1 or 2 at byte 16) so the reader gets past the magic."""
    buf = bytearray(struct.pack(">qii", 0, len(rest) + 5, 0) + b"\x02" + rest)
    buf[16] = rest[0] % 3 if rest else 2
    buf[: len(prefix)] = prefix[: len(buf)]
    with watchdog():
        target_read_batches(bytes(buf), validate=False)


@FUZZ
@given(st.binary(max_size=16))
def test_varints(data: bytes) -> None:
    with watchdog():
        target_varint(data)


# --- legacy magic 0/1 ---------------------------------------------------------------------------------------------

V1_FIELDS = [(0, ">q"), (8, ">i"), (12, ">I"), (16, ">b"), (17, ">b"), (18, ">q"), (26, ">i")]


@st.composite
def legacy_batches(draw) -> bytes:
    from kafkalog.records.legacy import build_legacy_batch

    magic = draw(st.sampled_from([0, 1]))
    codec = draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]))
    recs = draw(st.lists(st.tuples(st.one_of(st.none(), small_bytes), st.one_of(st.none(), small_bytes)), min_size=1, max_size=6))
    base = draw(st.integers(0, 1 << 40))
    return build_legacy_batch(
        [Record(base + i, 1000 + i, k, v, ()) for i, (k, v) in enumerate(recs)],
        magic=magic,
        base_offset=base,
        compression=codec,
    )


def fix_legacy_crc(buf: bytearray) -> None:
    if len(buf) >= 16:
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))


@FUZZ
@given(st.data(), legacy_batches())
def test_mutated_legacy_messages(data: st.DataObject, msg: bytes) -> None:
    """Mutated magic 0/1 messages (plain and compressed wrappers), CRC repaired half of the time."""
    buf = data.draw(mutations(msg, V1_FIELDS))
    if data.draw(st.booleans()):
        fix_legacy_crc(buf)
    raw = bytes(buf)
    with watchdog():
        target_read_batches(raw, validate=False)
        target_read_batches(raw, validate=True)
        target_legacy_batch(raw)


@FUZZ
@given(st.sampled_from([0, 1]), st.integers(0, 7), st.binary(max_size=300), st.integers(-1, 1 << 33))
def test_legacy_wrapper_random_payload(magic: int, codec: int, payload: bytes, offset: int) -> None:
    """A legacy wrapper with a valid CRC around a random (compressed) inner message set."""
    body = struct.pack(">bb", magic, codec) + (struct.pack(">q", 5) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(payload)) + payload
    raw = struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body
    with watchdog():
        target_read_batches(raw, validate=True)
        target_legacy_batch(raw)


# --- memory bounded regardless of length fields ---------------------------------------------------------------------

MEM_SLACK = 2 * 1024 * 1024  # fixed overhead allowed on top of a small multiple of the input


def _peak(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@settings(FUZZ, max_examples=max(EXAMPLES // 5, 20))
@given(valid_batches(), st.sampled_from(V2_FIELDS), LYING)
def test_lying_lengths_v2_memory(batch: bytes, field: tuple[int, str], value: int) -> None:
    """A header field replaced by a huge/negative value: peak allocation stays O(input)."""
    buf = bytearray(batch)
    off, fmt = field
    bits = 8 * struct.calcsize(fmt)
    struct.pack_into(fmt, buf, off, max(-(1 << (bits - 1)), min(value, (1 << (bits - 1)) - 1)))
    fix_crc(buf)
    raw = bytes(buf)
    with watchdog():
        peak = _peak(target_read_batches, raw)
    assert peak <= 64 * len(raw) + MEM_SLACK, f"{peak} bytes traced for a {len(raw)}-byte input"


@settings(FUZZ, max_examples=max(EXAMPLES // 5, 20))
@given(st.sampled_from([(1 << 31) - 1, 1 << 30, 1 << 24]), st.sampled_from(["size", "key", "value", "hkey", "count"]))
def test_lying_record_lengths_memory(n: int, where: str) -> None:
    """Varint record/key/value/header lengths and record counts that lie, in an uncompressed batch."""
    from kafkalog.records.varint import encode_varint

    key = value = b"abc"
    rec_body = b"\x00" + encode_varint(0) + encode_varint(0)
    if where == "key":
        rec_body += encode_varint(n) + key + encode_varint(3) + value + encode_varint(0)
    elif where == "value":
        rec_body += encode_varint(3) + key + encode_varint(n) + value + encode_varint(0)
    elif where == "hkey":
        rec_body += encode_varint(3) + key + encode_varint(3) + value + encode_varint(1) + encode_varint(n) + b"k"
    else:
        rec_body += encode_varint(3) + key + encode_varint(3) + value + encode_varint(0)
    rec = (encode_varint(n) if where == "size" else encode_varint(len(rec_body))) + rec_body
    count = n if where == "count" else 1
    raw = _v2_with_payload(0, rec * 4, count)
    with watchdog():
        peak = _peak(target_read_batches, raw)
    assert peak <= MEM_SLACK


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4])
def test_decompression_bomb_capped(codec: CompressionType) -> None:
    """A payload expanding far beyond the cap is refused without allocating past the cap."""
    from kafkalog.errors import CorruptRecordError
    from kafkalog.records.compression import decompress

    payload = compress(codec, b"\x00" * (8 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError):
            decompress(codec, payload, max_size=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 4 * (1 << 20) + len(payload)


def _zstd_empty_blocks(n: int) -> bytes:
    """A zstd frame of ``n`` empty compressed blocks: it decodes to nothing, but each block header promises up
    to 128 KiB to a bound computed from headers."""
    frame = struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x70])
    blk = (2 << 1).to_bytes(3, "little")
    return frame + blk * n + (1 | (2 << 1)).to_bytes(3, "little")


def test_zstd_memory_proportional_to_output() -> None:
    from kafkalog.records.compression import decompress

    payload = _zstd_empty_blocks(3000)
    tracemalloc.start()
    try:
        try:
            decompress(CompressionType.ZSTD, payload)
        except Exception:  # noqa: BLE001 - only the allocation matters here
            pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 64 * len(payload) + MEM_SLACK, f"{peak} bytes for a {len(payload)}-byte zstd payload"


def test_lying_batch_length_does_not_read_on() -> None:
    """A batch length longer than the file: the reader stops at the batch, serving nothing after it."""
    good = build_batch([(b"k", b"v")], base_offset=0, timestamp=1)
    bad = bytearray(build_batch([(b"k", b"v")], base_offset=1, timestamp=1))
    struct.pack_into(">i", bad, 8, (1 << 31) - 1)
    r = read_batches(good + bytes(bad) + good, validate=True)
    got = list(r)
    assert len(got) == 1 and r.valid_bytes == len(good) and r.invalid_bytes == len(bad) + len(good)

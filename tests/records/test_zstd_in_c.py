"""zstd frames decoded in C with libzstd (``KAFKALOG_HAVE_ZSTD``: ``_columns.zstd_context``, one context per
thread from ``codec_contexts.zstd_decoder``): the same columns, positions and errors as the walker calling
zstandard's decompress (a build without libzstd's headers) and as the pure-Python decoder, on Kafka's frames and
on damaged, fuzzed and oversized ones; and a run without it still decodes everything."""

from __future__ import annotations

import os
import struct

import pytest
import zstandard
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, build_batch, codec_contexts, read_record_columns
from kafkalog.records.compression import BLOCK_DECODERS, decompress
from kafkalog.records.native import compiled
from tests.records.test_record_columns_codec import FUZZ, assert_same, outcome, with_body
from tests.threads import run_threads

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")

ZSTD, NONE = CompressionType.ZSTD, CompressionType.NONE
needs_libzstd = pytest.mark.skipif(compiled is None or not compiled.zstd_in_c,
                                   reason="the record decoder was built without libzstd's headers")


def _batch(n: int = 40, base_offset: int = 0, codec: CompressionType = ZSTD) -> bytes:
    recs = [(b"key-%d" % i, b"v" * (i % 120) if i % 9 else None, [("h", b"x")] if i % 4 == 0 else [])
            for i in range(n)]  # fmt: skip
    return build_batch(recs, base_offset=base_offset, timestamp=1_700_000_000_000, compression=codec)


_GOOD = _batch()
_SECTION = decompress(ZSTD, _GOOD[61:])


def _frame(raw: bytes = _SECTION, **kw) -> bytes:
    return zstandard.ZstdCompressor(level=3, **kw).compress(raw)


def _kafka_like(raw: bytes = _SECTION) -> bytes:
    """zstd-jni's streaming frame as Kafka writes it: no content size, the data block not last, an empty last one."""
    o = zstandard.ZstdCompressor(level=3).compressobj()
    return o.compress(raw) + o.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + o.flush()


def _patched_size(body: bytes, size: int) -> bytes:
    """``body`` (single segment, 1-byte content size) declaring ``size`` bytes of content instead."""
    fhd = body[4]
    assert fhd & 0x20 and fhd >> 6 == 0, hex(fhd)
    return body[:5] + bytes([size]) + body[6:]


def _shapes() -> dict[str, bytes]:
    one, check = _frame(), _frame(write_checksum=True)
    small = _frame(_SECTION[:200])
    return {
        "plain": one,
        "kafka_like": _kafka_like(),
        "checksum": check,
        "checksum_wrong": check[:-1] + bytes([check[-1] ^ 1]),
        "checksum_cut": check[:-2],
        "no_content_size": _frame(write_content_size=False),
        "content_size_short": _patched_size(small, 199),
        "content_size_long": _patched_size(small, 201),
        "two_frames": one + one,
        "skippable_first": struct.pack("<II", 0x184D2A50, 3) + b"abc" + one,
        "trailing_zeros": one + b"\0\0",
        "truncated": one[:-3],
        "corrupt_block": one[:12] + bytes(b ^ 0x33 for b in one[12:40]) + one[40:],
        "dictionary_id": _frame(dict_data=zstandard.ZstdCompressionDict(b"key-value" * 200)),
        "window_beyond_limit": _big_window(),
        "records_do_not_decode": _frame(_SECTION[:-3] + b"\xff\xff\xff"),
        "beyond_the_scratch": _frame(_SECTION + bytes(3 << 20)),
        "empty": _frame(b""),
    }


def _big_window() -> bytes:
    """A frame whose window (256 MiB) exceeds the streaming limit: declined in C, left to cramjam."""
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=28)
    o = zstandard.ZstdCompressor(compression_params=params).compressobj()
    return o.compress(_SECTION) + o.flush()


@pytest.fixture(params=["libzstd", "zstandard"])
def zstd_path(request, monkeypatch) -> str:
    """The walker's zstd decoder: this thread's libzstd context, or (as a build without libzstd) zstandard's."""
    if request.param == "libzstd" and not compiled.zstd_in_c:
        pytest.skip("the record decoder was built without libzstd's headers")
    if request.param == "zstandard":
        monkeypatch.setattr(codec_contexts, "_LIBZSTD_CONTEXT", None)
    return request.param


@pytest.mark.parametrize("name", sorted(_shapes()))
def test_zstd_shapes_same_on_every_path(name: str, zstd_path: str) -> None:
    data = _batch(3, codec=NONE) + with_body(_batch(base_offset=20), _shapes()[name])
    assert_same(data)


def test_the_two_compiled_paths_agree_with_each_other(monkeypatch) -> None:
    if not compiled.zstd_in_c:
        pytest.skip("the record decoder was built without libzstd's headers")
    for name, body in sorted(_shapes().items()):
        data = _batch(3, codec=NONE) + with_body(_batch(base_offset=20), body)
        a = outcome(data, "compiled")
        with monkeypatch.context() as m:
            m.setattr(codec_contexts, "_LIBZSTD_CONTEXT", None)
            b = outcome(data, "compiled")
        if isinstance(a, Exception) or isinstance(b, Exception):
            assert type(a) is type(b) and str(a) == str(b), name
        else:
            assert a.valid_bytes == b.valid_bytes and a.to_arrow().equals(b.to_arrow()), name


class _Counting:
    """compression._zstd_into, counting the payloads the walker hands it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, src, out):
        self.calls += 1
        return BLOCK_DECODERS[1](src, out)


def _c_run(data: bytes, decoder: object, max_size: int = BLOCK_DECODERS[2]) -> tuple[int, int]:
    """(where the walker alone stops in ``data``, the payloads it asked _zstd_into about)."""
    into = _Counting()
    codecs = (BLOCK_DECODERS[0], into, max_size, decoder)
    stop = compiled.ColumnBuilder().run(data, 0, len(data), True, crc32c, 1 << 62, 1 << 62, None, codecs)
    return stop, into.calls


@needs_libzstd
def test_libzstd_decodes_plain_frames_without_python() -> None:
    ctx = compiled.zstd_context()
    for name in ("plain", "kafka_like", "checksum", "no_content_size"):
        data = with_body(_GOOD, _shapes()[name])
        assert _c_run(data, ctx) == (len(data), 0), name
    # what libzstd refuses, or what is not one plain frame, is asked of _zstd_into, whose answer stands
    for name in ("checksum_wrong", "checksum_cut", "content_size_short", "content_size_long", "corrupt_block",
                 "two_frames", "window_beyond_limit"):
        data = with_body(_GOOD, _shapes()[name])
        assert _c_run(data, ctx) == (0, 1), name
    # what the C bound already refuses never reaches a codec
    for name in ("truncated", "trailing_zeros"):
        assert _c_run(with_body(_GOOD, _shapes()[name]), ctx) == (0, 0), name


@needs_libzstd
def test_libzstd_keeps_the_size_limit() -> None:
    ctx = compiled.zstd_context()
    n = len(_SECTION)
    assert _c_run(_GOOD, ctx, max_size=n)[0] == len(_GOOD)
    assert _c_run(_GOOD, ctx, max_size=n - 1)[0] == 0
    with pytest.raises(CorruptRecordError):
        decompress(ZSTD, _GOOD[61:], max_size=n - 1)


@needs_libzstd
def test_a_wrong_capsule_is_refused() -> None:
    import datetime

    other = datetime.datetime_CAPI  # a capsule of another name
    with pytest.raises(ValueError):
        _c_run(_GOOD, other)


@needs_libzstd
def test_one_libzstd_context_per_thread() -> None:
    mine = codec_contexts.zstd_decoder()
    assert mine is codec_contexts.zstd_decoder()
    seen: list[object] = []
    assert not run_threads(lambda _: seen.append(codec_contexts.zstd_decoder()), 1)
    assert seen[0] is not mine and type(seen[0]) is type(mine)


@needs_libzstd
def test_threads_decode_with_their_own_contexts() -> None:
    payloads = [_batch(30 + i, base_offset=1000 * i) for i in range(8)]
    want = [read_record_columns(p, implementation="python").to_arrow() for p in payloads]

    def work(k: int) -> None:
        for _ in range(40):
            for i in range(k % 2, len(payloads), 2):
                assert read_record_columns(payloads[i], implementation="compiled").to_arrow().equals(want[i])

    assert not run_threads(work, 4)


_BASES = [_frame(), _kafka_like(), _frame(write_checksum=True), _frame(os.urandom(64) + _SECTION[:300])]


@FUZZ
@given(which=st.integers(0, len(_BASES) - 1), cut=st.integers(0, 1 << 12),
       edits=st.lists(st.tuples(st.integers(0, 1 << 12), st.integers(0, 255)), max_size=4), head=st.booleans())
def test_fuzzed_zstd_frames_same_on_every_path(which, cut, edits, head) -> None:
    """Edited or truncated frames (edits in the frame and first block headers when ``head``): the libzstd path,
    zstandard's and the pure decoder give the same columns or the same error."""
    body = bytearray(_BASES[which])
    for pos, val in edits:
        body[(pos % 24 if head else pos) % len(body)] = val
    data = with_body(_GOOD, bytes(body[: max(1, cut % (len(body) + 1))]))
    assert_same(data)
    saved = codec_contexts._LIBZSTD_CONTEXT
    codec_contexts._LIBZSTD_CONTEXT = None
    try:
        assert_same(data)
    finally:
        codec_contexts._LIBZSTD_CONTEXT = saved

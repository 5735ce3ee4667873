"""Reliability of the record decoders on hostile payloads: a zstd payload of garbage blocks fails at the first
attempt in bounded memory (the buffer grows only when cramjam says the output was full), a payload that fails on the
compiled path is decompressed once (the walker's exception becomes the error), and the compiled ColumnBuilder refuses
re-entry from a codec callback or another thread instead of freeing its buffers under a running ``run()``."""

from __future__ import annotations

import gzip
import struct
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import cramjam
import pytest
from crc32c import crc32c

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, build_batch, columns, compression, read_record_columns
from kafkalog.records.compression import BLOCK_DECODERS, decompress
from kafkalog.records.native import compiled
from tests.records.test_record_columns_codec import outcome, with_body
from tests.threads import threads_running

GZIP, LZ4, ZSTD = CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD
needs_compiled = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")


def garbage_zstd(blocks: int) -> bytes:
    """A zstd frame of ``blocks`` compressed blocks of one garbage byte each: 4 bytes per block, but its header
    (2 MiB window) lets each claim 128 KiB, so 2,100 of them (8.4 KB) claim more than the 256 MiB limit."""
    out = [struct.pack("<I", 0xFD2FB528), b"\x00", bytes([(21 - 10) << 3])]
    for i in range(blocks):
        out.append(((1 << 3) | (2 << 1) | (i == blocks - 1)).to_bytes(3, "little") + b"\xff")
    return b"".join(out)


def lz4_garbage_block() -> bytes:
    """A Kafka lz4 frame (header checksum right) whose one compressed block is not valid lz4."""
    desc = bytes((0x60, 4 << 4))
    block = b"\xff" * 40
    return (struct.pack("<I", 0x184D2204) + desc + bytes([(compression.xxh32(desc) >> 8) & 0xFF])
            + struct.pack("<I", len(block)) + block + b"\0" * 4)  # fmt: skip


def batch_of(codec: CompressionType, n: int = 20, base_offset: int = 0) -> bytes:
    recs = [(b"k%d" % i, b"value-%d" % i * 3, []) for i in range(n)]
    return build_batch(recs, base_offset=base_offset, timestamp=1_700_000_000_000, compression=codec)


class Calls:
    """Wraps a codec function and records the output room of each call."""

    def __init__(self, fn) -> None:
        self.fn, self.rooms = fn, []

    def __call__(self, src, out):
        self.rooms.append(len(out))
        return self.fn(src, out)


# --- zstd: retry only when the output was full ----------------------------------------------------------------


def test_cramjam_says_output_full_as_compression_expects() -> None:
    """The one signal the retry trusts: cramjam's error for a too-small output (and only for that)."""
    data = bytes(range(256)) * 1000
    payload = bytes(cramjam.zstd.compress(data))
    with pytest.raises(cramjam.DecompressionError) as small:
        cramjam.zstd.decompress_into(payload, bytearray(1000))
    assert str(small.value) == compression._CRAMJAM_OUTPUT_FULL
    with pytest.raises(cramjam.DecompressionError) as garbage:
        cramjam.zstd.decompress_into(garbage_zstd(3), bytearray(1 << 20))
    assert str(garbage.value) != compression._CRAMJAM_OUTPUT_FULL


def test_garbage_zstd_fails_at_the_first_attempt_in_bounded_memory(monkeypatch) -> None:
    payload = garbage_zstd(2100)
    assert len(payload) < 9000 and compression._zstd_bound(memoryview(payload)) > BLOCK_DECODERS[2]
    calls = Calls(cramjam.zstd.decompress_into)
    monkeypatch.setattr(cramjam.zstd, "decompress_into", calls)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="corrupt zstd payload"):
            decompress(ZSTD, payload)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(calls.rooms) == 1 and calls.rooms[0] <= 1 << 20
    assert peak < 4 << 20


def test_compressible_zstd_still_grows_its_buffer() -> None:
    """A payload far more compressible than the first guess (16x) still decodes: output full, doubled, retried."""
    data = bytes(8 << 20)
    payload = bytes(cramjam.zstd.compress(data))
    assert 16 * len(payload) < len(data)
    assert decompress(ZSTD, payload) == data
    with pytest.raises(CorruptRecordError, match="expands beyond"):
        decompress(ZSTD, payload, max_size=len(data) - 1)


@pytest.mark.parametrize("impl", ["python", pytest.param("compiled", marks=needs_compiled)])
def test_garbage_zstd_batch_fails_fast_on_both_paths(impl: str) -> None:
    ok = batch_of(ZSTD)
    data = ok + with_body(batch_of(ZSTD, base_offset=20), garbage_zstd(2100))
    tracemalloc.start()
    try:
        got = outcome(data, impl)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(got, CorruptRecordError)
    assert str(got) == f"corrupt zstd payload: Data corruption detected (at position {len(ok)})"
    assert peak < 16 << 20


# --- one decompression of a failing payload on the compiled path ----------------------------------------------


def _failing_batches() -> dict[str, bytes]:
    gz = gzip.compress(b"x" * 5000)
    return {
        # through the decompress callback
        "gzip": with_body(batch_of(GZIP), gz[:10] + b"\xff" * 40 + gz[50:]),
        "zstd-beyond-scratch": with_body(batch_of(ZSTD), garbage_zstd(2100)),
        # through cramjam, called from C
        "zstd-in-scratch": with_body(batch_of(ZSTD), garbage_zstd(3)),
        "lz4": with_body(batch_of(LZ4), lz4_garbage_block()),
    }


@needs_compiled
@pytest.mark.parametrize("name", sorted(_failing_batches()))
def test_failing_payload_is_decompressed_once(name: str, monkeypatch) -> None:
    bad = _failing_batches()[name]
    ok = batch_of(CompressionType.NONE)
    data = ok + bad
    want = outcome(data, "python")
    assert isinstance(want, CorruptRecordError) and f"(at position {len(ok)})" in str(want)

    gzip_calls = []
    real_gzip = compression._gzip_decompress
    monkeypatch.setattr(compression, "_gzip_decompress", lambda *a: gzip_calls.append(1) or real_gzip(*a))
    lz4, zstd = Calls(cramjam.lz4.decompress_block_into), Calls(cramjam.zstd.decompress_into)
    monkeypatch.setattr(cramjam.lz4, "decompress_block_into", lz4)
    monkeypatch.setattr(cramjam.zstd, "decompress_into", zstd)
    monkeypatch.setattr(columns, "BLOCK_DECODERS", (lz4, zstd, BLOCK_DECODERS[2]))
    got = outcome(data, "compiled")
    assert type(got) is type(want) and str(got) == str(want)
    assert len(gzip_calls) + len(lz4.rooms) + len(zstd.rooms) == 1


@needs_compiled
def test_take_error_reports_the_declining_exception_once() -> None:
    bad = _failing_batches()["zstd-in-scratch"]
    b = compiled.ColumnBuilder()
    assert b.run(bad, 0, len(bad), True, crc32c, 1 << 40, 1 << 40, None, BLOCK_DECODERS) == 0
    source, exc = b.take_error()
    assert source == int(ZSTD) and isinstance(exc, cramjam.DecompressionError) and exc.__traceback__ is None
    assert b.take_error() is None
    good = batch_of(ZSTD)
    assert b.run(good, 0, len(good), True, crc32c, 1 << 40, 1 << 40, None, BLOCK_DECODERS) == len(good)
    assert b.take_error() is None


# --- ColumnBuilder: no re-entry -------------------------------------------------------------------------------


@needs_compiled
def test_builder_refuses_reentry_from_a_codec_callback() -> None:
    """A gzip batch's decompress callback calls back into the builder that is running: every mutating call is
    refused with a RuntimeError, the run goes on and the records are those of an undisturbed run."""
    data = batch_of(GZIP) + batch_of(GZIP, base_offset=20)
    b = compiled.ColumnBuilder()
    refused: list[str] = []

    def attempts() -> list:
        return [b.finish, b.__init__, lambda: b.run(data, 0, len(data), True, crc32c, 10, 10, None, None),
                lambda: b.begin_batch(0, 0, 2, 0, -1, -1, -1, 0, False, False), lambda: b.add_records([]),
                lambda: b.decode_records(b"", 0, 0, 0, None)]  # fmt: skip

    def callback(codec_id, body, out):
        for attempt in attempts():
            try:
                attempt()
            except RuntimeError as exc:
                refused.append(str(exc))
        return columns._decompress_payload(codec_id, body, out)

    # no codecs tuple: gzip members go through the callback (with it, the walker inflates them itself)
    assert b.run(data, 0, len(data), True, crc32c, 1 << 40, 1 << 40, callback, None) == len(data)
    assert len(refused) == 2 * len(attempts()) and all("busy" in m for m in refused), refused
    raw = b.finish()
    got = columns.RecordColumns(raw, offset_width=b.offset_width).arrays  # int64 offsets, as the pure builder's
    want = read_record_columns(data, implementation="python").arrays
    assert {k: got[k].tobytes() for k in want} == {k: want[k].tobytes() for k in want}
    assert {k: bytes(v) for k, v in raw.items() if k not in want} == {"key_views": b"", "value_views": b""}


@needs_compiled
def test_builder_refuses_another_thread_while_running() -> None:
    data = batch_of(GZIP)
    b = compiled.ColumnBuilder()
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def callback(codec_id, body, out):
        inside.set()
        release.wait(10)  # releases the GIL, as cramjam's zstd does
        return columns._decompress_payload(codec_id, body, out)

    def run(_: int) -> None:
        b.run(data, 0, len(data), True, crc32c, 1 << 40, 1 << 40, callback, None)

    with threads_running(run, 1, timeout=10) as run_errors:
        try:
            assert inside.wait(10)
            for attempt in (b.finish, b.__init__):
                try:
                    attempt()
                except RuntimeError as exc:
                    errors.append(exc)
        finally:
            release.set()
    assert not run_errors
    assert len(errors) == 2 and all("busy" in str(e) for e in errors)
    assert b.n_records == 20 and len(b.finish()["offset"]) == 20 * 8


@needs_compiled
def test_reentry_cannot_crash_the_interpreter() -> None:
    """Freeing the scratch under a running ``run()`` was a use-after-free: in a child, finish() and __init__() from
    the callback of a batch decoded through the scratch must leave a process that ends normally."""
    script = textwrap.dedent("""
        from crc32c import crc32c
        from kafkalog.records import CompressionType, build_batch, columns
        from kafkalog.records.native import compiled
        recs = [(b"k%d" % i, b"v" * 200, []) for i in range(200)]
        data = b"".join(build_batch(recs, base_offset=200 * j, timestamp=0, compression=CompressionType.GZIP)
                        for j in range(3))
        b = compiled.ColumnBuilder()
        def callback(codec_id, body, out):
            for attempt in (b.finish, b.__init__):
                try:
                    attempt()
                except RuntimeError:
                    pass
            return columns._decompress_payload(codec_id, body, out)
        end = b.run(data, 0, len(data), True, crc32c, 1 << 40, 1 << 40, callback, None)
        print(end == len(data), b.n_records)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "600"]


@needs_compiled
def test_records_that_do_not_decode_cost_one_more_decompression_not_two(monkeypatch) -> None:
    """A payload that inflates but whose records do not decode: the walker's attempt declines (its own inflate when
    built with zlib, else the callback), then the Python path decompresses it once and decodes the records from
    that payload (``RecordBatch.records_from``)."""
    good = batch_of(GZIP)
    section = bytearray(decompress(GZIP, good[61:]))
    section[-3:] = b"\xff\xff\xff"  # the last record's varints run past its end
    bad = with_body(good, compression.compress(GZIP, bytes(section)))
    want = outcome(bad, "python")
    assert isinstance(want, CorruptRecordError)
    calls = []
    real_gzip = compression._gzip_decompress
    monkeypatch.setattr(compression, "_gzip_decompress", lambda *a: calls.append(1) or real_gzip(*a))
    got = outcome(bad, "compiled")
    assert type(got) is type(want) and str(got) == str(want)
    assert len(calls) == (1 if compiled.gzip_in_c else 2)

"""``read_record_columns`` / ``iter_record_columns``: the columns equal what ``read_batches(...).records()`` gives
and what Kafka's golden manifests list, on every implementation (pure Python and, when built, the C extension),
with the same errors and ``valid_bytes`` on bad bytes."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkalog
from kafkalog.errors import CorruptRecordError, InvalidArgumentError, KafkaLogError
from kafkalog.records import (
    CompressionType,
    Record,
    TimestampType,
    build_batch,
    build_legacy_batch,
    iter_record_columns,
    read_batches,
    read_record_columns,
)
from kafkalog.records.columns import _compiled
from kafkalog.records.varint import encode_varint
from tests.conftest import GOLDEN, golden_segment_logs

IMPLS = ["python"] + (["compiled"] if _compiled is not None else [])
EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))


def _golden_logs() -> list[str]:
    if GOLDEN is None:
        return []
    return [str(p.relative_to(GOLDEN)) for p in golden_segment_logs()]


def reference(source, *, verify_crc: bool = True, position: int = 0, end: int | None = None):
    """What ``read_batches`` + ``records()`` give: (records, valid_bytes, invalid_bytes, error) or the exception."""
    reader = read_batches(source, position=position, end=end, validate=verify_crc)
    records: list[Record] = []
    try:
        for batch in reader:
            records += batch.records()
    except KafkaLogError as exc:
        return exc
    finally:
        reader.close()
    return records, reader.valid_bytes, reader.invalid_bytes, reader.error


def outcome(source, impl: str, **kw):
    """The same shape from ``read_record_columns``."""
    try:
        cols = read_record_columns(source, implementation=impl, **kw)
    except KafkaLogError as exc:
        return exc
    return cols.to_records(), cols.valid_bytes, cols.invalid_bytes, cols.error


def columns_of(source, impl: str, **kw):
    """The raw arrays (or the exception) of one implementation."""
    try:
        return read_record_columns(source, implementation=impl, **kw).arrays
    except KafkaLogError as exc:
        return exc


def same_columns(source, **kw) -> None:
    """Every implementation gives identical arrays (dtype and values) or the identical error."""
    results = [columns_of(source, impl, **kw) for impl in IMPLS]
    first = results[0]
    for other in results[1:]:
        if isinstance(first, Exception) or isinstance(other, Exception):
            assert type(first) is type(other) and str(first) == str(other)
            continue
        assert first.keys() == other.keys()
        for name in first:
            assert first[name].dtype == other[name].dtype, name
            assert np.array_equal(first[name], other[name]), name


def same(a, b) -> None:
    """Equal outcomes; exceptions compare by type and message."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert a[0] == b[0]
    assert a[1:3] == b[1:3]
    assert type(a[3]) is type(b[3]) and str(a[3]) == str(b[3])


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("rel", _golden_logs())
def test_golden_logs_match_records_and_manifest(rel: str, impl: str) -> None:
    path = GOLDEN / rel
    for verify in (True, False):
        same(outcome(path, impl, verify_crc=verify), reference(path, verify_crc=verify))
        same_columns(path, verify_crc=verify)
    cols = read_record_columns(path, implementation=impl)
    parts = rel.split("/")
    manifest = None
    if parts[0] == "logdir":
        manifest = GOLDEN / "manifests" / f"{parts[1]}.json"
    elif parts[0] == "legacy":
        manifest = GOLDEN / "legacy" / "manifests" / f"{parts[2]}.json"
    if manifest is None or not manifest.is_file():
        return
    seg = next(s["log"] for s in json.loads(manifest.read_text())["segments"] if s["log"]["file"] == parts[-1])
    batches = seg["batches"]
    expected = [r for b in batches for r in b.get("records", [])]
    assert len(cols) == len(expected)
    assert cols.offset.tolist() == [r["offset"] for r in expected]
    assert cols.timestamp.tolist() == [r["timestamp"] for r in expected]
    assert [None if k is None else k.hex() for k in cols.keys()] == [r["key"] for r in expected]
    assert [None if v is None else v.hex() for v in cols.values()] == [r["value"] for r in expected]
    assert [[(k, None if v is None else v.hex()) for k, v in h] for h in cols.headers()] == [
        [(h["key"], h["value"]) for h in r["headers"]] for r in expected
    ]
    nonempty = [b for b in batches if b.get("records")]
    assert cols.batch_base_offset.tolist() == [b["baseOffset"] for b in nonempty]
    assert cols.batch_position.tolist() == [b["position"] for b in nonempty]
    assert cols.producer_id.tolist() == [b["producerId"] for b in nonempty]
    assert cols.producer_epoch.tolist() == [b["producerEpoch"] for b in nonempty]
    assert cols.base_sequence.tolist() == [b["baseSequence"] for b in nonempty]
    assert cols.partition_leader_epoch.tolist() == [b["partitionLeaderEpoch"] for b in nonempty]
    assert cols.is_control.astype(bool).tolist() == [b["isControl"] for b in nonempty]
    assert cols.is_transactional.astype(bool).tolist() == [b["isTransactional"] for b in nonempty]
    table = cols.to_arrow()
    assert table.column("timestamp_type").to_pylist() == [b["timestampType"] for b in nonempty
                                                           for _ in b["records"]]  # fmt: skip
    assert table.column("offset").to_pylist() == [r["offset"] for r in expected]


@pytest.mark.parametrize("impl", IMPLS)
def test_to_arrow_schema_and_values(impl: str) -> None:
    data = build_batch(
        [(b"k", b"v", [("a", b"1"), ("b", None)]), (None, b"", []), (b"", None, [("\u00e9", b"")])],
        base_offset=10, timestamp=1000, producer_id=7, producer_epoch=2, base_sequence=5,
        partition_leader_epoch=3, is_transactional=True,
    ) + build_batch([(b"x", b"y")], base_offset=13, timestamp=2000, timestamp_type=TimestampType.LOG_APPEND_TIME,
                    log_append_time=5000, compression=CompressionType.ZSTD)  # fmt: skip
    cols = read_record_columns(data, implementation=impl)
    assert len(cols) == 4
    t = cols.to_arrow()
    assert t.schema.field("offset").type == pa.int64()
    assert t.schema.field("key").type == pa.binary()
    assert t.schema.field("headers").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert t.schema.field("is_control").type == pa.bool_()
    assert t.to_pydict() == {
        "offset": [10, 11, 12, 13],
        "timestamp": [1000, 1000, 1000, 5000],
        "timestamp_type": ["CreateTime"] * 3 + ["LogAppendTime"],
        "key": [b"k", None, b"", b"x"],
        "value": [b"v", b"", None, b"y"],
        "headers": [[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], [],
                    [{"key": "\u00e9", "value": b""}], []],
        "partition_leader_epoch": [3, 3, 3, -1],
        "producer_id": [7, 7, 7, -1],
        "producer_epoch": [2, 2, 2, -1],
        "base_sequence": [5, 5, 5, -1],
        "is_transactional": [True, True, True, False],
        "is_control": [False] * 4,
        "batch_base_offset": [10, 10, 10, 13],
    }  # fmt: skip
    assert read_record_columns(b"", implementation=impl).to_arrow().num_rows == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_to_arrow_builds_only_requested_columns(impl: str) -> None:
    data = build_batch([(b"k", b"v", [("a", b"1")]), (None, b"", [])], base_offset=4, producer_id=9,
                       is_transactional=True)  # fmt: skip
    cols = read_record_columns(data, implementation=impl)
    full = cols.to_arrow()
    assert full.column_names == list(cols.arrow_columns())
    for wanted in (["value"], ["producer_id", "offset"], ["headers", "is_transactional", "timestamp_type"]):
        t = cols.to_arrow(wanted)
        assert t.column_names == wanted
        assert t.equals(full.select(wanted))
    assert cols.to_arrow([]).num_columns == 0
    with pytest.raises(InvalidArgumentError, match="nope"):
        cols.to_arrow(["offset", "nope"])


def test_exported_from_kafkalog() -> None:
    assert kafkalog.read_record_columns is read_record_columns
    assert kafkalog.iter_record_columns is iter_record_columns
    with pytest.raises(InvalidArgumentError):
        read_record_columns(b"", implementation="jit")
    with pytest.raises(InvalidArgumentError):
        read_record_columns(b"abc", position=5)


def _segment(n_batches: int = 30) -> bytes:
    parts = []
    offset = 0
    codecs = list(CompressionType)
    for i in range(n_batches):
        recs = [(b"k%d" % j if j % 3 else None, os.urandom(j * 7 % 50) if j % 5 else None,
                 [(f"h{j}", b"v")] if j % 4 == 0 else []) for j in range(1 + i % 9)]  # fmt: skip
        parts.append(build_batch(recs, base_offset=offset, timestamp=1_700_000_000_000 + i,
                                 compression=codecs[i % len(codecs)]))  # fmt: skip
        offset += len(recs)
        if i % 7 == 3:
            parts.append(build_legacy_batch([(b"lk", b"lv"), (None, b"x")], magic=1, base_offset=offset,
                                            timestamp=5, compression=CompressionType.GZIP if i % 2 else 0))  # fmt: skip
            offset += 2
        if i % 11 == 5:
            parts.append(build_legacy_batch([(b"old", None)], magic=0, base_offset=offset))
            offset += 1
    return b"".join(parts)


@pytest.mark.parametrize("impl", IMPLS)
def test_mixed_magics_codecs_and_chunks(impl: str) -> None:
    data = _segment()
    same(outcome(data, impl), reference(data))
    same_columns(data)
    whole = read_record_columns(data, implementation=impl).to_records()
    for max_records in (1, 7, 1000):
        reader = iter_record_columns(data, max_records=max_records, implementation=impl)
        chunks = list(reader)
        assert all(len(c) > 0 for c in chunks)
        assert [r for c in chunks for r in c.to_records()] == whole
        assert reader.valid_bytes == len(data) and reader.error is None
        if max_records == 1:
            assert len(chunks) == len(list(read_batches(data)))
    start = list(read_batches(data))[5].position
    same(outcome(data, impl, position=start, end=len(data) - 3), reference(data, position=start, end=len(data) - 3))


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_crc_stops_like_read_batches(impl: str) -> None:
    data = bytearray(_segment(12))
    batches = list(read_batches(bytes(data)))
    victim = batches[6]
    data[victim.position + 70] ^= 0x40
    data = bytes(data)
    res = outcome(data, impl)
    same(res, reference(data))
    assert res[1] == victim.position and isinstance(res[3], CorruptRecordError)
    # without CRC checks the flipped byte is read as data (or raises what records() raises)
    same(outcome(data, impl, verify_crc=False), reference(data, verify_crc=False))


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_records_raise_what_records_raises(impl: str) -> None:
    good = build_batch([(b"key", b"value", [("h", b"x")])], base_offset=0, timestamp=1)
    body = bytearray(good)
    body[61] = 0x7F  # record length varint far beyond the batch (CRC is not checked)
    res = outcome(bytes(body), impl, verify_crc=False)
    assert isinstance(res, CorruptRecordError)
    same(res, reference(bytes(body), verify_crc=False))


def _kafka_python_batches():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out = []
    for codec in (0, 1):  # kafka-python's other codecs need python-snappy/lz4/zstandard (golden logs cover them)
        for value_size in (0, 100, 1024):
            b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=codec == 1,
                                          producer_id=codec * 3 - 1, producer_epoch=codec - 1,
                                          base_sequence=codec * 10 - 1, batch_size=1 << 20)  # fmt: skip
            for i in range(20):
                headers = [(f"hk{i}", b"hv" * i), ("n", None)] if i % 3 == 0 else []
                key = None if i % 4 == 0 else b"key-%d" % i
                b.append(i, timestamp=1_600_000_000_000 + i * 3, key=key, value=b"v" * value_size, headers=headers)
            out.append(bytes(b.build()))
    return out


@pytest.mark.parametrize("impl", IMPLS)
def test_kafka_python_built_batches(impl: str) -> None:
    from kafka.record.memory_records import MemoryRecords

    batches = _kafka_python_batches()
    data = b"".join(batches)
    cols = read_record_columns(data, implementation=impl)
    expected = []
    mr = MemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            expected.append((r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]))
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in cols.to_records()]
    assert got == expected
    same(outcome(data, impl), reference(data))
    same_columns(data)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None)  # fmt: skip
_FUZZ_BASE = _segment(10)


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, len(_FUZZ_BASE) - 1), st.integers(0, 255)), min_size=1, max_size=6),
       cut=st.integers(0, len(_FUZZ_BASE)), verify=st.booleans())  # fmt: skip
def test_fuzzed_segments_match_reference(edits, cut, verify) -> None:
    data = bytearray(_FUZZ_BASE)
    for pos, val in edits:
        data[pos] = val
    data = bytes(data[:cut])
    ref = reference(data, verify_crc=verify)
    for impl in IMPLS:
        same(outcome(data, impl, verify_crc=verify), ref)
    same_columns(data, verify_crc=verify)


def _record_body(fields: list[bytes]) -> bytes:
    """An uncompressed batch whose records section is ``fields`` concatenated, CRC left wrong (verify off)."""
    good = build_batch([(b"a", b"b")], base_offset=0, timestamp=1)
    payload = b"".join(fields)
    header = bytearray(good[:61])
    header[8:12] = (49 + len(payload)).to_bytes(4, "big")
    return bytes(header) + payload


@FUZZ
@given(payload=st.binary(max_size=80), count=st.integers(-2, 5))
def test_fuzzed_record_sections_match_reference(payload: bytes, count: int) -> None:
    data = bytearray(_record_body([payload]))
    data[57:61] = count.to_bytes(4, "big", signed=True)
    data = bytes(data)
    ref = reference(data, verify_crc=False)
    for impl in IMPLS:
        same(outcome(data, impl, verify_crc=False), ref)
    same_columns(data, verify_crc=False)


def test_compiled_path_is_built_and_env_var_forces_pure(monkeypatch) -> None:
    """``pip install`` builds the extension where a compiler exists (.ci/run installs one); the variable disables it."""
    from kafkalog.records import column_builder, columns

    assert _compiled is not None, "kafkalog.records._columns was not built: pip install -e . needs a C compiler"
    monkeypatch.delenv("KAFKALOG_NO_EXTENSIONS", raising=False)
    assert columns._builder_factory("auto") is _compiled.ColumnBuilder
    monkeypatch.setenv("KAFKALOG_NO_EXTENSIONS", "1")
    assert columns._builder_factory("auto") is column_builder.PyColumnBuilder
    assert not columns.compiled_available()


def test_compiled_run_takes_plain_batches_and_declines_the_rest() -> None:
    """The C walker consumes uncompressed v2 batches itself and stops at anything else (left to read_batches)."""
    from crc32c import crc32c

    plain = b"".join(build_batch([(b"k", b"v" * i)], base_offset=i, timestamp=i) for i in range(5))
    other = build_batch([(b"k", b"z")], base_offset=5, timestamp=5, compression=CompressionType.GZIP)
    b = _compiled.ColumnBuilder()
    assert b.run(plain + other, 0, len(plain + other), True, crc32c, 1 << 40, 1 << 40) == len(plain)
    assert b.n_records == 5
    bad = bytearray(plain)
    bad[len(plain) - 2] ^= 1  # a value byte: CRC fails, records still decode
    b = _compiled.ColumnBuilder()
    last = list(read_batches(plain))[-1].position
    assert b.run(bytes(bad), 0, len(bad), True, crc32c, 1 << 40, 1 << 40) == last
    assert b.run(bytes(bad), last, len(bad), False, crc32c, 1 << 40, 1 << 40) == len(bad)
    assert b.n_records == 5


_header = st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8))
_record = st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300), st.lists(_header, max_size=3))


@FUZZ
@given(records=st.lists(_record, min_size=1, max_size=12), base=st.integers(0, (1 << 63) - 100),
       ts=st.integers(-(1 << 62), 1 << 62), flip=st.none() | st.tuples(st.integers(61, 5000), st.integers(1, 255)),
       log_append=st.booleans())  # fmt: skip
def test_fuzzed_records_decode_identically(records, base, ts, flip, log_append) -> None:
    """Well-formed records of every shape (unicode header keys, null/empty fields, huge offsets and timestamps),
    then optionally one flipped byte in the records section."""
    data = bytearray(build_batch(records, base_offset=base, timestamp=ts, log_append_time=ts + 5,
                                 timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else 0))  # fmt: skip
    if flip is not None and flip[0] < len(data):
        data[flip[0]] ^= flip[1]
    data = bytes(data)
    ref = reference(data, verify_crc=False)
    for impl in IMPLS:
        same(outcome(data, impl, verify_crc=False), ref)
    same_columns(data, verify_crc=False)


def test_compiled_column_memory_reuse_keeps_live_arrays_intact() -> None:
    """Freed columns' memory is reused by the next decode; arrays still alive are never touched."""
    big = b"".join(build_batch([(b"k%d" % i, bytes([i % 251]) * 1000)] * 30, base_offset=i * 30, timestamp=i)
                   for i in range(200))  # fmt: skip
    other = b"".join(build_batch([(b"x", bytes([(i * 7) % 251]) * 1500)] * 20, base_offset=i * 20, timestamp=i)
                     for i in range(200))  # fmt: skip
    keep = read_record_columns(big, implementation="compiled")
    snapshot = {k: v.copy() for k, v in keep.arrays.items()}
    for _ in range(3):
        tmp = read_record_columns(other, implementation="compiled")
        assert tmp.values() == read_record_columns(other, implementation="python").values()
        del tmp
        for c in iter_record_columns(big, max_records=500, implementation="compiled"):
            assert len(c) <= 500 + 30
    for k, v in keep.arrays.items():
        assert np.array_equal(v, snapshot[k]), k


def test_compiled_columns_grown_far_past_the_input_keep_their_bytes() -> None:
    """lz4 batches inflating ~100x grow the value column from a small reservation through the mapped sizes (moved,
    not copied, by mremap) and back into the pool: every byte must survive each move and each reuse."""
    data = b"".join(
        build_batch([(b"k%d" % j, bytes([(i + j) % 251]) * 1024) for j in range(40)], base_offset=i * 40,
                    timestamp=i, compression=CompressionType.LZ4)
        for i in range(500)
    )  # fmt: skip
    assert len(data) * 50 < 500 * 40 * 1024  # the value column outgrows the bytes it was reserved from
    expected = read_record_columns(data, implementation="python").values()
    for _ in range(3):
        cols = read_record_columns(data, implementation="compiled")
        assert len(cols) == 20_000
        assert cols.values() == expected
        del cols


_BAD_UTF8 = [b"\x80", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff", b"\xc3\xa9", b"\xf0\x9f\x98\x80"]


@pytest.mark.parametrize("tail", _BAD_UTF8)
def test_header_keys_ascii_runs_then_any_byte_decode_alike(tail: bytes) -> None:
    """Header keys of long ASCII runs with a valid or invalid UTF-8 sequence at every position: the compiled
    decoder's checks (word-at-a-time over ASCII) accept and refuse exactly what bytes.decode("utf-8") does."""
    for length in range(0, 27):
        for at in range(0, length + 1):
            key = b"k" * at + tail + b"x" * (length - at)
            # attributes, timestamp and offset deltas, null key, 1-byte value, one header
            body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(-1) + encode_varint(1) + b"v"
            body += encode_varint(1) + encode_varint(len(key)) + key + encode_varint(2) + b"hv"
            record = encode_varint(len(body)) + body
            data = bytearray(_record_body([record]))
            data[57:61] = (1).to_bytes(4, "big")
            data = bytes(data)
            ref = reference(data, verify_crc=False)
            for impl in IMPLS:
                same(outcome(data, impl, verify_crc=False), ref)
            same_columns(data, verify_crc=False)


_BATCH = st.fixed_dictionaries({
    "n": st.integers(1, 40), "producer_id": st.integers(-1, (1 << 63) - 1), "producer_epoch": st.integers(-1, 32767),
    "base_sequence": st.integers(-1, (1 << 31) - 100), "partition_leader_epoch": st.integers(-1, (1 << 31) - 1),
    "is_transactional": st.booleans(), "log_append": st.booleans(), "legacy": st.sampled_from([None, 0, 1]),
})  # fmt: skip


def _mixed_source(batches: list[dict]) -> bytes:
    out, offset = [], 0
    for i, b in enumerate(batches):
        recs = [(b"k%d" % j, b"v" * (j % 20), [("h", b"x")] if j % 3 == 0 else []) for j in range(b["n"])]
        if b["legacy"] is not None:
            if recs:
                out.append(build_legacy_batch([r[:2] for r in recs], magic=b["legacy"], base_offset=offset))
        else:
            out.append(build_batch(
                recs, base_offset=offset, timestamp=1000 + i, producer_id=b["producer_id"],
                producer_epoch=b["producer_epoch"], base_sequence=b["base_sequence"],
                partition_leader_epoch=b["partition_leader_epoch"], is_transactional=b["is_transactional"],
                timestamp_type=TimestampType.LOG_APPEND_TIME if b["log_append"] else TimestampType.CREATE_TIME,
                log_append_time=5000 if b["log_append"] else None))  # fmt: skip
        offset += max(b["n"], 1)
    return b"".join(out)


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
@settings(max_examples=EXAMPLES // 4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_BATCH, max_size=8), st.booleans())
def test_to_arrow_compiled_buffers_equal_numpy(monkeypatch: pytest.MonkeyPatch, batches: list[dict],
                                               binary_view: bool) -> None:  # fmt: skip
    """The per-record batch fields, timestamp type names and int32 offsets that _columns_arrow.h writes equal what
    numpy makes without the extension, batch sizes (empty ones included) and every field varying."""
    from kafkalog.records import columns

    cols = read_record_columns(_mixed_source(batches), binary_view=binary_view)
    table = cols.to_arrow()
    table.validate(full=True)
    with monkeypatch.context() as m:
        m.setattr(columns, "_compiled", None)
        assert table.equals(cols.to_arrow())


_CONSTANT_FIELDS = [
    {"producer_id": -1, "producer_epoch": -1, "base_sequence": -1, "partition_leader_epoch": -1},
    {"producer_id": 0, "producer_epoch": 0, "base_sequence": 0, "partition_leader_epoch": 0},
    {"producer_id": 7, "producer_epoch": -1, "base_sequence": -1, "partition_leader_epoch": 0x01010101},
    {"producer_id": -1, "producer_epoch": 3, "base_sequence": -1, "partition_leader_epoch": 5, "is_transactional": True},
]


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
@pytest.mark.parametrize("fields", _CONSTANT_FIELDS)
def test_to_arrow_constant_batch_fields_share_a_buffer(monkeypatch: pytest.MonkeyPatch, fields: dict) -> None:
    """Batch fields that hold one value through the table, its bytes one byte repeated, are slices of one buffer
    per byte; the table still equals numpy's per-record repeats, and other fields get their own buffers."""
    from kafkalog.records import columns

    data = b"".join(build_batch([(b"k", b"v" * i, [])] * (i + 1), base_offset=10 * i, timestamp=1000 + i, **fields)
                    for i in range(5))  # fmt: skip
    cols = read_record_columns(data)
    table = cols.to_arrow()
    table.validate(full=True)
    with monkeypatch.context() as m:
        m.setattr(columns, "_compiled", None)
        assert table.equals(cols.to_arrow())
    expected = {}  # column -> the byte its buffer repeats, or None
    for name in ("partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                 "is_control"):  # fmt: skip
        raw = cols.arrays[name][:1].tobytes()
        if name.startswith("is_"):
            raw = b"\xff" if raw != b"\x00" else b"\x00"
        expected[name] = raw[0] if raw.count(raw[:1]) == len(raw) else None
    address = {name: table[name].chunk(0).buffers()[1].address for name in expected}
    for x in expected:
        for y in expected:
            if x != y:
                assert (address[x] == address[y]) == (expected[x] is not None and expected[x] == expected[y]), (x, y)


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
def test_to_arrow_helpers_refuse_inconsistent_arrays() -> None:
    starts = np.array([0, 5, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="batch_start"):
        _compiled.repeat_batches(starts, 10, np.zeros(3, np.int64), 8)
    with pytest.raises(ValueError, match="batch_start"):
        _compiled.repeat_batches(np.array([0, 5], np.int64), 4, np.zeros(2, np.int64), 8)  # past the records
    with pytest.raises(ValueError, match="batch_start"):
        _compiled.repeat_batches(np.array([1], np.int64), 4, np.zeros(1, np.int64), 8)
    with pytest.raises(ValueError, match="one value"):
        _compiled.repeat_batches(np.array([0], np.int64), 4, np.zeros(1, np.int64), 3)
    with pytest.raises(ValueError, match="one value"):
        _compiled.repeat_batches(np.array([0], np.int64), 4, np.zeros(2, np.int64), 8)
    with pytest.raises(ValueError, match="without a name"):
        _compiled.repeat_names(np.array([0], np.int64), 4, np.array([5], np.int8), (b"a", b"b"))
    with pytest.raises(ValueError, match="int64"):
        _compiled.narrow_offsets(b"1234")

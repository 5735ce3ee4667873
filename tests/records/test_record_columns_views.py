"""``binary_view=True``: keys and values as Arrow binary_view columns that point into the source instead of copies.

The records must be exactly those of the copying decoder (and so of Kafka's manifests, which
tests/records/test_record_columns.py checks) on every golden file, on both implementations, with the same errors and
positions on bad bytes; the mapping must outlive the reader for as long as the arrays live.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkaLogError
from kafkalog.records import CompressionType, build_batch, iter_record_columns, read_record_columns
from kafkalog.records.columns import _compiled
from tests.conftest import GOLDEN, golden_segment_logs

IMPLS = ["python"] + (["compiled"] if _compiled is not None else [])


def _golden_logs() -> list[str]:
    return [str(p.relative_to(GOLDEN)) for p in golden_segment_logs()]


def as_binary(table: pa.Table) -> pa.Table:
    """The table with its binary_view key/value columns cast to binary (a logical, not physical, comparison)."""
    for name in ("key", "value"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table[name].cast(pa.binary()))
    return table


def outcome(source, **kw):
    try:
        cols = read_record_columns(source, **kw)
    except KafkaLogError as exc:
        return type(exc), str(exc)
    return cols.to_records(), cols.valid_bytes, cols.invalid_bytes, repr(cols.error)


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("rel", _golden_logs())
def test_golden_views_equal_copies(rel: str, impl: str) -> None:
    path = GOLDEN / rel
    copied = read_record_columns(path, implementation=impl)
    viewed = read_record_columns(path, implementation=impl, binary_view=True)
    table = viewed.to_arrow()
    table.validate(full=True)
    assert table.schema.field("key").type == pa.binary_view() and table.schema.field("value").type == pa.binary_view()
    assert as_binary(table).equals(copied.to_arrow())
    assert viewed.keys() == copied.keys() and viewed.values() == copied.values()
    assert viewed.to_records() == copied.to_records()
    assert (viewed.valid_bytes, viewed.invalid_bytes) == (copied.valid_bytes, copied.invalid_bytes)


def _segment(path: Path, compression: CompressionType = CompressionType.NONE) -> list[tuple]:
    recs = [(b"key-%03d-long-enough" % i if i % 3 else None, os.urandom(40 + i) if i % 5 else b"short", [])
            for i in range(60)]
    with open(path, "wb") as f:
        for b in range(0, 60, 10):
            f.write(build_batch(recs[b : b + 10], base_offset=b, compression=compression))
    return recs


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
def test_uncompressed_values_are_not_copied(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    recs = _segment(path)
    cols = read_record_columns(path, binary_view=True, implementation="compiled")
    # every field lies in the file: nothing copied, every long field points at buffer 0, the source
    assert len(cols.arrays["value_data"]) == 0 and len(cols.arrays["key_data"]) == 0
    fields = cols.arrays["value_views"].view(np.int32).reshape(-1, 4)
    long_ones = fields[:, 0] > 12
    assert long_ones.any() and (fields[long_ones, 2] == 0).all()
    assert cols.values() == [v for _, v, _ in recs] and cols.keys() == [k for k, _, _ in recs]


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
def test_compressed_values_are_copied_to_buffer_one(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    recs = _segment(path, CompressionType.ZSTD)
    cols = read_record_columns(path, binary_view=True, implementation="compiled")
    fields = cols.arrays["value_views"].view(np.int32).reshape(-1, 4)
    assert len(cols.arrays["value_data"]) > 0 and (fields[fields[:, 0] > 12, 2] == 1).all()
    assert cols.values() == [v for _, v, _ in recs]


@pytest.mark.parametrize("impl", IMPLS)
def test_arrays_outlive_the_reader_and_the_file(tmp_path: Path, impl: str) -> None:
    path = tmp_path / "00000000000000000000.log"
    recs = _segment(path)
    table = read_record_columns(path, binary_view=True, implementation=impl).to_arrow()
    reader = iter_record_columns(path, binary_view=True, implementation=impl, max_records=25)
    chunks = [c.to_arrow() for c in reader]
    reader.close()
    os.unlink(path)  # the mapping keeps the inode; nothing may point at freed memory
    gc.collect()
    assert table["value"].to_pylist() == [v for _, v, _ in recs]
    assert pa.concat_tables(chunks)["value"].to_pylist() == [v for _, v, _ in recs]
    assert [len(c) for c in chunks] == [30, 30]  # whole batches, ending once 25 records are reached


def test_bytes_source_stays_alive() -> None:
    data = bytearray(build_batch([(b"k" * 20, b"v" * 30)] * 3))
    cols = read_record_columns(bytes(data), binary_view=True)
    del data
    gc.collect()
    assert cols.values() == [b"v" * 30] * 3 and cols.to_arrow()["key"].to_pylist() == [b"k" * 20] * 3


@pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")
def test_fields_past_2_gib_are_copied(tmp_path: Path) -> None:
    """View offsets are 32-bit: batches that lie past 2 GiB of the source are copied (a sparse file here)."""
    path = tmp_path / "00000000000000000000.log"
    start = (1 << 31) + 4096
    batch = build_batch([(b"k" * 20, b"v" * 30)] * 3)
    with open(path, "wb") as f:
        f.truncate(start)
        f.seek(start)
        f.write(batch)
    cols = read_record_columns(path, position=start, binary_view=True, implementation="compiled")
    fields = cols.arrays["value_views"].view(np.int32).reshape(-1, 4)
    assert (fields[:, 2] == 1).all() and len(cols.arrays["value_data"]) == 90
    assert cols.values() == [b"v" * 30] * 3 and cols.valid_bytes == start + len(batch)


_BASE = b"".join(build_batch([(b"key-%d" % i, b"value-%d" % i * (i % 4 + 1), [("h", b"x")])] * 4, base_offset=4 * i,
                             compression=CompressionType.NONE if i % 2 else CompressionType.LZ4) for i in range(6))


@settings(max_examples=int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200")) // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_BASE) - 1), st.integers(0, 255)), max_size=4),
       st.integers(0, len(_BASE)))
def test_damaged_bytes_same_outcome_as_copies(flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(_BASE)
    for pos, val in flips:
        data[pos] = val
    data = bytes(data[:cut])
    for impl in IMPLS:
        for verify in (True, False):
            assert outcome(data, implementation=impl, verify_crc=verify, binary_view=True) == \
                outcome(data, implementation=impl, verify_crc=verify)

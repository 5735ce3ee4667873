"""The compiled builder's block pool (``_columns_mem.h``): chunked decoding reuses the memory of the chunks it
freed instead of faulting in fresh pages (the kernel's page zeroing was a tenth of an lz4 decode when it did
not), and reused memory never leaks one chunk's bytes into another."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from kafkalog.records import CompressionType, build_batch, iter_record_columns, read_record_columns
from kafkalog.records.native import compiled

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")

_WORDS = b"kafka log segment record value offset timestamp header producer "


def _lz4_source(batches: int) -> bytes:
    """``batches`` copies of one lz4 batch of 500 ~100 B text values (a header on every 4th record)."""
    recs = [(b"key-%05d" % i, (_WORDS * 3)[i % 7 : i % 7 + 100], [("h", b"x")] if i % 4 == 0 else [])
            for i in range(500)]  # fmt: skip
    return build_batch(recs, base_offset=0, timestamp=1, compression=CompressionType.LZ4) * batches


@pytest.mark.parametrize("max_records", [16384, 65536])
def test_chunked_decoding_takes_its_column_memory_from_the_pool(max_records: int) -> None:
    data = _lz4_source(300)  # 150,000 records: several chunks of either size
    gc.collect()
    compiled.mem_stats(True)  # an empty pool: what follows depends on this test alone
    first = [{k: v.copy() for k, v in c.arrays.items()} for c in iter_record_columns(data, max_records=max_records)]
    assert len(first) >= 3
    for _ in range(4):  # the first passes still settle which pooled block serves which column (a block outside
        # the 4x size window of a column's request is not taken, so a chunk may grow a fresh one until one fits)
        reused0, fresh0, _ = compiled.mem_stats()
        chunks = 0
        for i, c in enumerate(iter_record_columns(data, max_records=max_records)):
            for k, v in c.arrays.items():
                assert np.array_equal(v, first[i][k]), (i, k)
            chunks += 1
            del c
        reused1, fresh1, pooled = compiled.mem_stats()
        assert chunks == len(first)
    assert fresh1 == fresh0  # no column of 64 KiB or more took fresh memory in the last pass
    assert reused1 - reused0 >= 8 * chunks  # the per-record, key, value and scratch buffers of every chunk
    assert pooled > 0


def test_mem_stats_drain_empties_the_pool() -> None:
    for _ in iter_record_columns(_lz4_source(40), max_records=10000):
        pass
    assert compiled.mem_stats()[2] > 0
    assert compiled.mem_stats(True)[2] == 0


def _values_source(records: int) -> bytes:
    """Uncompressed batches of 100 records with ~100 B values (a whole-source read of it makes mapped columns)."""
    recs = [(b"key-%05d" % i, bytes([i]) * 100, [("h", b"x")] if i % 4 == 0 else []) for i in range(100)]
    return b"".join(build_batch(recs, base_offset=o, timestamp=1) for o in range(0, records, 100))


@pytest.mark.parametrize("binary_view", [False, True])
def test_whole_source_read_and_table_reuse_the_pool(binary_view: bool) -> None:
    data = _values_source(60_000)  # ~7.5 MiB: the value column is a mapping, the per-record ones are not
    gc.collect()
    compiled.mem_stats(True)
    first = read_record_columns(data, binary_view=binary_view).to_arrow()
    expected = first.to_pylist()[::997]
    del first
    held, cap = compiled.mem_pool()
    assert 0 < held <= cap
    reused0, fresh0, _ = compiled.mem_stats()
    again = read_record_columns(data, binary_view=binary_view).to_arrow()
    reused1, fresh1, _ = compiled.mem_stats()
    assert fresh1 == fresh0  # the columns and the table's buffers all came from what the first call freed
    assert reused1 - reused0 >= 10
    assert again.to_pylist()[::997] == expected  # reused memory holds this call's bytes only
    del again
    compiled.mem_stats(True)
    assert compiled.mem_pool()[0] == 0  # drained: the memory went back to the system


def test_pool_holds_at_most_its_cap() -> None:
    gc.collect()
    compiled.mem_stats(True)
    cap = compiled.mem_pool()[1]
    size = cap // 3 + (1 << 20)  # three of these are more than the pool may keep
    starts = np.zeros(1, dtype=np.int64)
    blocks = [compiled.repeat_batches(starts, size, bytes([i]), 1) for i in range(3)]
    assert [bytes(memoryview(b)[-3:]) for b in blocks] == [bytes([i]) * 3 for i in range(3)]
    del blocks
    held = compiled.mem_pool()[0]
    assert 0 < held <= cap
    assert compiled.mem_stats()[2] == 2  # two fit, the third was unmapped
    compiled.mem_stats(True)
    assert compiled.mem_pool()[0] == 0


def test_release_column_memory_empties_the_pool_and_says_how_much() -> None:
    from kafkalog.records import release_column_memory

    columns = read_record_columns(_values_source(20000))
    table = columns.to_arrow()
    del columns, table
    gc.collect()
    held, cap = compiled.mem_pool()
    assert 0 < held <= cap  # the whole-source read's columns came back to the pool
    assert release_column_memory() == held
    assert compiled.mem_pool()[0] == 0
    assert compiled.mem_stats()[2] == 0
    assert release_column_memory() == 0
    again = read_record_columns(_values_source(300))  # decoding still works from an empty pool
    assert again.arrays["offset"][-1] == 299

"""The compiled builder writes key/value/header offsets as int32 while they fit (what Arrow's binary and list layouts
take, so ``to_arrow()`` wraps them without a pass over them) and widens them to int64 in place once one would not:
the public arrays stay int64 with the values the pure builder gives, either way."""

from __future__ import annotations

import numpy as np
import pytest

from kafkalog.records import CompressionType, build_batch, build_legacy_batch, iter_record_columns, read_record_columns
from kafkalog.records.columns import _compiled
from tests.threads import run_threads

pytestmark = pytest.mark.skipif(_compiled is None, reason="the compiled decoder is not built")

_OFFSETS = ("key_offsets", "value_offsets", "header_offsets", "header_key_offsets", "header_value_offsets")


def _source() -> bytes:
    """Uncompressed, lz4 and legacy batches (the last two decoded apart from run()'s own loop), keys and values
    null or not, headers on some records."""
    out, offset = [], 0
    for i in range(12):
        recs = [(None if j % 5 == 0 else b"key-%d" % j, None if j % 7 == 3 else b"v" * (j * 3 % 40),
                 [(f"h{k}", None if k == 1 else b"x" * k) for k in range(j % 3)]) for j in range(20)]  # fmt: skip
        if i % 4 == 0:  # first: records added as objects widen the offsets too (put_offset)
            out.append(build_legacy_batch([r[:2] for r in recs], magic=1, base_offset=offset))
        else:
            codec = CompressionType.LZ4 if i % 4 == 2 else CompressionType.NONE
            out.append(build_batch(recs, base_offset=offset, timestamp=1000 + i, compression=codec))
        offset += len(recs)
    return b"".join(out)


def _assert_same_arrays(cols, pure) -> None:
    """Equal arrays, but for binary_view keys and values, which the compiled builder points into the source."""
    assert sorted(cols.arrays) == sorted(pure.arrays) and len(cols.arrays) == len(pure.arrays)
    assert cols.keys() == pure.keys() and cols.values() == pure.values() and cols.headers() == pure.headers()
    for name in pure.arrays:
        assert name in cols.arrays
        if cols.binary_view and name in ("key_views", "value_views", "key_data", "value_data"):
            continue
        assert cols.arrays[name].dtype == pure.arrays[name].dtype, name
        assert np.array_equal(cols.arrays[name], pure.arrays[name]), name


@pytest.mark.parametrize("binary_view", [False, True])
def test_offsets_are_int32_inside_and_int64_outside(binary_view: bool) -> None:
    data = _source()
    cols = read_record_columns(data, binary_view=binary_view)
    pure = read_record_columns(data, implementation="python", binary_view=binary_view)
    stored = [n for n in _OFFSETS if n in cols.arrays]
    assert all(cols.arrays.offsets(n).dtype == np.int32 for n in stored)
    table = cols.to_arrow()
    if not binary_view:  # the table's offsets are the decoder's own buffer, not a narrowed copy
        assert table.column("value").chunk(0).buffers()[1].address == cols.arrays.offsets("value_offsets").ctypes.data
    for name in stored:
        assert getattr(cols, name).dtype == np.int64  # widened on first access, once
        assert cols.arrays.offsets(name) is cols.arrays[name]
    _assert_same_arrays(cols, pure)
    assert table.equals(pure.to_arrow())


@pytest.mark.parametrize("limit", [0, 150, 700])
@pytest.mark.parametrize("binary_view", [False, True])
def test_offsets_widen_in_place_past_the_limit(limit: int, binary_view: bool) -> None:
    """With the int32 limit lowered, the builders widen at the first batch or record that could pass it (a run of
    batches, a decompressed payload, records added as objects, before or after a chunk boundary): the arrays and
    the table are the pure builder's."""
    data = _source()
    pure = read_record_columns(data, implementation="python", binary_view=binary_view)
    pure_chunks = list(iter_record_columns(data, max_records=50, implementation="python", binary_view=binary_view))
    old = _compiled.set_offset_limit(limit)
    try:
        cols = read_record_columns(data, binary_view=binary_view)
        chunks = list(iter_record_columns(data, max_records=50, binary_view=binary_view))
    finally:
        _compiled.set_offset_limit(old)
    assert all(cols.arrays.offsets(n).dtype == np.int64 for n in _OFFSETS if n in cols.arrays)
    _assert_same_arrays(cols, pure)
    assert cols.to_arrow().equals(pure.to_arrow())
    assert len(chunks) == len(pure_chunks) > 3
    for got, want in zip(chunks, pure_chunks, strict=True):
        _assert_same_arrays(got, want)
        assert got.to_arrow().equals(want.to_arrow())


def test_offset_limit_bounds() -> None:
    old = _compiled.set_offset_limit(5)
    try:
        assert _compiled.set_offset_limit(7) == 5
        with pytest.raises(ValueError):
            _compiled.set_offset_limit(-1)
        with pytest.raises(ValueError):
            _compiled.set_offset_limit(1 << 31)
    finally:
        _compiled.set_offset_limit(old)
    assert old == (1 << 31) - 1


def test_threads_widening_the_same_offsets_at_once_all_get_them() -> None:
    """``arrays`` widens an int32 offset column on first access; threads that ask for it together must each get
    the int64 column, not a KeyError from a column another thread was widening."""
    import threading

    from kafkalog.records import build_batch, native, read_record_columns

    if native.compiled is None:
        pytest.skip("kafkalog.records._columns was not built: nothing is stored as int32")
    data = b"".join(build_batch([(b"k%d" % i, b"v" * 50)] * 100, base_offset=100 * i) for i in range(200))
    for _ in range(20):
        cols = read_record_columns(data)
        assert "value_offsets" in cols.arrays.narrow  # the compiled builder stored it as int32
        got = []
        barrier = threading.Barrier(4)

        def read(_: int, cols=cols, got=got, barrier=barrier) -> None:
            barrier.wait()
            got.append(cols.arrays["value_offsets"])  # a KeyError here: the failure this test looks for

        errors = run_threads(read, 4)
        assert not errors, errors
        assert len(got) == 4 and all(g.dtype == np.int64 and g[-1] == 20000 * 50 for g in got)
        assert all(g is got[0] for g in got[1:]) or all(np.array_equal(g, got[0]) for g in got)

"""The compiled record walk's CPU paths (``_columns_records.h``: ``avx2`` on x86-64 with AVX2 + BMI1/2, ``portable``
everywhere): each gives the portable path's columns, offsets width, views and outcome (columns, positions, errors)
on every golden segment, on random batches of many sizes whose varints take every length, on damaged bytes that
reach the walk (CRC not checked), with int64 offsets, with views, through chunks; ``KAFKALOG_WALK_PATH`` selects a
path at import, naming one this CPU lacks warns and uses the best."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.records import CompressionType, Record, build_batch, iter_record_columns, read_record_columns
from kafkalog.records.native import compiled
from tests.conftest import GOLDEN, golden_segment_logs
from tests.records.test_record_columns import _segment

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")
PATHS = compiled.walk_paths() if compiled is not None else []
BEST = PATHS[0] if PATHS else None
ALL_PATHS = ["avx2", "portable"]


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_paths_best_first_and_portable_always_runs() -> None:
    assert PATHS[-1] == "portable" and set(PATHS) <= set(ALL_PATHS)
    assert compiled.walk_path() == BEST
    if os.uname().machine == "x86_64" and {"avx2", "bmi1", "bmi2"} <= _cpu_flags():
        assert PATHS[0] == "avx2"


def test_unknown_or_missing_path_is_refused() -> None:
    with pytest.raises(ValueError, match="no record walk path"):
        compiled.set_walk_path("avx1024")
    for name in (p for p in ALL_PATHS if p not in PATHS):
        with pytest.raises(ValueError, match="cannot run"):
            compiled.set_walk_path(name)
    assert compiled.walk_path() == BEST
    assert compiled.set_walk_path("auto") == BEST


def _import_with(value: str) -> subprocess.CompletedProcess:
    code = "from kafkalog.records.native import compiled; print(compiled.walk_path())"
    env = dict(os.environ, KAFKALOG_WALK_PATH=value)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)


@pytest.mark.parametrize("name", PATHS)
def test_environment_variable_selects_a_path(name: str) -> None:
    out = _import_with(name)
    assert out.stdout.strip() == name
    assert "RuntimeWarning" not in out.stderr


@pytest.mark.parametrize("value", ["avx1024", *[p for p in ALL_PATHS if p not in PATHS]])
def test_environment_variable_naming_an_unusable_path_warns_and_uses_the_best(value: str) -> None:
    out = _import_with(value)
    assert out.stdout.strip() == BEST
    assert f"RuntimeWarning: KAFKALOG_WALK_PATH={value}:" in out.stderr and f"using {BEST}" in out.stderr


def _outcome(source, **kw):
    """Every array (dtype and bytes), the positions and the error of one decode, or the exception raised."""
    try:
        cols = read_record_columns(source, implementation="compiled", **kw)
    except Exception as exc:  # noqa: BLE001 -- compared by type and message
        return type(exc), str(exc)
    arrays = {k: (v.dtype.str, v.tobytes()) for k, v in cols.arrays.items()}  # int64 offsets: widened or not
    return arrays, cols.valid_bytes, cols.invalid_bytes, repr(cols.error), len(cols)


def _chunks(source, **kw):
    try:
        reader = iter_record_columns(source, implementation="compiled", max_records=37, **kw)
        out = [{k: v.tobytes() for k, v in c.arrays.items()} for c in reader]
    except Exception as exc:  # noqa: BLE001
        return type(exc), str(exc)
    return out, reader.valid_bytes, repr(reader.error)


def _on_each_path(fn, *args, **kw) -> dict:
    out = {}
    try:
        for name in PATHS:
            assert compiled.set_walk_path(name) == name
            out[name] = fn(*args, **kw)
    finally:
        compiled.set_walk_path("auto")
    return out


def _assert_paths_agree(source, *, chunks: bool = False, **kw) -> None:
    results = _on_each_path(_chunks if chunks else _outcome, source, **kw)
    for name in PATHS[:-1]:
        assert results[name] == results["portable"], name


def _random_segment(seed: int, n_batches: int, max_value: int, compression=CompressionType.NONE) -> bytes:
    """Batches of 1-300 records: null, empty, short (inline copies) and long keys and values, headers with null
    values, offset and timestamp deltas whose varints take 1 to 5 (10) bytes."""
    rnd = random.Random(seed)
    parts, offset, ts = [], 0, 1_700_000_000_000
    for _ in range(n_batches):
        recs = []
        count = rnd.randint(1, 300)
        step = min(rnd.choice([1, 1, 1, 70, 9000, 1 << 22, 1 << 29]), ((1 << 31) - 1) // count)  # int32 deltas
        for j in range(count):
            key = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 3, 12, 13, 16, 17, 40, 200]))
            size = rnd.choice([0, 1, 12, 13, 15, 16, 17, 63, 64, 100, 127, 128, 129, 1024, rnd.randint(0, max_value)])
            value = None if rnd.random() < 0.1 else rnd.randbytes(min(size, max_value))
            headers = [(f"h{h}" * rnd.randint(1, 9), None if h == 2 else rnd.randbytes(h * 5)) for h in
                       range(rnd.choice([0, 0, 0, 1, 3]))]  # fmt: skip
            recs.append(Record(offset + j * step, ts + rnd.choice([0, 5, 100, 70_000, 1 << 40]) * (j % 4), key, value,
                               headers))  # fmt: skip
        parts.append(build_batch(recs, base_offset=offset, compression=compression))
        offset += len(recs) * step
        ts += 1
    return b"".join(parts)


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
@pytest.mark.parametrize("log", golden_segment_logs(), ids=lambda p: str(p.relative_to(GOLDEN)))
def test_every_path_agrees_on_golden_segments(log) -> None:
    for kw in ({}, {"binary_view": True}, {"verify_crc": False}):
        _assert_paths_agree(log, **kw)
    _assert_paths_agree(log, chunks=True)


@pytest.mark.parametrize("max_value", [16, 130, 2000, 20_000])
@pytest.mark.parametrize("seed", range(3))
def test_every_path_agrees_on_random_batches(seed: int, max_value: int, tmp_path) -> None:
    data = _random_segment(seed, 25, max_value)
    path = tmp_path / "r.log"
    path.write_bytes(data)
    assert len(read_record_columns(data)) > 25
    for source in (data, path):
        for kw in ({}, {"binary_view": True}):
            _assert_paths_agree(source, **kw)
    _assert_paths_agree(path, chunks=True, binary_view=True)


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD, CompressionType.GZIP])
def test_every_path_agrees_on_decompressed_payloads(codec) -> None:
    data = _random_segment(7, 12, 3000, codec)
    for kw in ({}, {"binary_view": True}):
        _assert_paths_agree(data, **kw)


def test_every_path_agrees_with_int64_offsets() -> None:
    data = _random_segment(11, 20, 500)
    old = compiled.set_offset_limit(3000)  # widened after a few batches
    try:
        results = _on_each_path(_outcome, data)
    finally:
        compiled.set_offset_limit(old)
    assert all(dt == "<i8" for dt, _ in (results["portable"][0][k] for k in ("key_offsets", "value_offsets")))
    for name in PATHS:
        assert results[name] == results["portable"], name


def test_every_path_agrees_on_mixed_magics_and_codecs() -> None:
    data = _segment(40)
    for kw in ({}, {"binary_view": True}):
        _assert_paths_agree(data, **kw)
    _assert_paths_agree(data, chunks=True)


_BASE = _random_segment(5, 4, 300)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.integers(61, len(_BASE) - 1), st.integers(1, 255)), min_size=1, max_size=4),
       cut=st.integers(0, 200), views=st.booleans())  # fmt: skip
def test_every_path_agrees_on_damaged_records(flips, cut: int, views: bool) -> None:
    """Damage behind unchecked CRCs reaches the walk: each path declines (or takes) the same batches."""
    data = bytearray(_BASE)
    for at, x in flips:
        data[at] ^= x
    source = bytes(data[: len(data) - cut])
    _assert_paths_agree(source, verify_crc=False, binary_view=views)


def test_each_path_decodes_the_same_records_as_python() -> None:
    data = _random_segment(3, 10, 1500)
    pure = read_record_columns(data, implementation="python").to_records()
    for name in PATHS:
        compiled.set_walk_path(name)
        try:
            got = read_record_columns(data, implementation="compiled").to_records()
        finally:
            compiled.set_walk_path("auto")
        assert got == pure, name
        assert np.array_equal(read_record_columns(data).offset, np.array([r.offset for r in pure]))

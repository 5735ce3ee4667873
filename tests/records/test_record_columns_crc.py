"""The compiled decoder's own CRC32C (``_columns_crc*.h``): every path this CPU runs (avx512, avx2, sse42 on x86-64;
portable everywhere) equals the crc32c package's at every length and alignment, on random and constant bytes and
on every batch of the golden logs; the decoder and the scan give the same columns, scans and errors with each path
and with the package's function (``set_hw_crc(False)``); ``KAFKALOG_CRC32C_PATH`` selects a path at import."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.records import read_batches, read_record_columns, scan_batches
from kafkalog.records.native import compiled
from tests.conftest import GOLDEN, golden_segment_logs
from tests.records.test_record_columns import _segment

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")
PATHS = compiled.crc_paths() if compiled is not None else []
BEST = PATHS[0] if PATHS else None
ALL_PATHS = ["avx512", "avx2", "sse42", "arm-pmull", "arm-crc", "portable"]


def _path_params(names=ALL_PATHS) -> list:
    """Every path, those this CPU (or build) lacks skipped with that reason."""
    return [pytest.param(p, marks=pytest.mark.skipif(p not in PATHS, reason=f"this CPU (or build) cannot run {p}"))
            for p in names]  # fmt: skip


@pytest.fixture(params=_path_params(), ids=ALL_PATHS)
def path(request):
    """The decoder on one CRC32C path for the test's duration, then back to the best."""
    assert compiled.set_crc_path(request.param) == request.param
    assert compiled.crc_path() == request.param
    yield request.param
    assert compiled.set_crc_path("auto") == BEST


@pytest.fixture
def hw_off():
    """The package's function for the test's duration, then back to C."""
    assert compiled.set_hw_crc(False) is False
    yield
    assert compiled.set_hw_crc(True) is True


def test_the_best_path_is_the_default_and_portable_always_runs() -> None:
    assert PATHS[-1] == "portable"
    assert compiled.crc_path() == BEST
    if os.uname().machine in ("x86_64", "AMD64"):
        assert "sse42" in PATHS  # every x86-64 CPU of the last 15 years (SSE4.2 and PCLMULQDQ)


def test_every_length_and_alignment_matches_package(path: str) -> None:
    # every length 0..4100 (across the avx512 fold's 256-byte first load and 64-byte blocks, avx2's 128 and 32 and
    # its hybrid's 272-byte units from 544, the pmull fold's 64 and 16, the 3 x 256 interleaved streams) from 8
    # alignments (3 past 1024 bytes), then lengths across the 3 x 4096 streams and the hybrid's 17,408-byte chunks
    data = os.urandom(40_000)
    for n in range(0, 4101):
        for off in range(8) if n <= 1024 else (0, 3, 5):
            mv = memoryview(data)[off : off + n]
            assert compiled.hw_crc32c(mv, path) == crc32c(mv), (n, off)
    for n in (12287, 12288, 12289, 16384, 16384 + 77, 17_408, 17_952, 24_583, 34_816, 36_871, 39_990):
        for off in range(8):
            mv = memoryview(data)[off : off + n]
            assert compiled.hw_crc32c(mv) == crc32c(mv), (n, off)  # the active path: the fixture's


@pytest.mark.parametrize("name", PATHS)
@settings(max_examples=100, deadline=None, database=None)
@given(data=st.binary(max_size=20_000), cut=st.integers(0, 7))
def test_every_path_matches_package_on_random_bytes(name: str, data: bytes, cut: int) -> None:
    assert compiled.hw_crc32c(data[cut:], name) == crc32c(data[cut:])


@pytest.mark.parametrize("byte", [0x00, 0xFF, 0x80, 0x01])
def test_every_path_matches_package_on_constant_bytes(byte: int) -> None:
    """All-zero and all-ones inputs (where a wrong folding constant cancels least visibly) at folding lengths."""
    for n in (32, 64, 128, 256, 320, 1000, 16384, 65_536 + 13):
        data = bytes([byte]) * n
        for name in PATHS:
            assert compiled.hw_crc32c(data, name) == crc32c(data), (name, n)


def test_unknown_or_missing_path_is_refused() -> None:
    with pytest.raises(ValueError, match="no CRC32C path"):
        compiled.set_crc_path("avx1024")
    with pytest.raises(ValueError, match="no CRC32C path"):
        compiled.hw_crc32c(b"abc", "avx1024")
    missing = [p for p in ALL_PATHS if p not in PATHS]
    for name in missing:
        with pytest.raises(ValueError, match="cannot run"):
            compiled.set_crc_path(name)
    assert compiled.crc_path() == BEST


def _import_with(value: str) -> subprocess.CompletedProcess:
    code = ("from kafkalog.records.native import compiled; import kafkalog.cleaner._cleaner; "
            "print(compiled.crc_path())")  # fmt: skip
    env = dict(os.environ, KAFKALOG_CRC32C_PATH=value)
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
    assert f"RuntimeWarning: KAFKALOG_CRC32C_PATH={value}:" in out.stderr
    assert f"using {BEST}" in out.stderr


def _golden_logs() -> list:
    return golden_segment_logs()


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
def test_every_path_matches_package_on_every_golden_batch() -> None:
    checked = matching = 0
    for log in _golden_logs():
        data = log.read_bytes()
        for name in PATHS:
            assert compiled.hw_crc32c(data, name) == crc32c(data)
        for batch in read_batches(data, validate=False):
            if batch.magic == 2:
                body = batch.raw[21:]
                crc = crc32c(body)
                assert [compiled.hw_crc32c(body, name) for name in PATHS] == [crc] * len(PATHS)
                checked += 1
                matching += crc == batch.crc  # some golden logs hold damaged batches on purpose
    assert checked > matching > 0


def test_switched_off_raises_and_reports_off(hw_off) -> None:
    with pytest.raises(RuntimeError):
        compiled.hw_crc32c(b"abc")
    assert compiled.set_hw_crc(False) is False
    assert compiled.hw_crc32c(b"abc", "portable") == crc32c(b"abc")  # a named path still runs


def _results(source):
    """Columns (or the error) and the compiled scan of ``source``."""
    try:
        cols = read_record_columns(source)
        out = ({k: v.copy() for k, v in cols.arrays.items()}, cols.valid_bytes, cols.invalid_bytes, str(cols.error))
    except Exception as exc:  # noqa: BLE001 -- compared by type and message below
        out = (type(exc), str(exc))
    scan = scan_batches(source)
    return out, (scan.positions.tolist(), scan.crc_ok.tolist(), scan.valid_bytes, str(scan.error))


def _same(a, b) -> None:
    (ca, sa), (cb, sb) = a, b
    assert sa == sb
    assert type(ca[0]) is type(cb[0])
    if isinstance(ca[0], dict):
        assert ca[1:] == cb[1:]
        assert ca[0].keys() == cb[0].keys()
        for name in ca[0]:
            assert ca[0][name].dtype == cb[0][name].dtype and np.array_equal(ca[0][name], cb[0][name]), name
    else:
        assert ca == cb


def _sources() -> list:
    """Built segments of random bytes and the golden logs, with ids that do not depend on the random bytes
    (every xdist worker must collect the same ids)."""
    data = bytearray(_segment(12))
    victim = list(read_batches(bytes(data)))[6]
    data[victim.position + 70] ^= 0x40  # a CRC mismatch in the middle
    built = [pytest.param(_segment(20), id="built-20-batches"), pytest.param(bytes(data), id="built-crc-mismatch")]
    return built + [pytest.param(path, id=path.name) for path in _golden_logs()]


@pytest.mark.parametrize("source", _sources())
def test_every_path_and_the_fallback_give_identical_columns_and_scans(source, request) -> None:
    results = {}
    for name in PATHS:
        compiled.set_crc_path(name)
        results[name] = _results(source)
    compiled.set_crc_path("auto")
    request.getfixturevalue("hw_off")
    fallback = _results(source)
    for name in PATHS:
        _same(results[name], fallback)

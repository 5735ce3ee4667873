"""The compiled decoder's own CRC32C (SSE4.2, ``_columns_crc.h``) equals the crc32c package's on random inputs and
on every batch of the golden logs, and the fallback to the package's function (no SSE4.2, or switched off) gives
the same columns, scans and errors."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import GOLDEN, golden_segment_logs
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from test_record_columns import _segment

from kafkalog.records import read_batches, read_record_columns, scan_batches
from kafkalog.records.native import compiled

pytestmark = pytest.mark.skipif(compiled is None, reason="kafkalog.records._columns was not built")
HW = compiled is not None and compiled.set_hw_crc(True)
FOLD = compiled is not None and compiled.set_crc_fold(True)
needs_hw = pytest.mark.skipif(not HW, reason="this CPU has no SSE4.2 crc32 instruction")
FOLDING = [False, pytest.param(True, marks=pytest.mark.skipif(not FOLD, reason="this CPU has no AVX-512 VPCLMULQDQ"))]


@pytest.fixture(params=FOLDING, ids=["crc32-streams", "clmul-fold"])
def fold(request):
    """The C CRC32C with and without its AVX-512 folding of long inputs, then back to what the CPU allows."""
    assert compiled.set_crc_fold(request.param) is request.param
    yield request.param
    assert compiled.set_crc_fold(True) is FOLD


@pytest.fixture
def hw_off():
    """The package's function for the test's duration, then back to what the CPU allows."""
    assert compiled.set_hw_crc(False) is False
    yield
    assert compiled.set_hw_crc(True) is HW


@needs_hw
def test_hw_crc_matches_package_at_every_length_and_alignment(fold: bool) -> None:
    # lengths across the 3 x 256 and 3 x 4096 interleaved blocks and their tails, and across the folding's 256-byte
    # first load, 256-byte rounds and 64-byte blocks, every 8-byte alignment
    data = os.urandom(40_000)
    lengths = list(range(0, 70)) + list(range(250, 340)) + [447, 448, 511, 512, 513, 575, 576, 577, 767, 768, 769,
                                                            1535, 1536, 12287, 12288, 12289, 16384, 24_583, 36_871,
                                                            39_990]  # fmt: skip
    for n in lengths:
        for off in range(8):
            mv = memoryview(data)[off : off + n]
            assert compiled.hw_crc32c(mv) == crc32c(mv), (n, off)


@needs_hw
@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=20_000), st.integers(0, 7))
def test_hw_crc_matches_package_on_random_bytes(data: bytes, cut: int) -> None:
    assert compiled.hw_crc32c(data[cut:]) == crc32c(data[cut:])


@needs_hw
@pytest.mark.parametrize("byte", [0x00, 0xFF, 0x80, 0x01])
def test_hw_crc_matches_package_on_constant_bytes(fold: bool, byte: int) -> None:
    """All-zero and all-ones inputs (where a wrong folding constant cancels least visibly) at folding lengths."""
    for n in (256, 320, 1000, 16384, 65_536 + 13):
        data = bytes([byte]) * n
        assert compiled.hw_crc32c(data) == crc32c(data), n


def _golden_logs() -> list:
    return golden_segment_logs()


@needs_hw
@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
def test_hw_crc_matches_package_on_every_golden_batch() -> None:
    checked = matching = 0
    for path in _golden_logs():
        data = path.read_bytes()
        assert compiled.hw_crc32c(data) == crc32c(data)
        for batch in read_batches(data, validate=False):
            if batch.magic == 2:
                body = batch.raw[21:]
                crc = compiled.hw_crc32c(body)
                assert crc == crc32c(body)
                checked += 1
                matching += crc == batch.crc  # some golden logs hold damaged batches on purpose
    assert checked > matching > 0


def test_switched_off_raises_and_reports_off(hw_off) -> None:
    with pytest.raises(RuntimeError):
        compiled.hw_crc32c(b"abc")
    assert compiled.set_hw_crc(False) is False


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
    data = bytearray(_segment(12))
    victim = list(read_batches(bytes(data)))[6]
    data[victim.position + 70] ^= 0x40  # a CRC mismatch in the middle
    return [_segment(20), bytes(data)] + _golden_logs()


@pytest.mark.parametrize("source", _sources(), ids=lambda s: s.name if hasattr(s, "name") else f"{len(s)}B")
def test_fallback_gives_identical_columns_and_scans(source, request) -> None:
    with_hw = _results(source)
    request.getfixturevalue("hw_off")
    _same(with_hw, _results(source))

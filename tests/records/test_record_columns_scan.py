"""The compiled length-chain walk behind ``scan_batches`` / ``verify_log_file`` gives exactly the pure-Python scan's
result (positions, headers, CRC flags, valid bytes, error) on every golden log and on damaged or fuzzed bytes."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.records import CompressionType, build_batch, build_legacy_batch, native, scan_batches
from tests.conftest import GOLDEN, golden_segment_logs

EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))


def _scan_both(source, monkeypatch, **kw):
    results = []
    for off in ("", "1"):
        monkeypatch.setenv("KAFKALOG_NO_EXTENSIONS", off)
        assert native.available() == (off == "")
        results.append(scan_batches(source, **kw))
    monkeypatch.delenv("KAFKALOG_NO_EXTENSIONS")
    return results


def _same_scan(a, b) -> None:
    assert np.array_equal(a.positions, b.positions)
    assert np.array_equal(a.sizes, b.sizes)
    assert a.headers.tobytes() == b.headers.tobytes()
    assert np.array_equal(a.crc_ok, b.crc_ok)
    assert (a.valid_bytes, a.invalid_bytes, a.legacy_rows) == (b.valid_bytes, b.invalid_bytes, b.legacy_rows)
    assert type(a.error) is type(b.error) and str(a.error) == str(b.error)


def _golden_logs() -> list[str]:
    return [str(p.relative_to(GOLDEN)) for p in golden_segment_logs()]


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
@pytest.mark.parametrize("rel", _golden_logs())
def test_golden_scans_identical(rel: str, monkeypatch) -> None:
    assert native.compiled is not None, "kafkalog.records._columns was not built"
    for kw in ({}, {"stop_at_bad_crc": True}, {"check_crc": False}):
        _same_scan(*_scan_both(GOLDEN / rel, monkeypatch, **kw))


_BASE = b"".join(
    build_batch([(b"k", os.urandom(i * 13 % 200))] * (1 + i % 4), base_offset=10 * i, timestamp=i,
                compression=list(CompressionType)[i % 5])  # fmt: skip
    for i in range(12)
) + build_legacy_batch([(b"a", b"b")], magic=1, base_offset=200, timestamp=3)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture],
                derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None)  # fmt: skip


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, len(_BASE) - 1), st.integers(0, 255)), max_size=4),
       cut=st.integers(0, len(_BASE)), start=st.integers(0, 200))  # fmt: skip
def test_fuzzed_scans_identical(edits, cut, start, monkeypatch) -> None:
    data = bytearray(_BASE)
    for pos, val in edits:
        data[pos] = val
    data = bytes(data[:cut])
    position = min(start, len(data))
    _same_scan(*_scan_both(data, monkeypatch, position=position))
    _same_scan(*_scan_both(memoryview(data), monkeypatch, position=position, stop_at_bad_crc=True))

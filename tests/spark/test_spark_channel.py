"""A task that cannot reach the driver's channel still writes its metrics, and says once where they went."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from kafkalog.spark import channel  # noqa: E402
from kafkalog.spark.datasource import _write_metrics, read_scan_metrics  # noqa: E402
from kafkalog.spark.scan import ScanMetrics  # noqa: E402


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_unreachable_channel_writes_locally_and_warns_once(tmp_path: Path, caplog, monkeypatch) -> None:
    monkeypatch.setattr(channel, "CONNECT_TIMEOUT", 1.0)
    monkeypatch.setattr(channel, "_UNREACHABLE_WARNED", set())
    port = _closed_port()
    address = ("127.0.0.1", port, "token")
    mdir = tmp_path / "metrics"
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        for i in range(3):
            _write_metrics(str(mdir), ScanMetrics(segment=f"seg-{i}", batches_read=2, records_returned=5), address)
    assert read_scan_metrics(str(mdir))["segments"] == 3
    assert read_scan_metrics(str(mdir))["records_returned"] == 15
    warnings = [r.getMessage() for r in caplog.records if r.name == "kafkalog.spark"]
    assert len(warnings) == 1, warnings
    assert f"127.0.0.1:{port} is unreachable" in warnings[0] and str(mdir) in warnings[0]


def test_no_channel_is_silent(tmp_path: Path, caplog) -> None:
    """A session the source was not registered with has no channel: writing locally is then the only way, and not
    a fault worth a warning."""
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        _write_metrics(str(tmp_path), ScanMetrics(segment="s", records_returned=1), None)
    assert read_scan_metrics(str(tmp_path))["records_returned"] == 1
    assert not [r for r in caplog.records if r.name == "kafkalog.spark"]

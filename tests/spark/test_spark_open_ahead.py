"""The DataSource's tasks open Aiven tiered segments ahead of the one they scan (``kafkalog.spark.open_ahead``):
the rows of a serial run, each segment opened once, a bounded number of opens in flight.

Aiven's golden bucket read by the DataSource's reader itself, in this process (no session: the tasks' code path),
with ``AivenSegment.open`` slowed down as a bucket's round trips would."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.aiven_writer import AIVEN
from tests.conftest import needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = needs_golden

VARIANT = AIVEN / "variants" / "encrypted-zstd-chunk256"


def _rows(root: Path, **options: str) -> list[dict]:
    from kafkalog.spark.datasource import KafkaLogReader

    reader = KafkaLogReader({"path": str(root / "remote"), "rsmConfig": str(root / "rsm.properties"),
                             "minPartitions": "1", **options}, None, 1)  # fmt: skip
    parts = reader.partitions()
    assert len(parts) == 1  # one task reads the five segments one after another
    return [r for part in parts for batch in reader.read(part) for r in batch.to_pylist()]


@pytest.mark.parametrize("options", [{}, {"startingOffsets": "30", "endingOffsets": "90"}])
def test_a_task_opens_its_segments_ahead_once_each_with_the_rows_of_a_serial_run(monkeypatch, options) -> None:
    import kafkalog.spark.datasource as ds
    from kafkalog.archive.tiered import aiven
    from tests.archive.test_tiered_open_ahead import _SlowOpens

    with monkeypatch.context() as m:  # each segment opened where it is scanned (for its indexes, for its .log)
        m.setattr(ds, "opened_ahead", lambda parts, options, rsm: (None for _ in itertools.count()))
        serial = _rows(VARIANT, **options)
    slow = _SlowOpens(monkeypatch)
    scanned_at: list[int] = []
    real = ds.scan_segment

    def scan(reader, part, m, opened=None):
        scanned_at.append(slow.started)
        return real(reader, part, m, opened)

    monkeypatch.setattr(ds, "scan_segment", scan)
    ahead = _rows(VARIANT, **options)
    assert ahead == serial
    offsets = [r["offset"] for r in ahead]
    assert offsets == (list(range(105)) if not options else list(range(30, 90)))
    n = len(scanned_at)
    assert n >= 2
    planned = slow.started - n  # the driver's check of the rsm config: one open
    assert planned == 1 and 2 <= slow.max_in_flight <= aiven.OPEN_AHEAD  # each scanned segment opened once
    # while one segment is scanned the next ones are being opened, never more than OPEN_AHEAD past it
    assert scanned_at[0] - planned >= 2
    assert all(s - planned <= k + 1 + aiven.OPEN_AHEAD for k, s in enumerate(scanned_at))

"""Iceberg sync with the decode in Spark tasks: the same rows as in process, one snapshot, corruption refused."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")
pytest.importorskip("pyspark")

from kafkalog.errors import CorruptRecordError  # noqa: E402
from kafkalog.iceberg import sync  # noqa: E402
from tests.conftest import GOLDEN, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_errors import _corrupt_copy  # noqa: E402
from tests.iceberg.test_iceberg_sync import CASES, expected, open_table  # noqa: E402
from tests.iceberg_expect import table_rows  # noqa: E402

pytestmark = needs_golden


def test_spark_sync_equals_the_consumer_view_in_one_snapshot(tmp_path, spark):
    logdir = tmp_path / "logdir"
    for case in CASES:
        shutil.copytree(GOLDEN / "logdir" / case, logdir / case)
    steps = []
    result = sync([logdir], "kafka.history", warehouse=tmp_path / "wh", spark=spark,
                  on_progress=lambda *a: steps.append(a))  # fmt: skip
    assert result.engine == "spark"
    table = open_table(tmp_path / "wh")
    want = sorted((r for c in CASES for r in expected(c)), key=lambda r: (r[0], r[1], r[2]))
    assert table_rows(table) == want and result.rows == len(want)
    assert len(table.metadata.snapshots) == 1
    assert [s[0] for s in steps][-1] == "commit" and any(s[0] == "write" for s in steps)
    again = sync([logdir], "kafka.history", warehouse=tmp_path / "wh", spark=spark)
    assert again.snapshot_id is None


def test_spark_sync_of_a_corrupt_segment_fails_and_leaves_no_file(tmp_path, spark):
    part, log = _corrupt_copy(tmp_path)
    shutil.copytree(GOLDEN / "logdir" / "golden-gzip-0", part.parent / "golden-gzip-0")
    with pytest.raises(CorruptRecordError) as info:
        sync([part.parent], "kafka.history", warehouse=tmp_path / "wh", spark=spark)
    assert str(log) in str(info.value)
    assert open_table(tmp_path / "wh").current_snapshot() is None
    assert not list((tmp_path / "wh").rglob("*.parquet"))

"""The DataSource on corrupt segments: ``onCorrupt=fail`` fails the job after one attempt although the session
allows retries (``local[1,4]``: four attempts per task, as a cluster's ``spark.task.maxFailures``), and
``onCorrupt=skip`` keeps every valid batch after a bad one and reports what it dropped on the driver.

One session for the module; golden-none-0 with one batch's CRC broken.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.spark_cluster import fresh_session

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark, needs_golden]

CASE = "golden-none-0"
BAD = 4  # the batch whose CRC is broken


@pytest.fixture(scope="module")
def retrying_spark():
    from kafkalog.spark import register

    session = fresh_session("local[1,4]", "kafkalog-corrupt-tests")
    assert session.sparkContext.getConf().get("spark.master") == "local[1,4]"
    register(session)
    yield session
    session.stop()


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, dict, list[dict]]:
    """A copy of golden-none-0 whose 5th batch fails its CRC; (dir, that batch, every batch)."""
    assert GOLDEN is not None
    pdir = tmp_path / CASE
    shutil.copytree(GOLDEN / "logdir" / CASE, pdir)
    batches = load_manifest(f"manifests/{CASE}.json")["segments"][0]["log"]["batches"]
    bad = batches[BAD]
    log = pdir / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[bad["position"] + bad["sizeInBytes"] - 3] ^= 0xFF
    log.write_bytes(bytes(data))
    return pdir, bad, batches


def test_fail_fails_the_job_after_one_attempt(retrying_spark, damaged, tmp_path: Path) -> None:
    from kafkalog.spark.datasource import read_scan_metrics

    pdir, bad, _ = damaged
    metrics = tmp_path / "metrics"
    df = retrying_spark.read.format("kafkalog").option("metricsDir", str(metrics)).load(str(pdir))
    with pytest.raises(Exception) as err:
        df.count()
    message = str(err.value)
    assert "CorruptRecordError" in message and "00000000000000000000.log" in message, message[-2000:]
    assert f"position {bad['position']}" in message, message[-2000:]
    # one task read the segment once: a retry would have written a second metrics line
    assert read_scan_metrics(str(metrics))["segments"] == 1


def test_skip_keeps_every_valid_batch_and_reports_what_it_dropped(retrying_spark, damaged, tmp_path, caplog) -> None:
    from kafkalog.spark.channel import skipped_totals
    from kafkalog.spark.datasource import read_scan_metrics

    pdir, bad, batches = damaged
    want = sorted(r["offset"] for i, b in enumerate(batches) if i != BAD for r in b["records"])
    assert BAD + 1 < len(batches)  # valid batches follow the bad one
    metrics = tmp_path / "metrics"
    before = skipped_totals()
    df = retrying_spark.read.format("kafkalog").options(onCorrupt="skip", metricsDir=str(metrics)).load(str(pdir))
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        got = sorted(r.offset for r in df.select("offset").collect())
    assert got == want
    m = read_scan_metrics(str(metrics))
    assert (m["skipped_regions"], m["skipped_bytes"], m["skipped_batches"]) == (1, bad["sizeInBytes"], 0)
    after = skipped_totals()
    assert (after["regions"] - before["regions"], after["bytes"] - before["bytes"]) == (1, bad["sizeInBytes"])
    warned = [r.getMessage() for r in caplog.records if "onCorrupt=skip in" in r.getMessage()]
    assert len(warned) == 1 and f"position {bad['position']}" in warned[0] and str(pdir) in warned[0], warned
    # the offsets lost, as recover --salvage --dry-run names them, not only bytes
    assert f"offsets {bad['baseOffset']}-{bad['lastOffset']} lost" in warned[0], warned


def test_stop_is_refused(retrying_spark, damaged) -> None:
    pdir, _, _ = damaged
    with pytest.raises(Exception, match="onCorrupt must be fail or skip"):  # load() itself refuses it
        retrying_spark.read.format("kafkalog").option("onCorrupt", "stop").load(str(pdir)).count()

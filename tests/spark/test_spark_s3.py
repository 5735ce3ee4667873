"""The Spark validation job and the ``kafkalog`` DataSource reading an archive from a real S3 protocol server
(moto's, on 127.0.0.1): the same report rows, the same corrupt segments and the same DataFrame as on local disk.

Executors get the endpoint and credentials as storage options (``options=`` / ``.option(...)``); the command-line
test passes them the standard way, as AWS environment variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden
from tests.s3server import golden_archive_fixture

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("moto")

pytestmark = [pytest.mark.spark, needs_golden]

BUCKET = "archive"
CASES = ["golden-none-0", "golden-zstd-0", "golden-txn-0", "golden-segments-0"]


#: moto's server holding golden/logdir at s3://archive/logdir and the damaged copies at s3://archive/unclean
s3 = pytest.fixture(scope="module", name="s3")(golden_archive_fixture)



def _rel(path: str, root: str) -> str:
    assert path.startswith(root), (path, root)
    return path[len(root) :].lstrip("/")


def _normalised(rows, root: str) -> list[dict]:
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        for key in ("path", "partition_dir"):
            if key in d:
                d[key] = _rel(d[key], root)
        for key in ("error", "index_error"):
            if d.get(key):
                d[key] = d[key].replace(root, "<root>")
        out.append(d)
    return sorted(out, key=lambda d: (d["partition_dir"], d.get("base_offset", -1)))


@pytest.mark.parametrize("prefix,local", [("logdir", "logdir"), ("unclean", "unclean/input")])
def test_validation_job_from_s3_equals_the_local_run(spark, s3, prefix: str, local: str) -> None:
    from kafkalog.spark import partition_continuity, validate_archive

    remote_root, local_root = f"s3://{BUCKET}/{prefix}", str(GOLDEN / local)
    remote_df = validate_archive(spark, remote_root, options=s3.options).cache()
    local_df = validate_archive(spark, local_root).cache()
    remote_rows = _normalised(remote_df.collect(), remote_root)
    assert remote_rows == _normalised(local_df.collect(), local_root)
    assert len(remote_rows) >= 4
    remote_parts = _normalised(partition_continuity(remote_df, options=s3.options).collect(), remote_root)
    assert remote_parts == _normalised(partition_continuity(local_df).collect(), local_root)
    corrupt = {(r["partition_dir"], r["base_offset"]) for r in remote_rows if r["status"] == "corrupt"}
    if prefix == "unclean":  # Kafka's damaged copies: the cut tail and the flipped byte are flagged
        assert {d for d, _ in corrupt} == {"unclean-truncated-tail-0", "unclean-corrupt-crc-0"}
    else:
        assert corrupt == set() and {p["checkpoint_recovery_point"] is not None for p in remote_parts} == {True}


def test_datasource_from_s3_equals_the_local_dataframe(spark, s3) -> None:
    remote = spark.read.format("kafkalog").options(**s3.options).load([f"s3://{BUCKET}/logdir/{c}" for c in CASES])
    local = spark.read.format("kafkalog").load([str(GOLDEN / "logdir" / c) for c in CASES])
    cols = ["topic", "partition", "offset"]
    remote_rows, local_rows = remote.orderBy(*cols).collect(), local.orderBy(*cols).collect()
    assert remote_rows == local_rows and len(remote_rows) > 300
    committed = spark.read.format("kafkalog").options(**s3.options).option("isolation", "read_committed")
    local_committed = spark.read.format("kafkalog").option("isolation", "read_committed")
    assert committed.load(f"s3://{BUCKET}/logdir/golden-txn-0").orderBy("offset").collect() == (
        local_committed.load(str(GOLDEN / "logdir" / "golden-txn-0")).orderBy("offset").collect()
    )


def test_datasource_range_fetches_index_then_a_log_range(spark, s3, tmp_path: Path) -> None:
    from kafkalog.spark.datasource import read_scan_metrics

    case = "golden-index-dense-0"  # an .index entry per batch: a tight range
    size = (GOLDEN / "logdir" / case / "00000000000000000000.log").stat().st_size
    full = spark.read.format("kafkalog").load(str(GOLDEN / "logdir" / case))
    lo, hi = 100, 120  # inside the first segment (offsets 0-232); the second one is dropped at planning
    where = f"offset >= {lo} AND offset <= {hi}"
    mdir = tmp_path / "metrics"
    df = spark.read.format("kafkalog").options(**s3.options).option("metricsDir", str(mdir))
    df = df.options(startingOffsets=str(lo), endingOffsets=str(hi + 1))  # the ranges are options, not filters
    got = sorted(df.load(f"s3://{BUCKET}/logdir/{case}").collect())  # one job: one scan
    assert got == sorted(full.filter(where).collect()) and got
    m = read_scan_metrics(str(mdir))
    # only the byte range between the index entries around [lo, hi] left the server
    assert m["segments"] == 1 and 0 < m["log_bytes_fetched"] < size // 4
    assert m["bytes_read"] <= m["log_bytes_fetched"]


def test_datasource_missing_object_fails_naming_it(spark, s3) -> None:
    df = spark.read.format("kafkalog").options(**s3.options).load(f"s3://{BUCKET}/no-such-prefix")
    with pytest.raises(Exception, match="s3://archive/no-such-prefix"):
        df.collect()


def test_run_validation_writes_reports_to_s3(spark, s3) -> None:
    import pyarrow.parquet as pq

    from kafkalog.archive import storage
    from kafkalog.spark.validate import main

    out = f"s3://{BUCKET}/reports/run1"
    opts = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    assert main([f"s3://{BUCKET}/unclean", "--out", out, *opts]) == 1
    summary = storage.read_range(f"{out}/summary.txt", options=s3.options).decode()
    assert "corrupt" in summary and "s3://archive/unclean/unclean-corrupt-crc-0" in summary
    import io

    table = pq.read_table(io.BytesIO(storage.read_range(f"{out}/segments.parquet", options=s3.options)))
    assert sorted(table.column("status").to_pylist()).count("corrupt") == 2
    assert main([f"s3://{BUCKET}/logdir/golden-gzip-0", "--out", out + "-json", "--format", "json", *opts]) == 0
    lines = storage.read_range(f"{out}-json/partitions.json", options=s3.options).decode().splitlines()
    assert [json.loads(x)["status"] for x in lines] == ["ok"]
    assert main([f"s3://{BUCKET}/missing", "--out", out, *opts]) == 2


def test_validation_jobs_carry_kafkalog_names_for_the_spark_ui(spark, s3) -> None:
    """The jobs of a validation run are grouped under ``kafkalog-validate`` (the Spark UI's job group column), and
    the description is cleared afterwards so the caller's own jobs are not labelled as ours."""
    from kafkalog.spark.validate import main

    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup("kafkalog-validate"))
    opts = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    assert main([f"s3://{BUCKET}/logdir/golden-gzip-0", "--out", f"s3://{BUCKET}/reports/ui", *opts]) == 0
    assert set(tracker.getJobIdsForGroup("kafkalog-validate")) - before
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_cli_reads_s3_with_aws_environment_variables(s3, tmp_path: Path) -> None:
    """``kafkalog spark validate s3://...`` in a fresh process: endpoint and credentials from AWS_* variables only
    (its own JVM and local workers inherit them)."""
    env = {**os.environ, **s3.env, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "kafkalog"), "spark", "validate", f"s3://{BUCKET}/unclean",
         "--out", str(tmp_path / "out"), "--master", "local[1]"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "s3://archive/unclean/unclean-truncated-tail-0" in (tmp_path / "out" / "summary.txt").read_text()


def test_deep_validation_from_s3_equals_the_local_deep_run(spark, s3, tmp_path: Path) -> None:
    """``--deep`` decodes every record on the executors: Kafka's logs pass, local and remote rows agree."""
    from kafkalog.spark import validate_archive

    remote_root, local_root = f"s3://{BUCKET}/logdir", str(GOLDEN / "logdir")
    remote = _normalised(validate_archive(spark, remote_root, options=s3.options, deep=True).collect(), remote_root)
    assert remote == _normalised(validate_archive(spark, local_root, deep=True).collect(), local_root)
    assert {r["status"] for r in remote} == {"ok"}

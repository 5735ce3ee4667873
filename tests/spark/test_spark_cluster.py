"""The validation job and the DataSource on a real Spark standalone cluster (master + 2 workers on 127.0.0.1),
compared with ``local[*]``. The workers' Python has no kafkalog: ``get_session`` ships it as a zip.

One local[*] session computes the reference first and stops; then one cluster session serves the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden
from tests.netns_cluster import namespace_support
from tests.spark_cluster import StandaloneCluster, clean_venv, fresh_session

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark, needs_golden]

#: where namespaces work, tests/spark/test_spark_multihost.py runs the spark-submit job on workers that are separate hosts
#: (the same checks, and a private mount per worker): here it runs only where that module cannot
on_one_host_only = pytest.mark.skipif(
    namespace_support() is None, reason="run on separate hosts by tests/spark/test_spark_multihost.py (same checks, and "
    "a private mount per worker)")

CASES = ["golden-none-0", "golden-txn-0", "golden-segments-0", "golden-lz4-0"]


def _roots() -> list[str]:
    assert GOLDEN is not None
    return [str(GOLDEN / "logdir" / c) for c in CASES] + [str(GOLDEN / "unclean" / "input")]


def _results(spark) -> dict:
    from kafkalog.spark import partition_continuity, register, validate_archive

    register(spark)
    seg = validate_archive(spark, _roots()).cache()
    cols = ["topic", "partition", "offset"]
    df = spark.read.format("kafkalog").load(_roots()[:-1])
    return {
        "segments": sorted(r.asDict(recursive=True).items() for r in seg.collect()),
        "partitions": sorted(r.asDict(recursive=True).items() for r in partition_continuity(seg).collect()),
        "rows": df.orderBy(*cols).collect(),
        "pushdown": sorted(df.filter("topic = 'golden-segments' AND offset >= 100 AND offset < 130").collect()),
        "committed": spark.read.format("kafkalog").option("isolation", "read_committed")
        .load(_roots()[1]).orderBy("offset").collect(),
    }  # fmt: skip


@pytest.fixture(scope="module")
def local_results():
    spark = fresh_session("local[*]", "kafkalog-cluster-reference")
    try:
        results = _results(spark)
    finally:
        spark.stop()  # before the cluster session: one SparkContext per process
    return results


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, local_results):
    workdir = tmp_path_factory.mktemp("standalone")
    python = clean_venv(workdir / "worker-venv")
    c = StandaloneCluster(workdir, python).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster_spark(cluster):
    from kafkalog.spark import get_session

    spark = get_session(cluster.url, "kafkalog-cluster-tests", conf=cluster.session_conf())
    try:
        yield spark
    finally:
        spark.stop()


@on_one_host_only
def test_spark_submit_runs_the_validation_entry_point(cluster, tmp_path: Path) -> None:
    """The documented command: ``spark-submit --master URL --py-files kafkalog.zip $(python -m kafkalog.spark.submit)
    ROOT --out DIR``, here in a child process against the running cluster. First in the module: the application
    needs the workers' cores, which the module's own session holds once it starts."""
    import subprocess

    out = tmp_path / "report"
    before = {a["id"] for a in cluster.applications()}
    cmd = cluster.submit_command([str(GOLDEN / "unclean" / "input"), "--out", str(out)])
    proc = subprocess.run(cmd, env=cluster.driver_env(tmp_path / "conf"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]  # Kafka's damaged copies: corruption found
    summary = (out / "summary.txt").read_text()
    assert "unclean-corrupt-crc-0" in summary and "corrupt" in summary
    # it ran on the cluster: the master lists the application, and the workers made its executors' dirs
    apps = [a for a in cluster.applications() if a["id"] not in before]
    assert [a["name"] for a in apps] == ["kafkalog-validate"], apps
    assert cluster.executor_dirs(apps[0]["id"]), apps


def test_workers_python_lacks_kafkalog_and_jobs_import_the_shipped_zip(cluster, cluster_spark) -> None:
    import subprocess

    probe = subprocess.run([cluster.worker_python, "-c", "import kafkalog"], capture_output=True, text=True,
                           cwd=cluster.workdir)  # fmt: skip
    assert probe.returncode != 0 and "No module named 'kafkalog'" in probe.stderr

    def where(_):
        import sys

        import kafkalog
        from kafkalog.records import native

        yield (sys.executable, kafkalog.__file__, native.available())

    seen = set(cluster_spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect())
    assert {exe for exe, _, _ in seen} == {cluster.worker_python}
    assert all(".zip" in path for _, path, _ in seen), seen
    from kafkalog.records import native

    assert all(compiled == native.available() for _, _, compiled in seen), seen  # the shipped compiled decoder
    assert cluster_spark.sparkContext.defaultParallelism == 2  # both workers' cores


def test_validation_and_datasource_on_the_cluster_equal_local(cluster_spark, local_results) -> None:
    got = _results(cluster_spark)
    for key in ("segments", "partitions", "rows", "pushdown", "committed"):
        assert got[key] == local_results[key], key
    statuses = {dict(r)["status"] for r in got["segments"]}
    assert statuses == {"ok", "warning", "corrupt"} and len(got["rows"]) > 500  # verify's verdicts (a stale index: warning)


def test_cluster_workers_are_frozen_by_kafkalog_tasks(cluster_spark) -> None:
    """The workers run PySpark's own daemon, which collects every object after every task; a DataSource scan's
    tasks freeze each reused worker's objects once (kafkalog.spark.worker_gc), as a mapInArrow probe, served by
    the same workers, sees."""
    from kafkalog.spark import register

    register(cluster_spark)
    df = cluster_spark.read.format("kafkalog").option("minPartitions", "4").load(_roots()[:-1])
    assert df.count() > 500

    def probe(batches):
        import gc

        import pyarrow as pa

        for b in batches:
            yield pa.RecordBatch.from_pydict({"frozen": [gc.get_freeze_count()] * b.num_rows})

    counts = [r.frozen for r in cluster_spark.range(4, numPartitions=4).mapInArrow(probe, "frozen long").collect()]
    assert len(counts) == 4 and all(c > 0 for c in counts), counts


def test_corrupt_batch_fails_the_cluster_job_after_one_attempt(cluster_spark, tmp_path: Path) -> None:
    """Kafka's damaged copy with a broken CRC: the cluster retries failed tasks (spark.task.maxFailures 4), but
    the executors report the corruption to the driver, which cancels the stage: one attempt read the segment."""
    from kafkalog.spark import register
    from kafkalog.spark.datasource import read_scan_metrics

    register(cluster_spark)
    metrics = tmp_path / "metrics"
    df = cluster_spark.read.format("kafkalog").options(metricsDir=str(metrics), minPartitions="1")
    with pytest.raises(Exception, match="cancelled because kafkalog: CorruptRecordError"):
        df.load(str(GOLDEN / "unclean" / "input" / "unclean-corrupt-crc-0")).count()
    read = [json.loads(p.read_text())["segment"] for p in metrics.glob("*.json")]
    assert read and len(read) == len(set(read)) == read_scan_metrics(str(metrics))["segments"], read


def test_metrics_land_on_the_driver_not_the_executors(cluster, cluster_spark, tmp_path: Path, monkeypatch) -> None:
    """A relative metricsDir names the driver's dir: the executors (each in its own worker work dir) send their
    lines to the driver, which writes them there; nothing is written under the workers' dirs."""
    from kafkalog.spark import register
    from kafkalog.spark.datasource import read_scan_metrics

    register(cluster_spark)
    monkeypatch.chdir(tmp_path)
    df = cluster_spark.read.format("kafkalog").options(metricsDir="scan-metrics", minPartitions="2")
    n = df.load(_roots()[:-1]).count()
    totals = read_scan_metrics(str(tmp_path / "scan-metrics"))
    assert totals["segments"] > 2 and totals["records_returned"] == n
    assert not list(cluster.workdir.glob("worker-*/**/scan-metrics")), "a metrics dir on a worker"

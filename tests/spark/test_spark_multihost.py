"""Reports and ``metricsDir`` land where the user said on a multi-host cluster.

The master and the driver run in the root namespace; each of the two workers is its own host: its own network
namespace with its own address, and its own mount namespace in which the driver's output dir is a private tmpfs
(``tests/netns_cluster.py``). A file an executor wrote to a driver-side path would land in that tmpfs, invisible
here; every test checks that the tmpfs stayed empty, and the last one shows that an executor's write does land
there. The archive (a log dir with a CRC-broken batch) is visible to all hosts, as shared storage would be.

The reference is the same work on ``local[2]`` (one session, stopped before the cluster session starts).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.netns_cluster import NamespaceError, NetnsCluster, namespace_support
from tests.spark_cluster import clean_venv, fresh_session

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark, pytest.mark.root, needs_golden]

DAMAGED = "golden-none-0"  # its 5th batch gets a broken CRC
BAD = 4
INTACT = "golden-segments-0"  # several segments: tasks for both executors


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, dict]:
    """A log dir holding a copy of golden-none-0 with one batch's CRC broken and golden-segments-0; (dir, the
    broken batch)."""
    assert GOLDEN is not None
    root = tmp_path_factory.mktemp("archive") / "logdir"
    for case in (DAMAGED, INTACT):
        shutil.copytree(GOLDEN / "logdir" / case, root / case)
    bad = load_manifest(f"manifests/{DAMAGED}.json")["segments"][0]["log"]["batches"][BAD]
    log = root / DAMAGED / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[bad["position"] + bad["sizeInBytes"] - 3] ^= 0xFF
    log.write_bytes(bytes(data))
    return root, bad


def _read_report(out: Path) -> dict:
    """The validation reports as written: ``segments``/``partitions`` rows (sorted) and the summary text."""
    import pyarrow.parquet as pq

    tables = {name: pq.read_table(out / f"{name}.parquet" / "part-00000.parquet").to_pylist()
              for name in ("segments", "partitions")}  # fmt: skip
    return {
        "segments": sorted(tables["segments"], key=lambda r: r["path"]),
        "partitions": sorted(tables["partitions"], key=lambda r: r["partition_dir"]),
        "summary": (out / "summary.txt").read_text(),
    }


def _scan(spark, root: Path, metrics: Path) -> dict:
    """The DataSource under ``onCorrupt=skip`` with ``metricsDir``: the rows, and the metrics lines the driver
    finds (without the timing fields, the only ones that depend on the run)."""
    from kafkalog.spark import register

    register(spark)
    df = spark.read.format("kafkalog").options(onCorrupt="skip", metricsDir=str(metrics), minPartitions="4")
    rows = sorted(tuple(r) for r in df.load(str(root)).select("topic", "partition", "offset", "key", "value").collect())
    lines = [json.loads(p.read_text()) for p in sorted(metrics.glob("*.json"))]
    for line in lines:
        for key in ("scan_seconds", "yield_seconds", "started", "ended", "worker_start"):
            del line[key]
    return {"rows": rows, "metrics": sorted(lines, key=lambda m: (m["segment"], m["start_position"]))}


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The cluster, its JVMs starting (:func:`cluster` waits for them)."""
    reason = namespace_support()
    if reason:
        pytest.skip(f"no separate hosts: {reason}")
    workdir = tmp_path_factory.mktemp("netns-cluster")
    private = tmp_path_factory.mktemp("driver-out")  # the driver's outputs; a private tmpfs on each worker
    python = clean_venv(workdir / "worker-venv")
    try:
        c = NetnsCluster(workdir, python, private)
    except NamespaceError as exc:
        pytest.skip(f"no separate hosts: {exc}")
    try:
        c.launch()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def local_reference(launched, archive, tmp_path_factory) -> dict:
    """The validation reports and the scan on local[2], computed while the cluster's JVMs start."""
    from kafkalog.spark import run_validation

    root, _ = archive
    out = tmp_path_factory.mktemp("local")
    spark = fresh_session("local[2]", "kafkalog-multihost-reference")
    try:
        assert run_validation([str(root)], str(out / "report"), "local[2]") == 1
        return {"report": _read_report(out / "report"), "scan": _scan(spark, root, out / "metrics")}
    finally:
        spark.stop()  # before the cluster session: one SparkContext per process


@pytest.fixture(scope="module")
def cluster(launched, local_reference) -> NetnsCluster:
    return launched.wait_ready()


def _new_app(cluster: NetnsCluster, before: set[str], name: str) -> str:
    """The id of the one application the master's JSON status lists beyond ``before``, named ``name``."""
    apps = [a for a in cluster.applications() if a["id"] not in before]
    assert [a["name"] for a in apps] == [name], apps
    return apps[0]["id"]


def _executors_on_both_hosts(cluster: NetnsCluster, app_id: str) -> None:
    """The master's workers are the namespace hosts, and each one's JSON status lists an executor of ``app_id``."""
    workers = {w["host"] for w in cluster.status()["workers"] if w["state"] == "ALIVE"}
    assert workers == set(cluster.network.addresses), workers
    for i in range(cluster.n_workers):
        status = cluster.worker_status(i)
        ran = [e for e in status["executors"] + status["finishedexecutors"] if e["appid"] == app_id]
        assert ran, f"no executor of {app_id} on worker {i} ({cluster.worker_host(i)})"


def _nothing_written_executor_side(cluster: NetnsCluster) -> None:
    assert all(cluster.private_is_mounted(i) for i in range(cluster.n_workers))
    assert cluster.private_files() == {i: [] for i in range(cluster.n_workers)}


@pytest.mark.slow  # a driver in a child process; the CLI test below covers the reports on the module's session
def test_spark_submit_writes_the_reports_on_the_driver(cluster, archive, local_reference) -> None:
    """The documented ``spark-submit`` of ``kafkalog.spark.submit`` (its own driver, set up by
    ``spark-defaults.conf`` as a cluster's user would): the reports are in ``--out`` on the driver's host, equal to
    the local[2] run's, and no worker has any of them. First in the module: the module's session takes every
    core once it starts."""
    root, _ = archive
    out = cluster.private_dir / "submit-report"
    before = {a["id"] for a in cluster.applications()}
    proc = subprocess.run(cluster.submit_command([str(root), "--out", str(out)]),
                          env=cluster.driver_env(cluster.workdir / "submit-conf"), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # the broken CRC: corruption found
    assert _read_report(out) == local_reference["report"]
    _executors_on_both_hosts(cluster, _new_app(cluster, before, "kafkalog-validate"))
    _nothing_written_executor_side(cluster)


@pytest.fixture(scope="module")
def cluster_spark(cluster, local_reference):
    from kafkalog.spark import get_session

    spark = get_session(cluster.url, "kafkalog-multihost-tests", conf=cluster.session_conf())
    try:
        # both executors registered (one per worker host) before the first job, so its tasks use both
        sc = spark.sparkContext._jsc.sc()
        deadline = time.monotonic() + 120
        while sc.getExecutorMemoryStatus().size() < 1 + cluster.n_workers and time.monotonic() < deadline:
            time.sleep(0.2)
        yield spark
    finally:
        spark.stop()


def _tasks_per_host(spark) -> dict[str, int]:
    """Tasks each executor host ran in this application (the driver's status store)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    executors = store.executorList(True)
    out: dict[str, int] = {}
    for i in range(executors.size()):
        e = executors.apply(i)
        if e.id() != "driver":
            host = e.hostPort().rsplit(":", 1)[0]
            out[host] = out.get(host, 0) + e.totalTasks()
    return out


def test_cli_validate_writes_the_reports_on_the_driver(cluster, cluster_spark, archive, local_reference) -> None:
    """``kafkalog spark validate ROOT --master spark://... --out DIR`` (in this process: the command runs on the
    active cluster session): the reports are in DIR on the driver's host, equal to the local[2] run's, the
    segments were checked by executors on both hosts, and no worker has any of the files."""
    from click.testing import CliRunner
    from kafkalog_cli.main import main

    root, _ = archive
    out = cluster.private_dir / "cli-report"
    before = _tasks_per_host(cluster_spark)
    result = CliRunner().invoke(main, ["spark", "validate", str(root), "--master", cluster.url, "--out", str(out)])
    assert result.exit_code == 1, result.output  # the broken CRC: corruption found
    _nothing_written_executor_side(cluster)
    assert f"CORRUPT {root / DAMAGED / '00000000000000000000.log'}" in result.output
    assert _read_report(out) == local_reference["report"]
    after = _tasks_per_host(cluster_spark)
    assert set(after) == set(cluster.network.addresses), after
    assert all(after[h] > before.get(h, 0) for h in after), (before, after)


def test_datasource_metrics_land_on_the_driver(cluster, cluster_spark, archive, local_reference) -> None:
    """``metricsDir`` on a driver-side path with ``onCorrupt=skip``: the executors on both hosts send their lines
    to the driver, which writes them there; rows and lines equal local[2]'s, the skipped batch is counted."""
    _, bad = archive
    metrics = cluster.private_dir / "metrics"
    before = _tasks_per_host(cluster_spark)
    got = _scan(cluster_spark, archive[0], metrics)
    _nothing_written_executor_side(cluster)
    assert got == local_reference["scan"]
    damaged = [m for m in got["metrics"] if f"/{DAMAGED}/" in m["segment"]]
    assert [(m["skipped_regions"], m["skipped_bytes"]) for m in damaged] == [(1, bad["sizeInBytes"])]
    after = _tasks_per_host(cluster_spark)
    assert set(after) == set(cluster.network.addresses), after
    assert all(after[h] > before.get(h, 0) for h in after), (before, after)  # both hosts ran scan tasks
    app_id = cluster_spark.sparkContext.applicationId
    assert app_id in {a["id"] for a in cluster.applications()}
    _executors_on_both_hosts(cluster, app_id)


def test_an_executor_write_lands_in_its_host_private_mount(cluster, cluster_spark) -> None:
    """The control: tasks run in the workers' namespaces, and a file a task writes to the driver's output dir is
    in that worker's private tmpfs, not here. (Last: it leaves files there, removed at the end.)"""
    private = str(cluster.private_dir)

    def write_probe(index, _):
        import os

        net = os.readlink("/proc/self/ns/net")
        with open(os.path.join(private, f"probe-{index}"), "w") as f:
            f.write(net)
        yield (index, net, os.readlink("/proc/self/ns/mnt"))

    ran = cluster_spark.sparkContext.parallelize(range(8), 8).mapPartitionsWithIndex(write_probe).collect()
    worker_ns = {os.readlink(f"/proc/{cluster.worker_pid(i)}/ns/{kind}"): i
                 for i in range(cluster.n_workers) for kind in ("net", "mnt")}  # fmt: skip
    assert {worker_ns[net] for _, net, _ in ran} == {0, 1}, ran  # tasks ran in both hosts' namespaces
    assert all(worker_ns[net] == worker_ns[mnt] for _, net, mnt in ran), ran
    assert not list(cluster.private_dir.glob("probe-*"))  # not on the driver's side
    found = cluster.private_files()
    try:
        for index, net, _ in ran:
            assert f"probe-{index}" in found[worker_ns[net]], found
        assert sum(len(v) for v in found.values()) == len(ran)
    finally:
        for i in range(cluster.n_workers):
            for p in cluster.private_view(i).glob("probe-*"):
                p.unlink()

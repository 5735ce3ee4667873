"""The image a broker replays from Kafka's golden ``__cluster_metadata-0`` (snapshot + log), the coordinators' state
from ``__consumer_offsets-34`` / ``__transaction_state-28``, and ``kafkalog dirs assignments --metadata-log``
(KIP-858) on log dirs built to match the golden registration, with a moved replica, a stray and a lost dir."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.meta_properties import MetaProperties, write_meta_properties
from kafkalog.checkpoint.partition_metadata import write_partition_metadata
from kafkalog.errors import NothingToCheckError
from kafkalog.metadata import (
    LOST,
    MIGRATING,
    consumer_offsets,
    read_metadata_log,
    transaction_states,
)
from tests.conftest import GOLDEN, needs_golden

pytestmark = needs_golden

ORDERS, PAYMENTS = "WlpaWgAAAfUREQAAAAAB9Q", "WlpaWgAAAfcREQAAAAAB9w"
B1_C, B1_D = "WlpaWgAAAAsREQAAAAAACw", "WlpaWgAAAAwREQAAAAAADA"  # broker 1's two dirs
B2 = "WlpaWgAAABUREQAAAAAAFQ"
B3_H, B3_I = "WlpaWgAAAB8REQAAAAAAHw", "WlpaWgAAACAREQAAAAAAIA"  # broker 3's dirs; I failed at offset 29
OTHER = "WlpaWgAAAAAREQAAAAAAAA"


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    dst = tmp_path / "__cluster_metadata-0"
    shutil.copytree(GOLDEN / "metadata" / "__cluster_metadata-0", dst)
    return dst


def test_image_replays_the_latest_snapshot_then_the_log(meta: Path) -> None:
    image = read_metadata_log(meta)
    assert image.problems == []
    assert image.snapshot == (23, 1) and image.end_offset == 37
    assert sorted(image.topics) == ["orders", "payments"]  # "legacy" removed at offset 32
    orders = image.topics["orders"]
    assert orders.topic_id == ORDERS and image.topics["payments"].topic_id == PAYMENTS
    p0, p1, p2 = (orders.partitions[i] for i in range(3))
    assert p0.replicas == [1, 2, 3] and p0.directories == [B1_D, B2, B3_H]  # replica 1 moved C -> D (offset 27)
    assert p1.directories == [B2, B3_H, B1_D]  # UNASSIGNED resolved (offset 30)
    assert (p2.isr, p2.leader, p2.leader_epoch) == ([1], 1, 1)
    assert p2.directories == [LOST, B1_C, MIGRATING]
    assert p2.directory_of(3) == LOST and p2.directory_of(7) is None
    assert image.brokers[1].log_dirs == [B1_C, B1_D] and not image.brokers[1].fenced
    assert image.brokers[3].log_dirs == [B3_H]  # the failed dir left the registration
    assert image.brokers[4].log_dirs == []
    assert image.features == {"metadata.version": 22, "kraft.version": 1, "transaction.version": 2,
                              "group.version": 1}
    assert image.configs[(2, "orders")] == {"cleanup.policy": "compact"}
    assert image.configs[(4, "1")] == {}  # deleted by a null value
    assert image.next_producer_id == 2000 and image.kraft_version == 1 and len(image.voters) == 3


def test_image_without_snapshots_and_with_a_torn_one_is_the_same(meta: Path) -> None:
    full = read_metadata_log(meta)
    latest = meta / "00000000000000000023-0000000001.checkpoint"
    data = latest.read_bytes()
    latest.write_bytes(data[:-20])  # the footer batch torn
    torn = read_metadata_log(meta)
    assert torn.snapshot == (0, 0) and any("snapshot skipped" in p for p in torn.problems)
    for p in meta.glob("*.checkpoint"):
        p.unlink()
    bare = read_metadata_log(meta)
    assert bare.snapshot is None and bare.problems == []
    for image in (torn, bare):
        assert image.topics == full.topics and image.brokers == full.brokers and image.features == full.features


def test_consumer_offsets_apply_tombstones_and_only_committed_transactions(tmp_path: Path) -> None:
    part = tmp_path / "__consumer_offsets-34"
    shutil.copytree(GOLDEN / "metadata" / "__consumer_offsets-34", part)
    assert consumer_offsets(part) == {
        "classic-group": {("orders", 0): 43},  # orders-1's commit was deleted by a tombstone
        "group-143": {("legacy", 0): 99},
        "group-19": {("orders", 2): 1000},
        "group-64": {("orders", 0): 500, ("orders", 1): 501},  # payments-0: aborted (600) and open (601)
    }


def test_transaction_states_at_the_end_of_the_log(tmp_path: Path) -> None:
    part = tmp_path / "__transaction_state-28"
    shutil.copytree(GOLDEN / "metadata" / "__transaction_state-28", part)
    states = transaction_states(part)
    assert sorted(states) == ["txn-179", "txn-65", "txn-app"]  # txn-142 expired (tombstone)
    assert states["txn-app"].state == "CompleteAbort" and states["txn-app"].producer_id == 4000
    assert (states["txn-65"].producer_epoch, states["txn-65"].client_transaction_version) == (2, 2)
    ongoing = states["txn-179"]
    assert ongoing.state == "Ongoing" and ongoing.partitions == (("orders", 0), ("__consumer_offsets", 34))


# --- KIP-858: dirs assignments --metadata-log -------------------------------------------------------------------


TOPIC_IDS = {"orders": ORDERS, "payments": PAYMENTS, "legacy": "WlpaWgAAAfYREQAAAAAB9g"}


def _log_dir(root: Path, dir_id: str | None, partitions: list[str]) -> Path:
    """A log dir with its meta.properties and one partition dir per name, each with the partition.metadata the
    broker wrote when it created the log (the topic id of the golden metadata)."""
    root.mkdir(parents=True)
    if dir_id is not None:
        write_meta_properties(root / "meta.properties",
                              MetaProperties(version=1, cluster_id="golden", node_id=1, directory_id=dir_id))
    for name in partitions:
        (root / name).mkdir()
        topic = name.rpartition("-")[0]
        if topic in TOPIC_IDS:
            write_partition_metadata(root / name / "partition.metadata", TOPIC_IDS[topic])
    return root


def _assignments(meta: Path, broker: int, *dirs: Path, extra: tuple[str, ...] = ()) -> tuple[int, str]:
    args = ["dirs", "assignments", *map(str, dirs), "--metadata-log", str(meta), "--broker-id", str(broker), *extra]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    return r.exit_code, r.stdout


def test_a_broker_whose_dirs_agree_with_the_controller(meta: Path, tmp_path: Path) -> None:
    c = _log_dir(tmp_path / "c", B1_C, ["orders-2", "payments-0"])
    d = _log_dir(tmp_path / "d", B1_D, ["orders-0", "orders-1"])
    code, out = _assignments(meta, 1, c, d)
    assert code == 0 and "mismatch" not in out
    code, out = _assignments(meta, 1, c, d, extra=("--all", "--json"))
    doc = json.loads(out)
    assert code == 0 and doc["mismatches"] == [] and doc["dirMismatches"] == []
    assert {(r["topic"], r["partition"]): r["assignedDirectoryId"] for r in doc["replicas"]} == {
        ("orders", 0): B1_D, ("orders", 1): B1_D, ("orders", 2): B1_C, ("payments", 0): B1_C}


def test_a_moved_replica_a_stray_and_an_unregistered_dir(meta: Path, tmp_path: Path) -> None:
    # orders-0 still on dir C (the controller moved it to D); legacy-0 was deleted; dir X is not registered
    c = _log_dir(tmp_path / "c", B1_C, ["orders-0", "orders-2", "payments-0"])
    d = _log_dir(tmp_path / "d", B1_D, ["orders-1"])
    x = _log_dir(tmp_path / "x", OTHER, ["legacy-0"])
    code, out = _assignments(meta, 1, c, d, x, extra=("--json",))
    assert code == 1
    doc = json.loads(out)
    assert {(m["kind"], m["topic"], m["partition"]) for m in doc["mismatches"]} == {
        ("found_in_other_dir", "orders", 0), ("stray", "legacy", 0)}
    assert [(m["kind"], m["directoryId"]) for m in doc["dirMismatches"]] == [("directory_not_registered", OTHER)]
    assert "replicas" not in doc  # only differences without --all
    code, text = _assignments(meta, 1, c, d, x)
    assert code == 1
    assert any(line.startswith("mismatch: found_in_other_dir orders-0 expected: " + B1_D) for line in text.splitlines())
    assert f"mismatch: directory_not_registered {x} directoryId: {OTHER}" in text


def test_a_lost_dir(meta: Path, tmp_path: Path) -> None:
    h = _log_dir(tmp_path / "h", B3_H, ["orders-0", "orders-1"])
    code, out = _assignments(meta, 3, h, extra=("--json",))
    doc = json.loads(out)
    assert code == 1
    assert [(m["kind"], m["topic"], m["partition"], m["expectedDirectoryId"]) for m in doc["mismatches"]] == [
        ("assigned_to_offline_dir", "orders", 2, LOST)]
    # the failed dir comes back with the replica on it: a live copy the controller marked LOST, on a dir
    # the broker's registration no longer lists
    i = _log_dir(tmp_path / "i", B3_I, ["orders-2"])
    code, out = _assignments(meta, 3, h, i, extra=("--json",))
    doc = json.loads(out)
    assert code == 1
    assert [(m["kind"], m["topic"], m["partition"]) for m in doc["mismatches"]] == [("found_in_other_dir", "orders", 2)]
    assert [m["directoryId"] for m in doc["dirMismatches"]] == [B3_I]


def test_usage_errors(meta: Path, tmp_path: Path) -> None:
    d = _log_dir(tmp_path / "d", B1_D, [])
    r = CliRunner().invoke(main, ["dirs", "assignments", str(d), "--metadata-log", str(meta)])
    assert r.exit_code == 2 and "--broker-id" in r.output
    code, _ = _assignments(meta, 99, d)
    assert code == 2  # not a registered broker: nothing to compare
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _ = _assignments(empty, 1, d)
    assert code == 2


def test_check_broker_dirs_reports_an_assignment_to_an_unregistered_dir(tmp_path: Path) -> None:
    """A replica assigned to a directory id the broker's registration does not list (its dir failed and the
    broker re-registered without it, but the partition was never reassigned)."""
    from kafkalog.manager.assignments import DirState
    from kafkalog.metadata import BrokerImage, MetadataImage, PartitionImage, TopicImage
    from kafkalog.metadata.dir_assignments import check_broker_dirs

    image = MetadataImage()
    image.brokers[1] = BrokerImage(1, 10, OTHER, [B1_C], fenced=True)
    topic = TopicImage("t", ORDERS)
    topic.partitions[0] = PartitionImage(0, [1, 2], [1, 2], 1, 0, 0, [B1_D, B2])
    topic.partitions[1] = PartitionImage(1, [2, 1], [2, 1], 2, 0, 0, [B2, B1_C])
    image.topics["t"] = topic
    c, d = tmp_path / "c", tmp_path / "d"
    for root, name in ((c, "t-1"), (d, "t-0")):
        (root / name).mkdir(parents=True)
        write_partition_metadata(root / name / "partition.metadata", ORDERS)
    dirs = [DirState(str(c), B1_C, True, {("t", 1)}), DirState(str(d), B1_D, True, {("t", 0)})]
    report = check_broker_dirs(dirs, image, 1)
    assert [(m["kind"], m["partition"]) for m in report.mismatches] == [("assigned_to_unregistered_dir", 0)]
    assert [(f.log_dir, f.kind) for f in report.dir_findings] == [(str(d), "directory_not_registered")]
    assert report.fenced and not report.consistent
    assert [r.to_json()["assigned"] for r in report.replicas] == [B1_D, B1_C]


def test_strays_are_decided_by_topic_id_as_kafka_does(meta: Path, tmp_path: Path) -> None:
    """A partition dir named like an assigned replica is still stray when its partition.metadata holds another
    topic id (the topic was re-created) or none; a replica of a partition that leaves this broker out is stray."""
    c = _log_dir(tmp_path / "c", B1_C, ["orders-2", "payments-0", "newtopic-0"])
    d = _log_dir(tmp_path / "d", B1_D, ["orders-0", "orders-1"])
    write_partition_metadata(c / "orders-2" / "partition.metadata", OTHER)  # an older incarnation of "orders"
    (d / "orders-1" / "partition.metadata").unlink()  # created but never flushed
    code, out = _assignments(meta, 1, c, d, extra=("--json",))
    doc = json.loads(out)
    assert code == 1
    details = {(m["topic"], m["partition"]): m["detail"] for m in doc["mismatches"] if m["kind"] == "stray"}
    assert set(details) == {("orders", 2), ("orders", 1), ("newtopic", 0)}
    assert "not in the metadata" in details[("orders", 2)] and "no partition.metadata" in details[("orders", 1)]


def test_a_gap_between_the_snapshot_and_the_log_stops_the_replay(meta: Path, tmp_path: Path) -> None:
    """The log from offset 0 deleted and only segment 32 left after snapshot 23: offsets 23..31 are nowhere."""
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"):
        (meta / name).unlink()
    image = read_metadata_log(meta)
    assert image.end_offset == 23 and "legacy" in image.topics  # the image of the snapshot alone
    assert [p.split(": ", 1)[1] for p in image.problems] == [
        "offsets 23 to 31 are neither in a snapshot nor in the log (replay stops here)"]
    d = _log_dir(tmp_path / "d", B1_D, ["orders-0", "orders-1"])
    r = CliRunner().invoke(main, ["dirs", "assignments", str(d), "--metadata-log", str(meta), "--broker-id", "1",
                                  "--json"], catch_exceptions=False)
    assert json.loads(r.stdout)["metadataProblems"] == image.problems
    assert "kafkalog: warning: metadata log:" in CliRunner().invoke(
        main, ["dirs", "assignments", str(d), "--metadata-log", str(meta), "--broker-id", "1"]).stderr


def test_a_dir_without_a_metadata_log_is_nothing_to_check(tmp_path: Path) -> None:
    """An empty (or mistyped) --metadata-log dir is not a controller that registered no broker: exit 2 naming the
    dir and saying no metadata log is there, in text and under --json."""
    empty = tmp_path / "__cluster_metadata-0"
    empty.mkdir()
    with pytest.raises(NothingToCheckError, match="no metadata log segments or snapshots"):
        read_metadata_log(empty)
    d = _log_dir(tmp_path / "d", B1_D, ["orders-0"])
    r = CliRunner().invoke(main, ["dirs", "assignments", str(d), "--metadata-log", str(empty), "--broker-id", "1"])
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"kafkalog: error: {empty}: no metadata log segments or snapshots here "
                                "(not a __cluster_metadata-0 dir?)")
    r = CliRunner().invoke(main, ["dirs", "assignments", str(d), "--metadata-log", str(empty), "--broker-id", "1",
                                  "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout.splitlines()[-1])["path"] == str(empty)

"""``verify`` predicts Kafka's startup refusals (``kafkalog.verify.startup``): a dir whose name Kafka's
``parseTopicPartitionName`` cannot parse stops the broker; duplicate logs of one partition stop it; a log the metadata
log does not assign here (or with no topic id) is renamed ``-stray``. ``recover``, ``dirs describe`` and
``dirs assignments`` name each refused dir."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.partition_metadata import write_partition_metadata
from kafkalog.verify.startup import kafka_topic_partition, startup_problems
from tests.cli.test_cli_commands import writable
from tests.conftest import GOLDEN, needs_golden

pytestmark = needs_golden


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _log_dir(tmp_path: Path) -> Path:
    ld = tmp_path / "logdir"
    shutil.copytree(GOLDEN / "logdir", ld)
    return writable(ld)


@pytest.mark.parametrize("name", ["lost+found", "foo-x", "orders", "t-1-delete", "t-", "-3", "t-99999999999"])
def test_a_dir_kafka_cannot_parse_fails_verify(tmp_path: Path, name: str) -> None:
    ld = _log_dir(tmp_path)
    (ld / name).mkdir()
    r = run("verify", "--json", ld)
    assert r.exit_code == 1, r.output
    logdir = [json.loads(x) for x in r.stdout.splitlines() if '"logdir"' in x]
    problems = [p for o in logdir for p in o.get("problems", [])]
    assert any(str(ld / name) in p and "refuses to start" in p for p in problems), problems


def test_kafka_name_rule() -> None:
    assert kafka_topic_partition("t-007") == ("t", 7, "")  # Integer.parseInt takes leading zeros
    assert kafka_topic_partition("a b-3") == ("a b", 3, "")  # Kafka does not validate the topic here
    assert kafka_topic_partition("t-1.x-future") == ("t", 1, "-future")
    assert kafka_topic_partition("t-1-future") is None
    assert kafka_topic_partition("lost+found") is None


def _second_dir(a: Path, b: Path, directory_id: str = "T3RoZXJEaXJlY3QwMDAwMg") -> None:
    """``b``: another log dir of the broker of ``a`` (its meta.properties with another directory.id)."""
    b.mkdir()
    (b / "meta.properties").write_text((a / "meta.properties").read_text().replace("T3JhY2xlRGlyZWN0MDAwMQ",
                                                                                   directory_id))


def test_duplicate_logs_of_one_partition_across_log_dirs(tmp_path: Path) -> None:
    a = _log_dir(tmp_path / "a")
    b = tmp_path / "b"
    _second_dir(a, b)
    shutil.copytree(a / "golden-none-0", b / "golden-none-0")
    problems = startup_problems([str(a), str(b)])
    assert any("duplicate logs of golden-none-0" in p for p in problems[str(b)]), problems
    r = run("verify", a, b)
    assert r.exit_code == 1
    assert "Duplicate log directories" in r.output
    # two -future copies of one partition: Kafka refuses them too
    for d in (a, b):
        shutil.copytree(a / "golden-gzip-0", d / "golden-gzip-0.0123456789abcdef0123456789abcd0f-future")
    problems = startup_problems([str(a), str(b)])
    assert any("duplicate future logs of golden-gzip-0" in p for p in problems[str(b)]), problems


def test_copies_and_other_brokers_are_not_compared(tmp_path: Path) -> None:
    """A copy of a log dir (the same directory.id), a dir of another cluster and a dir without meta.properties are
    not log dirs of the same broker: the same partition in them is no duplicate."""
    a = _log_dir(tmp_path / "a")
    copy = _log_dir(tmp_path / "copy")
    other = tmp_path / "other"
    _second_dir(a, other)
    (other / "meta.properties").write_text((other / "meta.properties").read_text().replace(
        "S2Fma2FPcmFjbGVDbHVzdA", "T3RoZXJDbHVzdGVyMDAwMQ"))
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    for d in (other, bare):
        shutil.copytree(a / "golden-none-0", d / "golden-none-0")
    problems = startup_problems([str(a), str(copy), str(other), str(bare)])
    assert problems == {str(d): [] for d in (a, copy, other, bare)}


def test_stray_logs_by_the_metadata_log(tmp_path: Path) -> None:
    """Broker 1's log dir with the golden metadata log: orders-0 (topic id of orders, replicas [1, 2, 3]) stays;
    orders-7 (no such partition), a partition without partition.metadata and one of an unknown topic id are stray."""
    ld = tmp_path / "logdir"
    ld.mkdir()
    shutil.copy(GOLDEN / "logdir" / "meta.properties", ld / "meta.properties")
    shutil.copytree(GOLDEN / "metadata" / "__cluster_metadata-0", ld / "__cluster_metadata-0")
    writable(ld)
    for name, topic_id in (("orders-0", "WlpaWgAAAfUREQAAAAAB9Q"), ("orders-7", "WlpaWgAAAfUREQAAAAAB9Q"),
                           ("payments-0", "WlpaWgAAAfcREQAAAAAB9w"), ("ghost-0", None)):
        (ld / name).mkdir()
        if topic_id is not None:
            write_partition_metadata(ld / name / "partition.metadata", topic_id)
    problems = startup_problems([str(ld)])[str(ld)]
    stray = sorted(p.split(":")[0].rsplit("/", 1)[1] for p in problems if "stray" in p)
    assert stray == ["ghost-0", "orders-7"], problems
    r = run("verify", ld)
    assert r.exit_code == 1 and "marks the log stray" in r.output


def test_malformed_partition_metadata_takes_the_log_dir_offline(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path)
    (ld / "golden-none-0" / "partition.metadata").write_text("garbage\n")
    problems = startup_problems([str(ld)])[str(ld)]
    assert any("takes the whole log dir offline" in p for p in problems), problems


def test_recover_and_dirs_name_each_refused_dir(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path)
    (ld / "lost+found").mkdir()
    for args in (("recover", "--dry-run"), ("recover",)):
        r = run(*args, "--json", ld)
        refusals = [json.loads(x) for x in r.stdout.splitlines() if "startupRefusal" in x]
        assert [o["path"] for o in refusals] == [str(ld / "lost+found")]
        assert json.loads(r.stdout.splitlines()[-1])["refusedDirs"] == 1
        assert r.exit_code == 1
    r = run("dirs", "describe", "--json", ld)
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["brokers"][0]["logDirs"][0]["refusedDirs"][0]["path"] == str(ld / "lost+found")
    r = run("dirs", "assignments", ld)
    assert r.exit_code == 1
    assert f"{ld / 'lost+found'}" in r.output and "refuses to start" in r.output


def test_malformed_files_of_any_loaded_dir_take_the_log_dir_offline(tmp_path: Path) -> None:
    """Kafka loads ``-delete`` and ``-stray`` dirs too; a malformed leader-epoch-checkpoint is an IOException in
    its checkpoint reader like a malformed partition.metadata."""
    ld = _log_dir(tmp_path)
    (ld / "golden-gzip-0" / "leader-epoch-checkpoint").write_text("0\n1\nnot numbers\n")
    gone = ld / "golden-lz4-0.0123456789abcdef0123456789abcdef-delete"
    (ld / "golden-lz4-0").rename(gone)
    (gone / "partition.metadata").write_text("garbage\n")
    problems = startup_problems([str(ld)])[str(ld)]
    offline = sorted(p.split(":")[0] for p in problems if "takes the whole log dir offline" in p)
    assert offline == [str(ld / "golden-gzip-0" / "leader-epoch-checkpoint"), str(gone / "partition.metadata")]


def test_a_topic_id_of_another_topic(tmp_path: Path) -> None:
    ld = tmp_path / "logdir"
    ld.mkdir()
    shutil.copy(GOLDEN / "logdir" / "meta.properties", ld / "meta.properties")
    shutil.copytree(GOLDEN / "metadata" / "__cluster_metadata-0", ld / "__cluster_metadata-0")
    writable(ld)
    (ld / "shipments-0").mkdir()
    write_partition_metadata(ld / "shipments-0" / "partition.metadata", "WlpaWgAAAfUREQAAAAAB9Q")  # orders' id
    problems = startup_problems([str(ld)])[str(ld)]
    assert any("is topic 'orders' in the metadata log, not 'shipments'" in p for p in problems), problems


def test_two_names_of_one_partition(tmp_path: Path) -> None:
    """``golden-txn-00`` is partition 0 to Kafka's ``Integer.parseInt``: a second log of golden-txn-0."""
    ld = _log_dir(tmp_path)
    shutil.copytree(ld / "golden-txn-0", ld / "golden-txn-00")
    r = run("verify", ld)
    assert r.exit_code == 1 and "duplicate logs of golden-txn-0" in r.output

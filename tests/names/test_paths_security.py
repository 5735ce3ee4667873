"""Security of paths: names that try to escape a log dir are refused with a clear error, and links inside a log
dir pointing elsewhere are never followed into writing (or truncating) files outside it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptCheckpointError,
    InvalidPartitionDirError,
    InvalidTopicError,
    KafkaLogError,
)
from kafkalog.manager.log_manager import LogManager
from kafkalog.names import parse_partition_dir, partition_dir_name, validate_topic
from kafkalog.records import build_batch

BROKER = {"node.id": 1, "cluster.id": "paths-security-cluster"}
BAD_TOPICS = ["", ".", "..", "../x", "x/..", "a/b", "/abs", "a\0b", "\0", "x" * 250, "a\\b", "a b", "topic\n",
              "t\u00e4", "..\u2215x", "con:1", "~", "$HOME", "a*"]
BAD_PARTITIONS = [-1, 1 << 31, True, "0", 1.0, None]
BAD_DIR_NAMES = ["../x-0", "x-0/..", "a/b-0", "\0-0", ".-0", "..-0", "x-01", "x-+1", "x-", "-0", "x-0\0",
                 "x" * 300 + "-0", "x-0.00000000000000000000000000000000-future/..", "x-2147483648"]


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_bad_topic_names_refused(topic: str) -> None:
    with pytest.raises(InvalidTopicError, match="Topic name is invalid"):
        validate_topic(topic)
    with pytest.raises(InvalidTopicError):
        partition_dir_name(topic, 0)


@pytest.mark.parametrize("partition", BAD_PARTITIONS)
def test_bad_partitions_refused(partition: object) -> None:
    with pytest.raises(InvalidPartitionDirError, match="partition"):
        partition_dir_name("ok", partition)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", BAD_DIR_NAMES)
def test_bad_partition_dir_names_refused(name: str) -> None:
    with pytest.raises(InvalidPartitionDirError):
        parse_partition_dir(name)


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(max_size=260), st.integers(-3, (1 << 31) + 3))
def test_any_accepted_name_stays_inside(topic: str, partition: int) -> None:
    """Whatever is accepted maps to one plain child of the log dir; everything else is a kafkalog ValueError."""
    try:
        name = partition_dir_name(topic, partition)
    except (InvalidTopicError, InvalidPartitionDirError):
        return
    assert "/" not in name and "\0" not in name and name not in (".", "..") and len(name) <= 255
    root = "/srv/kafka"
    assert os.path.dirname(os.path.normpath(os.path.join(root, name))) == root
    assert parse_partition_dir(name).topic == topic


@pytest.mark.parametrize("topic", ["..", "../escape", "a/b", "x\0y", "x" * 250])
def test_manager_refuses_escaping_topics(tmp_path: Path, topic: str) -> None:
    d = tmp_path / "logs"
    with LogManager([d], properties=BROKER) as mgr:
        before = listing(tmp_path)
        with pytest.raises(InvalidTopicError):
            mgr.get_or_create_log(topic, 0)
        with pytest.raises(InvalidPartitionDirError):
            mgr.get_or_create_log("fine", -1)
        assert listing(tmp_path) == before


def _outside_partition(tmp_path: Path) -> tuple[Path, bytes]:
    """A real partition dir outside the log dir, with one segment holding garbage at its end."""
    outside = tmp_path / "outside" / "victim-0"
    outside.mkdir(parents=True)
    data = build_batch([(b"k", b"v")], timestamp=1) + b"NOT A BATCH, MUST SURVIVE"
    (outside / "00000000000000000000.log").write_bytes(data)
    return outside, data


def test_symlinked_partition_dir_not_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A partition dir that is a symlink to a dir outside the log dir is not loaded, not recovered, not deleted."""
    outside, data = _outside_partition(tmp_path)
    d = tmp_path / "logs"
    d.mkdir()
    (d / "victim-0").symlink_to(outside, target_is_directory=True)
    snapshot = listing(outside)
    with caplog.at_level(logging.WARNING), LogManager([d], properties=BROKER) as mgr:  # no marker: unclean
        assert mgr.get_log("victim", 0) is None
        assert mgr.offline_log_dirs == []
    assert (outside / "00000000000000000000.log").read_bytes() == data
    assert listing(outside) == snapshot


def test_symlinked_partition_dir_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    outside, _ = _outside_partition(tmp_path)
    d = tmp_path / "logs"
    d.mkdir()
    (d / "victim-0").symlink_to(outside, target_is_directory=True)
    with caplog.at_level(logging.WARNING), LogManager([d], properties=BROKER):
        pass
    assert any("victim-0" in r.getMessage() for r in caplog.records)


def test_symlinked_segment_not_truncated(tmp_path: Path) -> None:
    """A ``.log`` inside a partition dir that links to a file outside: unclean recovery must not truncate (or
    otherwise write) the outside file."""
    outside, data = _outside_partition(tmp_path)
    d = tmp_path / "logs"
    with LogManager([d], properties=BROKER) as mgr:
        log = mgr.get_or_create_log("t", 0)
        part = Path(log.dir)
    for f in part.glob("00000000000000000000.*"):
        f.unlink()
    (part / "00000000000000000000.log").symlink_to(outside / "00000000000000000000.log")
    (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
    try:
        with LogManager([d], properties=BROKER) as mgr:
            mgr.get_log("t", 0)
    except KafkaLogError:
        pass  # refusing the partition (or the dir) is fine
    assert (outside / "00000000000000000000.log").read_bytes() == data, "recovery truncated a file outside the log dir"


def test_checkpoint_naming_escaping_topic_is_refused(tmp_path: Path) -> None:
    """A crafted recovery-point checkpoint naming '../x' is malformed (and the manager creates nothing for it)."""
    from kafkalog.checkpoint.offset_checkpoint import parse_offset_checkpoint

    with pytest.raises(CorruptCheckpointError):
        parse_offset_checkpoint(b"0\n1\n../escape 0 5\n")
    d = tmp_path / "logs"
    with LogManager([d], properties=BROKER):
        pass
    (d / "recovery-point-offset-checkpoint").write_bytes(b"0\n1\n../escape 0 5\n")
    (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
    before = listing(tmp_path)
    with LogManager([d], properties=BROKER) as mgr:
        assert mgr.all_logs() == []
    after = [p for p in listing(tmp_path) if not p.endswith((".lock", "cleanshutdown", "checkpoint"))]
    assert after == [p for p in before if not p.endswith((".lock", "cleanshutdown", "checkpoint"))]
    assert not (tmp_path / "escape-0").exists()

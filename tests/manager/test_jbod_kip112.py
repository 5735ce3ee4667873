"""KIP-112's new-vs-existing rule of ``LogManager.get_or_create_log``: every branch, with real offline dirs (a dir
that cannot be a directory at startup, and a dir that fails at run time through a real I/O error)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, NoLiveLogDirsError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager

CFG = LogConfig.from_properties({"segment.bytes": 1500, "index.interval.bytes": 200})


def _fail_at_runtime(m: LogManager, log_dir: Path, topic: str, partition: int) -> None:
    """A real I/O error: the partition dir vanishes under the running manager and a roll hits ENOENT."""
    shutil.rmtree(log_dir / f"{topic}-{partition}")
    with pytest.raises(KafkaStorageError):
        m.roll(topic, partition)
    assert str(log_dir) in m.offline_log_dirs


def _partition_dirs(*dirs: Path) -> list[str]:
    return sorted(p.name for d in dirs if d.is_dir() for p in d.iterdir() if p.is_dir())


def test_existing_log_is_returned_whatever_is_new_says(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        log = m.get_or_create_log("t", 0)
        m.append("t", 0, [(b"k", b"v")])
        assert m.get_or_create_log("t", 0, is_new=False) is log
        assert m.get_or_create_log("t", 0, is_new=True) is log


def test_no_offline_dir_creates_even_when_not_new(tmp_path: Path) -> None:
    with LogManager([tmp_path / "a", tmp_path / "b"], log_config=CFG) as m:
        assert m.offline_log_dirs == []
        log = m.get_or_create_log("existing", 3, is_new=False)
        assert m.get_log("existing", 3) is log
        assert log.log_end_offset == 0


def test_offline_at_startup_refuses_a_missing_existing_replica(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("not a directory: this log dir is offline")
    with LogManager([a, b], log_config=CFG) as m:
        assert m.offline_log_dirs == [str(b)]
        with pytest.raises(KafkaStorageError, match="offline"):
            m.get_or_create_log("maybe-on-b", 0, is_new=False)
        assert m.get_log("maybe-on-b", 0) is None
        assert _partition_dirs(a) == []  # nothing half-created
        log = m.get_or_create_log("brand-new", 0, is_new=True)
        assert m.log_dir_of("brand-new", 0) == str(a)
        assert log.log_end_offset == 0


def test_offline_at_runtime_refuses_the_replica_it_held_and_keeps_its_data(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        m.get_or_create_log("t", 1)
        on_b = [p for p in (0, 1) if m.log_dir_of("t", p) == str(b)][0]
        on_a = 1 - on_b
        for i in range(20):
            m.append("t", on_a, [(f"k{i}".encode(), b"v" * 50)])
        m.get_or_create_log("sacrificed", 0)
        m.get_or_create_log("sacrificed", 1)  # one of the two lands on b: its dir is the one removed
        victim = [p for p in (0, 1) if m.log_dir_of("sacrificed", p) == str(b)][0]
        _fail_at_runtime(m, b, "sacrificed", victim)
        assert ("t", on_b) in m.offline_partitions()[str(b)]
        # The replica that lived on b is not re-created empty on a...
        with pytest.raises(KafkaStorageError):
            m.get_or_create_log("t", on_b, is_new=False)
        # ...nor is any other replica not found on a live dir...
        with pytest.raises(KafkaStorageError):
            m.get_or_create_log("other", 0, is_new=False)
        assert not (a / f"t-{on_b}").exists() and not (a / "other-0").exists()
        # ...the replica found on the live dir is served...
        assert m.get_or_create_log("t", on_a, is_new=False).log_end_offset == 20
        # ...and a replica the caller says is new is created on the live dir, even one b held (the controller
        # decided it is new, e.g. a re-created topic).
        m.get_or_create_log("fresh", 0, is_new=True)
        assert m.log_dir_of("fresh", 0) == str(a)


def test_refused_replica_is_back_with_its_data_after_restart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        m.get_or_create_log("t", 1)
        on_b = [p for p in (0, 1) if m.log_dir_of("t", p) == str(b)][0]
        for i in range(12):
            m.append("t", on_b, [(f"k{i}".encode(), b"v" * 50)])
    moved = tmp_path / "b-away"
    b.rename(moved)
    b.write_text("disk gone")
    with LogManager([a, b], log_config=CFG) as m:
        with pytest.raises(KafkaStorageError):
            m.get_or_create_log("t", on_b, is_new=False)
    b.unlink()
    moved.rename(b)
    with LogManager([a, b], log_config=CFG) as m:
        assert m.get_or_create_log("t", on_b, is_new=False).log_end_offset == 12


def test_no_live_dir_left(tmp_path: Path) -> None:
    a = tmp_path / "a"
    with LogManager([a], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        shutil.rmtree(a / "t-0")
        with pytest.raises(NoLiveLogDirsError):
            m.roll("t", 0)
        with pytest.raises(NoLiveLogDirsError):
            m.get_or_create_log("t", 1, is_new=True)
        with pytest.raises(NoLiveLogDirsError):
            m.get_or_create_log("t", 1, is_new=False)

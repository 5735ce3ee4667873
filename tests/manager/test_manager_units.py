"""The manager's small parts on their own: failure channel, dir lock, placement, scheduler, meta.properties."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kafkalog.checkpoint.meta_properties import MetaProperties
from kafkalog.errors import ConfigError, InconsistentMetadataError, LogDirLockedError
from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.lock import DirLock
from kafkalog.manager.log_dir import normalize_dirs, reconcile_meta_properties
from kafkalog.manager.log_manager import BrokerConfig
from kafkalog.manager.placement import next_log_dirs
from kafkalog.manager.scheduler import Scheduler
from kafkalog.names import is_reserved_directory_id

# --- failure channel -----------------------------------------------------------------------------------------


def test_failure_channel_hands_out_each_dir_once_under_contention() -> None:
    ch = LogDirFailureChannel()
    firsts: list[bool] = []
    barrier = threading.Barrier(16)

    def report(i: int) -> None:
        barrier.wait()
        firsts.append(ch.maybe_add_offline_dir("/d1" if i % 2 else "/d2", OSError(5, "EIO")))

    threads = [threading.Thread(target=report, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert firsts.count(True) == 2
    assert sorted(ch.drain()) == ["/d1", "/d2"]
    assert ch.drain() == []
    assert ch.has_offline_dir("/d1") and not ch.has_offline_dir("/d3")
    assert isinstance(ch.cause("/d1"), OSError)
    # Reported again later: still not re-queued.
    assert ch.maybe_add_offline_dir("/d1", OSError()) is False
    assert ch.take_next(timeout=0) is None


# --- lock ----------------------------------------------------------------------------------------------------


def test_lock_is_exclusive_within_a_process(tmp_path: Path) -> None:
    lock = DirLock.acquire(str(tmp_path))
    with pytest.raises(LogDirLockedError):
        DirLock.acquire(str(tmp_path))
    lock.release()
    lock.release()  # idempotent
    DirLock.acquire(str(tmp_path)).release()


def test_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    lock = DirLock.acquire(str(tmp_path))
    script = textwrap.dedent(
        f"""
        from kafkalog.manager.lock import DirLock
        from kafkalog.errors import LogDirLockedError
        try:
            DirLock.acquire({str(tmp_path)!r})
        except LogDirLockedError as e:
            print("LOCKED", e)
        else:
            print("ACQUIRED")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.startswith("LOCKED") and "another process" in out
    lock.release()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ACQUIRED")


# --- placement -----------------------------------------------------------------------------------------------


def test_placement_single_dir_and_fewest_partitions() -> None:
    assert next_log_dirs(["/a"], ["/a", "/a"]) == ["/a"]
    assert next_log_dirs(["/a", "/b", "/c"], ["/a", "/a", "/b", "/x"]) == ["/c", "/b", "/a"]
    # Ties keep the configured order; logs on dirs that are not live do not count.
    assert next_log_dirs(["/a", "/b"], ["/offline"]) == ["/a", "/b"]


# --- scheduler -----------------------------------------------------------------------------------------------


def test_scheduler_runs_periodic_and_once_then_stops_cleanly() -> None:
    s = Scheduler(threads=2, name="test-sched")
    s.startup()
    periodic = threading.Event()
    count = {"n": 0}

    def tick() -> None:
        count["n"] += 1
        if count["n"] >= 3:
            periodic.set()

    once = threading.Event()
    s.schedule("tick", tick, period_ms=1)
    s.schedule("once", once.set, delay_ms=1)
    s.schedule("boom", lambda: 1 / 0)  # a failing task must not kill the worker
    assert periodic.wait(10) and once.wait(10)
    s.shutdown()
    assert not s.is_running
    assert not [t for t in threading.enumerate() if t.name.startswith("test-sched")]


def test_scheduler_cancel() -> None:
    s = Scheduler(threads=1, name="test-cancel")
    s.startup()
    ran = threading.Event()
    task = s.schedule("never", ran.set, delay_ms=50)
    task.cancel()
    done = threading.Event()
    s.schedule("after", done.set, delay_ms=100)
    assert done.wait(10)
    assert not ran.is_set()
    s.shutdown()


# --- dirs and meta.properties --------------------------------------------------------------------------------


def test_normalize_dirs_rejects_duplicates_by_real_path(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert normalize_dirs(f"{tmp_path}/a,{tmp_path}/b") == [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(ConfigError, match="duplicate"):
        normalize_dirs([tmp_path / "a", tmp_path / "link"])
    with pytest.raises(ConfigError, match="duplicate"):
        normalize_dirs([tmp_path / "a", f"{tmp_path}/x/../a/"])
    with pytest.raises(ConfigError):
        normalize_dirs([])


def test_meta_reconcile_generates_unreserved_ids_and_agrees() -> None:
    m = MetaProperties(1, "C1", 3, "T3JhY2xlRGlyZWN0MDAwMQ")
    out = reconcile_meta_properties({"/a": m, "/b": None}, cluster_id=None, node_id=None)
    assert out["/a"] == m
    assert out["/b"].cluster_id == "C1" and out["/b"].node_id == 3 and out["/b"].version == 1
    assert out["/b"].directory_id != m.directory_id and not is_reserved_directory_id(out["/b"].directory_id)
    # An old file without directory.id gets one, keeping its version and fields.
    old = MetaProperties(0, "C1", 3, None)
    out = reconcile_meta_properties({"/a": old}, cluster_id="C1", node_id=3)
    assert out["/a"].version == 0 and out["/a"].directory_id is not None
    # Nothing known: a version-0 file with only a directory id.
    out = reconcile_meta_properties({"/a": None}, cluster_id=None, node_id=None)
    assert out["/a"].version == 0 and out["/a"].cluster_id is None


@pytest.mark.parametrize(
    "found, kw",
    [
        ({"/a": MetaProperties(1, "C1", 1), "/b": MetaProperties(1, "C2", 1)}, {}),
        ({"/a": MetaProperties(1, "C1", 1), "/b": MetaProperties(1, "C1", 2)}, {}),
        ({"/a": MetaProperties(1, "C1", 1)}, {"cluster_id": "C9"}),
        ({"/a": MetaProperties(1, "C1", 1)}, {"node_id": 7}),
        ({"/a": MetaProperties(1, "C1", 1, "T3JhY2xlRGlyZWN0MDAwMQ"),
          "/b": MetaProperties(1, "C1", 1, "T3JhY2xlRGlyZWN0MDAwMQ")}, {}),
        ({"/a": MetaProperties(1, "C1", 1, "AAAAAAAAAAAAAAAAAAAAAQ")}, {}),  # UNASSIGNED: reserved
    ],
)
def test_meta_reconcile_refuses_disagreement(found, kw) -> None:
    kw = {"cluster_id": None, "node_id": None, **kw}
    with pytest.raises(InconsistentMetadataError):
        reconcile_meta_properties(found, **kw)


def test_broker_config_keys_and_errors() -> None:
    c = BrokerConfig.from_properties(
        {"num.recovery.threads.per.data.dir": "3", "sanity.check.all.logs.enabled": "false", "node.id": 4,
         "log.retention.check.interval.ms": 1000, "some.other.broker.key": "x"}
    )
    assert c.num_recovery_threads_per_data_dir == 3 and c.sanity_check_all_logs is False and c.node_id == 4
    assert c.retention_check_ms == 1000 and c.extra == {"some.other.broker.key": "x"}
    assert BrokerConfig().sanity_check_all_logs is True
    for bad in ({"num.recovery.threads.per.data.dir": 0}, {"sanity.check.all.logs.enabled": "yes"},
                {"node.id": "x"}, {"node.id": 1, "broker.id": 2}):
        with pytest.raises(ConfigError):
            BrokerConfig.from_properties(bad)

"""LogManager over real dirs: startup and restart (clean, unclean, lost or corrupt checkpoints, damaged tails),
locks, duplicate dirs, cluster ids, suffixed partition dirs, placement, the KIP-112 rule and Kafka's golden dir."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kafkalog.checkpoint.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.errors import (
    ConfigError,
    InconsistentMetadataError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirLockedError,
)
from kafkalog.log.config import LogConfig
from kafkalog.manager import CheckStatus, LogManager
from tests.conftest import GOLDEN, needs_golden

CFG = LogConfig.from_properties({"segment.bytes": 1500, "index.interval.bytes": 200})
VALUE = b"v" * 80


def _fill(m: LogManager, partitions: int = 4, appends: int = 60, topic: str = "t") -> dict[tuple[str, int], int]:
    for p in range(partitions):
        m.get_or_create_log(topic, p)
    for i in range(appends):
        m.append(topic, i % partitions, [(f"k{i}".encode(), VALUE)])
    return {(topic, p): m.get_log(topic, p).log_end_offset for p in range(partitions)}


def _values(m: LogManager, topic: str, partition: int) -> list[bytes]:
    out = []
    offset = m.get_log(topic, partition).log_start_offset
    end = m.get_log(topic, partition).log_end_offset
    while offset < end:
        batches = m.read(topic, partition, offset)
        for b in batches:
            out.extend(r.key for r in b.records())
        offset = batches[-1].last_offset + 1
    return out


def _crash_script(dirs: list[Path], body: str) -> str:
    return textwrap.dedent(
        f"""
        import os
        from kafkalog.manager import LogManager
        from kafkalog.log.config import LogConfig
        m = LogManager({[str(d) for d in dirs]!r},
                       log_config=LogConfig.from_properties({{"segment.bytes": 1500, "index.interval.bytes": 200}}))
        m.startup()
        """
    ) + textwrap.dedent(body) + "\nos._exit(0)\n"


def _run(script: str) -> str:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout


# --- startup / shutdown basics ---------------------------------------------------------------------------------


def test_clean_restart_keeps_everything_and_uses_the_marker(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, log_config=CFG, properties={"cluster.id": "C1", "node.id": 5}) as m:
        ends = _fill(m)
        ids = {d: m.directory_id(d) for d in dirs}
        keys = {k: _values(m, *k) for k in ends}
        assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    for d in dirs:
        assert json.loads((d / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": -1}
        meta = read_meta_properties(d / "meta.properties")
        assert (meta.version, meta.cluster_id, meta.node_id, meta.directory_id) == (1, "C1", 5, ids[d])
        rp = read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
        assert all(rp[k] == ends[k] for k in rp) and rp
    with LogManager(dirs, log_config=CFG) as m:
        assert not (dirs[0] / ".kafka_cleanshutdown").exists()  # deleted before loading
        assert {d: m.directory_id(d) for d in dirs} == ids
        assert {k: m.get_log(*k).log_end_offset for k in ends} == ends
        assert {k: _values(m, *k) for k in ends} == keys
        assert all(s.status is CheckStatus.CHECKED for s in m.sanity_check_states().values())


def test_unclean_restart_recovers_and_truncates_a_torn_tail(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    out = _run(_crash_script(dirs, """
        for p in range(2):
            m.get_or_create_log("t", p)
        for i in range(40):
            m.append("t", i % 2, [(b"k%d" % i, b"v" * 80)])
        m.checkpoint_recovery_offsets()       # recovery points still 0: nothing flushed
        for p in range(2):
            print(p, m.log_dir_of("t", p), m.get_log("t", p).log_end_offset)
    """))
    where = {int(p): (d, int(e)) for p, d, e in (line.split() for line in out.splitlines())}
    d0, end0 = where[0]
    assert not (Path(d0) / ".kafka_cleanshutdown").exists()
    active = sorted((Path(d0) / "t-0").glob("*.log"))[-1]
    with open(active, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x50garbage that is not a batch")
    with LogManager(dirs, log_config=CFG) as m:
        assert m.get_log("t", 0).log_end_offset == end0
        assert m.get_log("t", 1).log_end_offset == where[1][1]
        assert len(_values(m, "t", 0)) == end0
        info = m.append("t", 0, [(b"after", b"x")])
        assert info.first_offset == end0
    with LogManager(dirs, log_config=CFG) as m:
        assert _values(m, "t", 0)[-1] == b"after"


@pytest.mark.parametrize("damage", ["lost", "corrupt"])
def test_lost_or_corrupt_recovery_checkpoint(tmp_path: Path, damage: str, caplog) -> None:
    dirs = [tmp_path / "a"]
    _run(_crash_script(dirs, """
        m.get_or_create_log("t", 0)
        for i in range(30):
            m.append("t", 0, [(b"k%d" % i, b"v" * 80)])
        m.flush("t", 0)
        m.checkpoint_recovery_offsets()
    """))
    ckpt = dirs[0] / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(ckpt) == {("t", 0): 30}
    if damage == "lost":
        ckpt.unlink()
    else:
        ckpt.write_text("0\n1\nt 0 not-a-number\n")
    with LogManager(dirs, log_config=CFG) as m:
        assert m.get_log("t", 0).log_end_offset == 30
        assert len(_values(m, "t", 0)) == 30
    if damage == "corrupt":
        assert "resetting its offsets to 0" in caplog.text
    assert read_offset_checkpoint(ckpt) == {("t", 0): 30}


def test_marker_present_but_tail_damaged_after_recovery_point(tmp_path: Path) -> None:
    """A clean-shutdown marker does not prove the tail is whole: the load-time check finds the bytes after the
    last batch and recovery cuts exactly them."""
    dirs = [tmp_path / "a"]
    with LogManager(dirs, log_config=CFG) as m:
        _fill(m, partitions=1, appends=30)
    expected_end = 30
    for sanity_all in ("true", "false"):
        assert (dirs[0] / ".kafka_cleanshutdown").exists()
        active = sorted((dirs[0] / "t-0").glob("*.log"))[-1]
        size = active.stat().st_size
        with open(active, "ab") as f:
            f.write(b"\x00" * 20 + b"\xff" * 17)
        with LogManager(dirs, log_config=CFG, properties={"sanity.check.all.logs.enabled": sanity_all}) as m:
            state = m.sanity_check_state("t", 0)
            assert m.get_log("t", 0).log_end_offset == expected_end
            assert active.stat().st_size == size
            # The active segment is checked at load in both modes.
            assert state.status is CheckStatus.RECOVERED and state.truncated_bytes == 37
            m.append("t", 0, [(b"after", b"x")])
            assert _values(m, "t", 0)[-1] == b"after"
        expected_end += 1


# --- locks, duplicates, metadata -------------------------------------------------------------------------------


def test_second_manager_on_the_same_dir_fails(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, log_config=CFG):
        with pytest.raises(LogDirLockedError):
            LogManager([tmp_path / "c", tmp_path / "b"]).startup()
        script = f"from kafkalog.manager import LogManager\nLogManager([{str(tmp_path / 'a')!r}]).startup()"
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert proc.returncode != 0 and "LogDirLockedError" in proc.stderr
    # The failed manager released the lock it took on c; everything is free again.
    with LogManager([tmp_path / "c", tmp_path / "b"]):
        pass


def test_duplicate_dirs_rejected(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match="duplicate"):
        LogManager([tmp_path / "a", tmp_path / "alias"])


def test_cluster_id_mismatch_rejected_and_locks_released(tmp_path: Path) -> None:
    for name, cluster in (("a", "C1"), ("b", "C2")):
        (tmp_path / name).mkdir()
        write_meta_properties(tmp_path / name / "meta.properties", MetaProperties(1, cluster, 1))
    with pytest.raises(InconsistentMetadataError):
        LogManager([tmp_path / "a", tmp_path / "b"]).startup()
    with pytest.raises(InconsistentMetadataError):
        LogManager([tmp_path / "a"], properties={"node.id": 2}).startup()
    with LogManager([tmp_path / "a"], properties={"cluster.id": "C1"}) as m:
        assert read_meta_properties(tmp_path / "a" / "meta.properties").directory_id == m.directory_id(tmp_path / "a")


def test_dir_that_is_a_file_goes_offline_others_load(tmp_path: Path) -> None:
    with LogManager([tmp_path / "a"], log_config=CFG) as m:
        ends = _fill(m, partitions=2)
    (tmp_path / "b").write_text("not a dir")
    events = []
    m = LogManager([tmp_path / "a", tmp_path / "b"], log_config=CFG)
    m.add_listener(events.append)
    with m:
        assert m.offline_log_dirs == [str(tmp_path / "b")]
        assert len(events) == 1 and isinstance(events[0].cause, NotADirectoryError)
        assert {k: m.get_log(*k).log_end_offset for k in ends} == ends
        assert m.metrics()["OfflineLogDirectoryCount"] == 1


# --- partition dirs of every kind ------------------------------------------------------------------------------


def test_delete_future_stray_and_junk_entries(tmp_path: Path) -> None:
    now = [1_700_000_000_000]
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _fill(m, partitions=2)
    src = next(d for d in (a, b) if (d / "t-0").exists())
    other = b if src == a else a
    shutil.copytree(src / "t-0", other / ("t-0." + "1" * 32 + "-future"))
    shutil.copytree(src / "t-0", src / ("gone-3." + "2" * 32 + "-delete"))
    shutil.copytree(src / "t-0", src / ("t-9." + "3" * 32 + "-stray"))
    (src / "lost+found").mkdir()
    (src / "not-a-partition").mkdir()
    (src / "some-file-7").write_text("x")
    m = LogManager([a, b], log_config=CFG, clock=lambda: now[0], properties={"file.delete.delay.ms": 1000})
    with m:
        assert m.get_log("t", 0, is_future=True).dir.parent == other
        assert m.get_log("t", 0).dir.parent == src
        assert m.get_log("gone", 3) is None and m.get_log("t", 9) is None
        assert m.stray_logs() == [str(src / ("t-9." + "3" * 32 + "-stray"))]
        assert m.metrics()["FutureLogCount"] == 1
        assert m.delete_logs() == 0  # not due yet
        now[0] += 1000
        assert m.delete_logs() == 1
        assert not (src / ("gone-3." + "2" * 32 + "-delete")).exists()
        assert (src / ("t-9." + "3" * 32 + "-stray")).exists() and (src / "lost+found").exists()
        # Placement counts future logs too: other has t-1? no; count the dirs' logs and check the choice.
        counts = {d: sum(1 for lg in m.all_logs() if lg.dir.parent == d) for d in (a, b)}
        m.get_or_create_log("n", 0)
        chosen = Path(m.log_dir_of("n", 0))
        assert counts[chosen] == min(counts.values())


def test_delete_log_renames_and_removes_later(tmp_path: Path) -> None:
    now = [0]
    with LogManager([tmp_path / "a"], log_config=CFG, clock=lambda: now[0]) as m:
        _fill(m, partitions=2)
        m.delete_log("t", 1)
        assert m.get_log("t", 1) is None
        assert [Path(p).name.endswith("-delete") for p in m.pending_deletions] == [True]
        assert ("t", 1) not in read_offset_checkpoint(tmp_path / "a" / "recovery-point-offset-checkpoint")
        now[0] += 60_000
        assert m.delete_logs() == 1
        assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.is_dir()) == ["t-0"]


# --- placement and the KIP-112 rule ----------------------------------------------------------------------------


def test_placement_fewest_partitions(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    with LogManager(dirs, log_config=CFG) as m:
        for p in range(9):
            m.get_or_create_log("t", p)
        per_dir = [len(m.logs_in_dir(d)) for d in dirs]
        assert per_dir == [3, 3, 3]
        assert [m.log_dir_of("t", p) for p in range(3)] == [str(d) for d in dirs]
        assert m.get_or_create_log("t", 0) is m.get_log("t", 0)
        with pytest.raises(InvalidTopicError):
            m.get_or_create_log("../escape", 0)
        with pytest.raises(InvalidTopicError):
            m.get_or_create_log("a/b", 0)
        with pytest.raises(ValueError):
            m.get_or_create_log("t", -1)


def test_kip112_rule(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("a file: this dir is offline")
    with LogManager([tmp_path / "a"], log_config=CFG) as m:
        m.get_or_create_log("existing", 0, is_new=False)  # no dir offline: created
    with LogManager([tmp_path / "a", tmp_path / "b"], log_config=CFG) as m:
        assert m.offline_log_dirs == [str(tmp_path / "b")]
        assert m.get_or_create_log("existing", 0, is_new=False) is m.get_log("existing", 0)  # found: fine
        with pytest.raises(KafkaStorageError, match="offline"):
            m.get_or_create_log("maybe-on-b", 0, is_new=False)
        assert m.get_log("maybe-on-b", 0) is None
        m.get_or_create_log("brand-new", 0, is_new=True)
        assert m.log_dir_of("brand-new", 0) == str(tmp_path / "a")


def test_topic_id_is_stored_and_checked(tmp_path: Path) -> None:
    tid = "dG9waWNJZAFnb2xkZW4AAQ"
    with LogManager([tmp_path / "a"], log_config=CFG) as m:
        log = m.get_or_create_log("t", 0, topic_id=tid)
        assert log.topic_id == tid
        with pytest.raises(InconsistentMetadataError):
            m.get_or_create_log("t", 0, topic_id="T3JhY2xlRGlyZWN0MDAwMQ")
    with LogManager([tmp_path / "a"], log_config=CFG) as m:
        assert m.get_log("t", 0).topic_id == tid


# --- progress, threads, housekeeping ---------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 3])
def test_progress_callback_and_recovery_threads(tmp_path: Path, threads: int) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, log_config=CFG) as m:
        ends = _fill(m, partitions=6, appends=120)
    segs = {str(d): sum(len(list(p.glob("*.log"))) for p in d.iterdir() if p.is_dir()) for d in dirs}
    seen = []
    lock = threading.Lock()

    def progress(ev) -> None:
        with lock:
            seen.append(ev)

    with LogManager(dirs, log_config=CFG, progress=progress,
                    properties={"num.recovery.threads.per.data.dir": threads}) as m:
        assert {k: m.get_log(*k).log_end_offset for k in ends} == ends
    for d in map(str, dirs):
        mine = [e for e in seen if e.log_dir == d]
        assert mine[0].partitions_remaining == mine[0].partitions_total == 3 and mine[0].partition is None
        assert mine[0].segments_total == segs[d]
        assert sorted(e.partitions_remaining for e in mine[1:]) == [0, 1, 2]
        assert min(e.segments_remaining for e in mine) == 0


def test_background_tasks_write_checkpoints_and_stop_cleanly(tmp_path: Path) -> None:
    props = {"log.flush.offset.checkpoint.interval.ms": 20, "log.flush.start.offset.checkpoint.interval.ms": 20,
             "log.retention.check.interval.ms": 20, "log.flush.scheduler.interval.ms": 20}
    cfg = CFG.with_overrides({"flush.ms": 0})
    before = set(threading.enumerate())
    m = LogManager([tmp_path / "a"], log_config=cfg, properties=props)
    with m:
        _fill(m, partitions=2, appends=20)
        log = m.get_log("t", 0)
        log.maybe_increment_log_start_offset(3)
        ckpt = tmp_path / "a" / "recovery-point-offset-checkpoint"
        lso = tmp_path / "a" / "log-start-offset-checkpoint"
        for _ in range(2000):  # the flusher moves recovery points, the checkpointers write them
            if ckpt.exists() and lso.exists() and read_offset_checkpoint(ckpt) == {("t", 0): 10, ("t", 1): 10} \
                    and read_offset_checkpoint(lso) == {("t", 0): 3}:
                break
            threading.Event().wait(0.01)
        assert read_offset_checkpoint(ckpt) == {("t", 0): 10, ("t", 1): 10}
        assert read_offset_checkpoint(lso) == {("t", 0): 3}
    leaked = [t for t in set(threading.enumerate()) - before if t.is_alive()]
    assert leaked == []


def test_retention_through_the_manager(tmp_path: Path) -> None:
    now = [10_000_000]
    cfg = CFG.with_overrides({"retention.ms": 1000, "file.delete.delay.ms": 0})
    with LogManager([tmp_path / "a"], log_config=cfg, clock=lambda: now[0]) as m:
        m.get_or_create_log("t", 0)
        for _ in range(30):
            m.append("t", 0, [(b"k", VALUE)])
        segments = len(m.get_log("t", 0).segments)
        assert segments > 2
        now[0] += 10_000
        m.cleanup_logs()
        log = m.get_log("t", 0)
        assert len(log.segments) == 1 and log.log_start_offset == 30 and log.log_end_offset == 30
        m.delete_logs()
        assert not list((tmp_path / "a" / "t-0").glob("*.deleted"))


# --- Kafka's golden log dir ------------------------------------------------------------------------------------


@needs_golden
@pytest.mark.parametrize("sanity_all", ["true", "false"])
def test_golden_logdir_loads(golden_copy, sanity_all: str) -> None:
    scenarios = json.loads((GOLDEN / "SCENARIOS.json").read_text())["scenarios"]
    logdir = golden_copy("logdir")
    for p in logdir.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    logdir.chmod(0o755)
    topic_configs = {Path(s["dir"]).name.rsplit("-", 1)[0]: s["topicConfig"] for s in scenarios}
    before = {p.relative_to(logdir): p.read_bytes() for p in logdir.rglob("*") if p.is_file() and p.parent != logdir}
    events = []
    m = LogManager([logdir], topic_configs=topic_configs, properties={"sanity.check.all.logs.enabled": sanity_all})
    m.add_listener(events.append)
    with m:
        assert m.directory_id(logdir) == "T3JhY2xlRGlyZWN0MDAwMQ"
        assert not (logdir / ".kafka_cleanshutdown").exists()
        for s in scenarios:
            topic = Path(s["dir"]).name.rsplit("-", 1)[0]
            log = m.get_log(topic, 0)
            assert (log.log_start_offset, log.log_end_offset) == (s["logStartOffset"], s["logEndOffset"]), topic
            assert log.topic_id == s["topicId"]
            assert len(log.segments) == s["segments"]
        assert len(m.all_logs()) == len(scenarios)
        m.start_sanity_checker().wait()
        states = m.sanity_check_states()
        assert all(st.status is CheckStatus.CHECKED for st in states.values()), states
        assert m.read("golden-deleterecords", 0, 28)[0].base_offset <= 28
    assert events == []
    meta = read_meta_properties(logdir / "meta.properties")
    assert (meta.cluster_id, meta.node_id, meta.directory_id) == ("S2Fma2FPcmFjbGVDbHVzdA", 1, "T3JhY2xlRGlyZWN0MDAwMQ")
    # Checkpoint entries for partitions this dir does not hold were tolerated and are dropped on rewrite.
    rp = read_offset_checkpoint(logdir / "recovery-point-offset-checkpoint")
    assert set(rp) == {(Path(s["dir"]).name.rsplit("-", 1)[0], 0) for s in scenarios}
    assert read_offset_checkpoint(logdir / "log-start-offset-checkpoint") == {("golden-deleterecords", 0): 28}
    # Loading and closing Kafka's files changed no segment or index byte (the checks found nothing to fix).
    after = {p.relative_to(logdir): p.read_bytes() for p in logdir.rglob("*") if p.is_file() and p.parent != logdir}
    changed = sorted(str(k) for k in before if k.suffix in (".log", ".index", ".timeindex", ".txnindex")
                     and after.get(k) != before[k])
    assert changed == []

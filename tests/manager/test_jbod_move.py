"""KIP-113 replica moves: under concurrent appends, kill -9 at every step, failures of either dir mid-move."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.errors import ConfigError, KafkaStorageError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager
from kafkalog.manager.replica_mover import MOVE_STEPS

CFG_PROPS = {"segment.bytes": 2000, "index.interval.bytes": 200}
CFG = LogConfig.from_properties(CFG_PROPS)
VALUE = b"v" * 60
ROOT = Path(__file__).resolve().parents[2]


def _keys(m: LogManager, topic: str = "t", partition: int = 0) -> list[tuple[int, bytes]]:
    log = m.get_log(topic, partition)
    out = []
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        batches = m.read(topic, partition, offset)
        for b in batches:
            out.extend((r.offset, r.key) for r in b.records())
        offset = batches[-1].last_offset + 1
    return out


def _current_dirs(dirs: list[Path], name: str = "t-0") -> list[Path]:
    return [d / name for d in dirs if (d / name).is_dir()]


def _suffixed(dirs: list[Path], suffix: str) -> list[Path]:
    return [p for d in dirs if d.is_dir() for p in d.iterdir() if p.name.endswith(suffix)]


def _hook(m: LogManager, fn) -> None:
    m._replica_mover().step_hook = fn


# --- the happy path ----------------------------------------------------------------------------------------------


def test_move_under_concurrent_appends(tmp_path: Path) -> None:
    """Appends from another thread all along the move: no lost or duplicated offset, the old copy's segments are
    byte-identical to the new ones (the last one up to the swap), both dirs' checkpoints agree with the maps."""
    a, b = tmp_path / "a", tmp_path / "b"
    clock = [1_700_000_000_000]
    m = LogManager([a, b], log_config=CFG, clock=lambda: clock[0])
    m.startup()
    try:
        m.get_or_create_log("t", 0)
        assert m.log_dir_of("t", 0) == str(a)
        for i in range(300):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])
        stop = threading.Event()
        appended = [300]
        progressed = threading.Condition()
        errors: list[BaseException] = []

        def appender() -> None:
            try:
                while not stop.is_set():
                    n = appended[0]
                    info = m.append("t", 0, [(f"{n}".encode(), VALUE)])
                    assert info.first_offset == n
                    with progressed:
                        appended[0] = n + 1
                        progressed.notify_all()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        def wait_for(n: int) -> None:
            with progressed:
                assert progressed.wait_for(lambda: appended[0] >= n or errors, timeout=60)

        def hook(key, step) -> None:
            # Make sure appends really interleave with each phase of the copy (event-driven, no sleeps).
            if step in ("future_created", "segments_copied", "future_opened", "caught_up"):
                wait_for(appended[0] + 40)

        _hook(m, hook)
        t = threading.Thread(target=appender)
        t.start()
        progress = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        wait_for(appended[0] + 40)  # appends continue on the new log
        stop.set()
        t.join()
        assert not errors, errors
        assert progress.state == "completed", progress
        assert progress.bytes_copied > 0 and progress.pause_ms is not None
        assert m.log_dir_of("t", 0) == str(b)
        assert _keys(m) == [(i, f"{i}".encode()) for i in range(appended[0])]

        old = _suffixed([a], "-delete")
        assert len(old) == 1 and _current_dirs([a, b]) == [b / "t-0"]
        old_logs = sorted(p.name for p in old[0].iterdir() if p.suffix == ".log")
        for name in old_logs[:-1]:  # inactive at the swap: every file identical
            for suffix in (".log", ".index", ".timeindex"):
                f = name[:-4] + suffix
                assert filecmp.cmp(old[0] / f, b / "t-0" / f, shallow=False), f
        last_old = (old[0] / old_logs[-1]).read_bytes()  # the active one: a prefix of the new file
        assert (b / "t-0" / old_logs[-1]).read_bytes()[: len(last_old)] == last_old

        m.checkpoint_recovery_offsets()
        assert ("t", 0) not in read_offset_checkpoint(a / "recovery-point-offset-checkpoint")
        assert ("t", 0) in read_offset_checkpoint(b / "recovery-point-offset-checkpoint")
        # The old copy goes after file.delete.delay.ms.
        m.delete_logs()
        assert old[0].exists()
        clock[0] += 60_000
        assert m.delete_logs() == 1 and not old[0].exists()
        assert m.check_assignments({("t", 0): m.directory_id(b)}) == []
    finally:
        m.shutdown()
    with LogManager([a, b], log_config=CFG) as m2:
        assert m2.log_dir_of("t", 0) == str(b)
        assert _keys(m2) == [(i, f"{i}".encode()) for i in range(appended[0])]


def test_move_of_a_single_segment_log_with_a_log_start_inside_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=LogConfig()) as m:
        log = m.get_or_create_log("t", 0)
        for i in range(10):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])
        log.maybe_increment_log_start_offset(4)
        assert m.alter_replica_log_dir("t", 0, str(b), wait=True).state == "completed"
        new = m.get_log("t", 0)
        assert (new.log_start_offset, new.log_end_offset) == (4, 10)
        assert [k for _, k in _keys(m)] == [f"{i}".encode() for i in range(4, 10)]


def test_move_arguments(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    c.write_text("offline")
    with LogManager([a, b, c], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        with pytest.raises(ConfigError):
            m.alter_replica_log_dir("t", 0, str(tmp_path / "elsewhere"))
        with pytest.raises(KafkaStorageError):
            m.alter_replica_log_dir("t", 0, str(c))
        with pytest.raises(KeyError):
            m.alter_replica_log_dir("nope", 0, str(b))
        same = m.alter_replica_log_dir("t", 0, str(a), wait=True)
        assert same.state == "completed" and m.log_dir_of("t", 0) == str(a)
        assert m.move_progress("t", 0)["state"] == "completed"
        assert m.move_progress("t", 1) is None


def test_interrupted_move_resumes_and_abort_drops_the_future(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        for i in range(200):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])

        def interrupt(key, step) -> None:
            if step == "caught_up":
                raise RuntimeError("test: interrupt")

        _hook(m, interrupt)
        assert m.alter_replica_log_dir("t", 0, str(b), wait=True).state == "failed"
        fut = m.get_log("t", 0, is_future=True)
        assert fut is not None and len(_suffixed([b], "-future")) == 1
        assert ("t", 0) in read_offset_checkpoint(b / "recovery-point-offset-checkpoint")  # futures checkpointed
        for i in range(200, 230):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])
        # Abort: the future is renamed -delete and queued.
        m.abort_replica_move("t", 0)
        assert m.get_log("t", 0, is_future=True) is None and _suffixed([b], "-future") == []
        assert len(_suffixed([b], "-delete")) == 1
        # Interrupt again, then resume from the future that is left.
        assert m.alter_replica_log_dir("t", 0, str(b), wait=True).state == "failed"
        copied = m.move_progress("t", 0)["bytes_copied"]
        _hook(m, None)
        done = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert done.state == "completed" and done.bytes_copied < copied  # resumed, not recopied
        assert _keys(m) == [(i, f"{i}".encode()) for i in range(230)]


def test_a_new_target_drops_the_old_future(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with LogManager([a, b, c], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        for i in range(50):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])
        _hook(m, lambda key, step: (_ for _ in ()).throw(RuntimeError("stop")) if step == "future_opened" else None)
        m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert len(_suffixed([b], "-future")) == 1
        _hook(m, None)
        assert m.alter_replica_log_dir("t", 0, str(c), wait=True).state == "completed"
        assert _suffixed([b], "-future") == [] and m.log_dir_of("t", 0) == str(c)


# --- crash at every step: kill -9 of a child ---------------------------------------------------------------------


_CHILD = textwrap.dedent(
    """
    import os, signal, sys, json
    from kafkalog.manager import LogManager
    from kafkalog.log.config import LogConfig
    cfg = json.loads(sys.argv[1])
    m = LogManager(cfg["dirs"], log_config=LogConfig.from_properties(cfg["props"]))
    m.startup()
    m.get_or_create_log("t", 0)
    for i in range(cfg["n"]):
        m.append("t", 0, [(str(i).encode(), b"v" * 60)])
    m.flush("t", 0)
    m.checkpoint_recovery_offsets()
    flushed = cfg["n"]

    def hook(key, step):
        if step == "future_opened":  # appends between the copy and the swap, flushed before the kill
            for i in range(flushed, flushed + 25):
                m.append("t", 0, [(str(i).encode(), b"v" * 60)])
            m.flush("t", 0)
        if step == cfg["step"]:
            sys.stdout.write("KILL\\n"); sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    m._replica_mover().step_hook = hook
    m.alter_replica_log_dir("t", 0, cfg["dirs"][1], wait=True)
    print("DONE", flush=True)
    """
)


@pytest.mark.parametrize("step", MOVE_STEPS)
def test_kill9_at_each_step_recovers_one_current_log(tmp_path: Path, step: str) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    cfg = {"dirs": [str(d) for d in dirs], "props": CFG_PROPS, "n": 150, "step": step}
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cfg)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "KILL" in proc.stdout
    flushed = 150 + (25 if MOVE_STEPS.index(step) >= MOVE_STEPS.index("future_opened") else 0)
    swapped = MOVE_STEPS.index(step) >= MOVE_STEPS.index("source_renamed")

    with LogManager(dirs, log_config=CFG) as m:
        assert len(_current_dirs(dirs)) == 1
        assert m.log_dir_of("t", 0) == str(dirs[1] if swapped else dirs[0])
        keys = _keys(m)
        assert keys[:flushed] == [(i, f"{i}".encode()) for i in range(flushed)]
        assert [o for o, _ in keys] == list(range(len(keys)))  # no gap, no duplicate
        future = m.get_log("t", 0, is_future=True)
        if swapped:
            assert future is None
        elif future is not None:  # a leftover future stays a future, and the move resumes from it
            assert str(future.dir).startswith(str(dirs[1]))
        if not swapped:
            assert m.alter_replica_log_dir("t", 0, str(dirs[1]), wait=True).state == "completed"
        m.append("t", 0, [(b"after", VALUE)])
        total = len(keys) + 1
        assert m.check_assignments({("t", 0): m.directory_id(dirs[1])}) == []
    with LogManager(dirs, log_config=CFG) as m:
        assert _current_dirs(dirs) == [dirs[1] / "t-0"]
        assert len(_keys(m)) == total
        assert m.get_log("t", 0, is_future=True) is None


def test_future_without_current_and_without_its_pair_is_not_promoted(tmp_path: Path) -> None:
    """The current log may be on a dir that is offline now: a partial future must not become the current log."""
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        for i in range(100):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])
        _hook(m, lambda key, step: (_ for _ in ()).throw(RuntimeError("stop")) if step == "future_opened" else None)
        m.alter_replica_log_dir("t", 0, str(b), wait=True)
        a_id, b_id = m.directory_id(a), m.directory_id(b)
    away = tmp_path / "a-away"
    a.rename(away)
    a.write_text("disk gone")
    with LogManager([a, b], log_config=CFG) as m:
        assert m.get_log("t", 0) is None and m.get_log("t", 0, is_future=True) is not None
        kinds = {mm.kind.value for mm in m.check_assignments({("t", 0): a_id})}
        # a's meta.properties is unreadable, so its id is unknown here too.
        assert kinds == {"future_replica_pending", "assigned_to_unknown_dir"}
        # Kafka's metadata rule: the controller assigns the future's dir -> the future is promoted.
        assert m.recover_abandoned_future_logs({("t", 0): b_id}) == [("t", 0)]
        assert m.log_dir_of("t", 0) == str(b) and m.get_log("t", 0, is_future=True) is None
        keys = _keys(m)  # what the future had copied (its inactive segments): the operator's explicit choice
        assert 0 < len(keys) < 100 and keys == [(i, f"{i}".encode()) for i in range(len(keys))]


# --- a dir failing mid-move --------------------------------------------------------------------------------------


def _fail_dir(m: LogManager, log_dir: Path, topic: str = "victim") -> None:
    """A real I/O error on ``log_dir``: a partition dir removed under the manager, then a roll (ENOENT)."""
    shutil.rmtree(log_dir / f"{topic}-0")
    with pytest.raises(KafkaStorageError):
        m.roll(topic, 0)
    assert str(log_dir) in m.offline_log_dirs


def test_target_fails_mid_move_source_keeps_serving(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        m.get_or_create_log("victim", 0)
        assert m.log_dir_of("victim", 0) == str(b)
        for i in range(200):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])

        def hook(key, step) -> None:
            if step == "future_opened":
                _fail_dir(m, b)

        _hook(m, hook)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "failed" and "offline" in (p.error or "")
        assert m.get_log("t", 0, is_future=True) is None
        assert m.log_dir_of("t", 0) == str(a)
        m.append("t", 0, [(b"200", VALUE)])
        assert _keys(m) == [(i, f"{i}".encode()) for i in range(201)]
    with LogManager([a, b], log_config=CFG) as m:  # b is back: the abandoned future is a future, resumable
        assert m.log_dir_of("t", 0) == str(a)
        assert len(_keys(m)) == 201


def test_target_fails_at_the_rename_the_source_is_put_back(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        for i in range(120):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])

        def hook(key, step) -> None:
            if step == "source_renamed":  # the future dir vanishes: its rename fails (ENOENT)
                shutil.rmtree(_suffixed([b], "-future")[0])

        _hook(m, hook)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "failed" and m.offline_log_dirs == [str(b)]
        assert m.log_dir_of("t", 0) == str(a) and _current_dirs([a]) == [a / "t-0"]
        assert _suffixed([a], "-delete") == []
        m.append("t", 0, [(b"120", VALUE)])
        assert _keys(m) == [(i, f"{i}".encode()) for i in range(121)]
    with LogManager([a, b], log_config=CFG) as m:
        assert len(_keys(m)) == 121


def test_source_fails_mid_move_future_left_intact(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        m.get_or_create_log("x", 0)
        m.get_or_create_log("victim", 0)  # a: t, victim; b: x
        assert m.log_dir_of("victim", 0) == str(a)
        for i in range(200):
            m.append("t", 0, [(f"{i}".encode(), VALUE)])

        def hook(key, step) -> None:
            if step == "future_opened":
                _fail_dir(m, a)

        _hook(m, hook)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "aborted"
        with pytest.raises(KafkaStorageError):
            m.append("t", 0, [(b"k", VALUE)])  # the partition is offline with its dir
        fut = m.get_log("t", 0, is_future=True)
        assert fut is not None and fut.log_end_offset > 0  # the other side is intact
        m.append("x", 0, [(b"k", VALUE)])  # b keeps serving
    with LogManager([a, b], log_config=CFG) as m:
        assert m.log_dir_of("t", 0) == str(a) and len(_keys(m)) == 200


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_target_disk_full_during_the_copy(tmp_path: Path) -> None:
    """A real ENOSPC from a small tmpfs target while copy_file_range runs: only the target goes offline."""
    a, b = tmp_path / "a", tmp_path / "b"
    if not _mount_tmpfs(b, "256k"):
        pytest.skip("needs root and permission to mount tmpfs")
    try:
        with LogManager([a, b], log_config=LogConfig.from_properties({"segment.bytes": 64 * 1024})) as m:
            m.get_or_create_log("t", 0)
            for i in range(6000):
                m.append("t", 0, [(f"{i}".encode(), VALUE)])
            p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
            assert p.state == "failed" and m.offline_log_dirs == [str(b)]
            assert m.log_dir_of("t", 0) == str(a)
            m.append("t", 0, [(b"6000", VALUE)])
            assert len(_keys(m)) == 6001
    finally:
        subprocess.run(["umount", str(b)], capture_output=True)


def test_shutdown_during_a_move_leaves_a_resumable_future(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    m = LogManager([a, b], log_config=CFG)
    m.startup()
    m.get_or_create_log("t", 0)
    for i in range(150):
        m.append("t", 0, [(f"{i}".encode(), VALUE)])
    opened = threading.Event()

    def hook(key, step) -> None:
        if step == "future_opened":
            opened.set()
            while not m._stopped:  # hold the move here until shutdown has begun
                threading.Event().wait(0.01)

    _hook(m, hook)
    m.alter_replica_log_dir("t", 0, str(b))
    assert opened.wait(60)
    m.shutdown()
    assert m.move_progress("t", 0)["state"] == "aborted"
    with LogManager([a, b], log_config=CFG) as m2:
        assert m2.log_dir_of("t", 0) == str(a) and m2.get_log("t", 0, is_future=True) is not None
        assert m2.alter_replica_log_dir("t", 0, str(b), wait=True).state == "completed"
        assert _keys(m2) == [(i, f"{i}".encode()) for i in range(150)]

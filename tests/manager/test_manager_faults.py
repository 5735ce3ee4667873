"""Dir failures under pyfakefs: disk full, dir removed, permission denied; at startup and at run time.

Each case checks the same outcome: the right dir goes offline, listeners hear about it exactly once, the other
dir keeps serving reads, appends and new partitions, and no checkpoint file is ever torn.
"""

from __future__ import annotations

import os
import shutil
import threading
import traceback

import pytest
from pyfakefs.fake_filesystem_unittest import Patcher

from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.errors import KafkaStorageError, NoLiveLogDirsError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogDirOfflineEvent, LogManager
from kafkalog.manager.lock import DirLock
from tests.threads import run_threads

CFG = LogConfig.from_properties({"segment.bytes": 4000, "segment.index.bytes": 4096, "index.interval.bytes": 100})
VALUE = b"v" * 60


_PREAD_LOCK = threading.Lock()


def _install_pread(patcher: Patcher) -> None:
    """pyfakefs fakes no ``os.pread`` (the real one gets a fake fd: EBADF), which the segment's non-mmap read path
    uses; emulate it with the faked lseek + read so reads on the surviving dir work under pyfakefs too."""
    fake_os = patcher.fake_modules["os"]

    def pread(fd: int, n: int, offset: int) -> bytes:
        with _PREAD_LOCK:
            here = patcher.fs.get_open_file(fd).tell()
            try:
                fake_os.lseek(fd, offset, os.SEEK_SET)
                return fake_os.read(fd, n)
            finally:
                fake_os.lseek(fd, here, os.SEEK_SET)

    fake_os.pread = pread


@pytest.fixture
def fake():
    with Patcher() as p:
        _install_pread(p)
        os.makedirs("/a")
        p.fs.add_mount_point("/b", total_size=10**9)
        yield p.fs
        _shutdown_leftovers()


@pytest.fixture
def fake_nonroot():
    with Patcher(allow_root_user=False) as p:
        _install_pread(p)
        os.makedirs("/data/a")
        os.makedirs("/data/b")
        yield p.fs
        _shutdown_leftovers()


_OPEN: list[LogManager] = []


def _shutdown_leftovers() -> None:
    """A failing test must not leave its dirs locked for the next one (locks are process-wide)."""
    while _OPEN:
        _OPEN.pop().shutdown()


def _manager(dirs=("/a", "/b"), **kw) -> tuple[LogManager, list[LogDirOfflineEvent]]:
    m = LogManager(list(dirs), log_config=CFG, **kw)
    _OPEN.append(m)
    events: list[LogDirOfflineEvent] = []
    m.add_listener(events.append)
    return m, events


def _populate(m: LogManager, partitions: int = 4, appends: int = 40) -> None:
    for p in range(partitions):
        m.get_or_create_log("t", p)
    for i in range(appends):
        m.append("t", i % partitions, [(b"k", VALUE)])


def _on(m: LogManager, log_dir: str) -> list[int]:
    return sorted(p for (_, p), d in m.assignments().items() if d == m.directory_id(log_dir))


def _disk_full(fs, path: str = "/b", free: int = 100) -> None:
    fs.set_disk_usage(fs.get_disk_usage(path).used + free, path)


def _assert_checkpoints_whole(*dirs: str) -> None:
    """Every checkpoint parses (old or new content, never a torn one) and no staging file is left behind."""
    for d in dirs:
        if not os.path.isdir(d):
            continue
        names = os.listdir(d)
        assert not [n for n in names if n.endswith(".tmp")], names
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
            if name in names:
                read_offset_checkpoint(os.path.join(d, name))


def _assert_b_offline_a_serving(m: LogManager, events: list[LogDirOfflineEvent], b_parts: list[int],
                                a_parts: list[int], dead: str = "/b", live: str = "/a") -> None:
    assert m.offline_log_dirs == [dead] and m.live_log_dirs == [live]
    assert len(events) == 1
    ev = events[0]
    assert ev.log_dir == dead and ev.directory_id is not None
    assert ev.partitions == tuple(("t", p) for p in b_parts)
    assert isinstance(ev.cause, OSError)
    met = m.metrics()
    assert met["OfflineLogDirectoryCount"] == 1
    assert met["OfflineReplicaCount"] == len(b_parts)
    assert met["LogDirectoryOffline"] == {live: 0, dead: 1}
    for p in b_parts:
        with pytest.raises(KafkaStorageError):
            m.append("t", p, [(b"k", b"x")])
        with pytest.raises(KafkaStorageError):
            m.read("t", p, 0)
        assert m.get_log("t", p) is None
    for p in a_parts:
        info = m.append("t", p, [(b"k", b"after")])
        assert m.read("t", p, info.first_offset)[0].records()[0].value == b"after"
    # New partitions land on the live dir; an existing replica that may be on /b is refused (KIP-112).
    m.get_or_create_log("new", 0)
    assert m.log_dir_of("new", 0) == live
    with pytest.raises(KafkaStorageError):
        m.get_or_create_log("t", b_parts[0], is_new=False)
    # The offline dir's lock is released and its checkpoints are no longer written.
    if os.path.isdir(dead):
        DirLock.acquire(dead).release()


def test_disk_full_on_append(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    m.checkpoint_recovery_offsets()
    before = open("/b/recovery-point-offset-checkpoint").read()
    _disk_full(fake)
    with pytest.raises(KafkaStorageError) as ei:
        for _ in range(200):
            m.append("t", b[0], [(b"k", VALUE)])
    assert isinstance(ei.value.__cause__, OSError)
    _assert_b_offline_a_serving(m, events, b, a)
    m.checkpoint_recovery_offsets()
    assert open("/b/recovery-point-offset-checkpoint").read() == before
    _assert_checkpoints_whole("/a", "/b")
    m.shutdown()
    assert os.path.exists("/a/.kafka_cleanshutdown") and not os.path.exists("/b/.kafka_cleanshutdown")
    assert len(events) == 1


def test_disk_full_on_direct_log_append(fake) -> None:
    """The Log handed out by get_or_create_log, used directly (not through the manager), takes its dir offline
    on an I/O error too (Kafka's UnifiedLog holds the failure channel), and is unusable afterwards."""
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    log = m.get_log("t", b[0])
    _disk_full(fake)
    with pytest.raises(KafkaStorageError) as ei:
        for _ in range(200):
            log.append_as_leader([(b"k", VALUE)])
    assert isinstance(ei.value.__cause__, OSError)
    assert "/b" in str(ei.value)
    _assert_b_offline_a_serving(m, events, b, a)
    for call in (lambda: log.append_as_leader([(b"k", b"x")]), lambda: log.read(0), log.roll, log.flush):
        with pytest.raises(KafkaStorageError):
            call()
    direct = m.get_log("t", a[0])
    info = direct.append_as_leader([(b"k", b"direct")])
    assert direct.read(info.first_offset)[0].records()[0].value == b"direct"
    m.shutdown()
    assert len(events) == 1


def test_disk_full_on_roll(fake) -> None:
    """Trimming the old segment's indexes frees their preallocation, so fill the disk exactly: the new
    segment's producer snapshot or index then has no room."""
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    _disk_full(fake, free=0)
    with pytest.raises(KafkaStorageError):
        m.roll("t", b[0])
        m.append("t", b[0], [(b"k", VALUE)])
    _assert_b_offline_a_serving(m, events, b, a)
    m.roll("t", a[0])  # the live dir still rolls
    _assert_checkpoints_whole("/a", "/b")
    m.shutdown()


def test_partition_dir_removed_then_roll(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    shutil.rmtree(f"/b/t-{b[0]}")
    with pytest.raises(KafkaStorageError):
        m.roll("t", b[0])
    _assert_b_offline_a_serving(m, events, b, a)
    m.shutdown()


def test_disk_full_on_index_write(fake) -> None:
    """Room for the next batches but not for the new segment's preallocated index (created on its first entry):
    the failure comes from the index layer."""
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    m.roll("t", b[0])
    _disk_full(fake, free=1000)
    with pytest.raises(KafkaStorageError) as ei:
        for _ in range(8):
            m.append("t", b[0], [(b"k", VALUE)])
    frames = [f.filename for f in traceback.extract_tb(ei.value.__cause__.__traceback__)]
    assert any(os.sep + "index" + os.sep in f for f in frames), frames
    _assert_b_offline_a_serving(m, events, b, a)
    m.shutdown()


def test_disk_full_on_checkpoint_write(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    m.checkpoint_recovery_offsets()
    before_b = read_offset_checkpoint("/b/recovery-point-offset-checkpoint")
    for p in b:
        m.flush("t", p)  # recovery points move: the next checkpoint has new content
    _disk_full(fake, free=0)
    m.checkpoint_recovery_offsets()  # background task: no raise, the dir just goes offline
    assert read_offset_checkpoint("/b/recovery-point-offset-checkpoint") == before_b
    assert read_offset_checkpoint("/a/recovery-point-offset-checkpoint") == {
        ("t", p): m.get_log("t", p).recovery_point for p in a
    }
    _assert_checkpoints_whole("/a", "/b")
    _assert_b_offline_a_serving(m, events, b, a)
    m.shutdown()


def test_dir_removed_while_running(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m)
    b, a = _on(m, "/b"), _on(m, "/a")
    shutil.rmtree("/a")  # (/b is a mount point in this fixture: removing it is EBUSY)
    m.checkpoint_log_start_offsets()
    m.checkpoint_recovery_offsets()
    assert isinstance(events[0].cause, FileNotFoundError)
    _assert_b_offline_a_serving(m, events, a, b, dead="/a", live="/b")
    m.shutdown()
    assert os.path.exists("/b/.kafka_cleanshutdown")


def test_permission_denied_on_new_partition_tries_the_next_dir(fake_nonroot) -> None:
    m, events = _manager(dirs=("/data/a", "/data/b"))
    m.startup()
    m.get_or_create_log("t", 0)  # /data/a (first in order)
    os.chmod("/data/b", 0o500)
    m.get_or_create_log("t", 1)  # fewest partitions: /data/b, which refuses; Kafka then tries the next dir
    assert m.log_dir_of("t", 1) == "/data/a"
    assert m.offline_log_dirs == ["/data/b"]
    assert len(events) == 1 and isinstance(events[0].cause, PermissionError) and events[0].partitions == ()
    m.append("t", 1, [(b"k", b"v")])
    m.shutdown()


def test_permission_denied_at_startup_reports_partitions(fake_nonroot) -> None:
    m, _ = _manager(dirs=("/data/a", "/data/b"))
    with m:
        _populate(m)
        b, a = _on(m, "/data/b"), _on(m, "/data/a")
    # The dir lists, but one partition's segment cannot be read.
    os.chmod(f"/data/b/t-{b[0]}/00000000000000000000.log", 0o000)
    m2, events = _manager(dirs=("/data/a", "/data/b"))
    with m2:
        assert m2.offline_log_dirs == ["/data/b"]
        assert len(events) == 1 and set(events[0].partitions) == {("t", p) for p in b}
        assert m2.metrics()["OfflineReplicaCount"] == len(b)
        for p in a:
            m2.append("t", p, [(b"k", b"v")])
        with pytest.raises(KafkaStorageError):
            m2.read("t", b[0], 0)
    assert os.path.exists("/data/a/.kafka_cleanshutdown")
    assert not os.path.exists("/data/b/.kafka_cleanshutdown")  # it never loaded fully


def test_uncreatable_dir_at_startup(fake_nonroot) -> None:
    os.makedirs("/ro")
    os.chmod("/ro", 0o500)
    m, events = _manager(dirs=("/data/a", "/ro/b"))
    with m:
        assert m.offline_log_dirs == ["/ro/b"] and m.live_log_dirs == ["/data/a"]
        assert len(events) == 1 and isinstance(events[0].cause, PermissionError)
        assert m.directory_id("/ro/b") is None
        m.get_or_create_log("t", 0)
        assert m.log_dir_of("t", 0) == "/data/a"


def test_no_live_dir_left_stops_the_manager(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m)
    a, b = _on(m, "/a"), _on(m, "/b")
    _disk_full(fake)
    with pytest.raises(KafkaStorageError):
        for _ in range(200):
            m.append("t", b[0], [(b"k", VALUE)])
    shutil.rmtree("/a")
    m.checkpoint_recovery_offsets()
    assert m.offline_log_dirs == ["/a", "/b"] and len(events) == 2
    assert isinstance(m.fatal_error, NoLiveLogDirsError)
    with pytest.raises(NoLiveLogDirsError):
        m.append("t", a[0], [(b"k", b"v")])
    with pytest.raises(NoLiveLogDirsError):
        m.get_or_create_log("x", 0)
    assert not m.is_running
    m.shutdown()


def test_no_live_dir_at_startup_raises(fake_nonroot) -> None:
    os.makedirs("/ro")
    os.chmod("/ro", 0o500)
    m, events = _manager(dirs=("/ro/a", "/ro/b"))
    with pytest.raises(NoLiveLogDirsError):
        m.startup()
    assert len(events) == 2


def test_concurrent_failures_fire_one_event(fake) -> None:
    m, events = _manager()
    m.startup()
    _populate(m, partitions=8)
    b = _on(m, "/b")
    _disk_full(fake, free=2000)
    parts = b + b
    barrier = threading.Barrier(len(parts))

    def hammer(k: int) -> None:
        barrier.wait()
        for _ in range(200):
            m.append("t", parts[k], [(b"k", VALUE)])

    errors = run_threads(hammer, len(parts))
    assert len(errors) == len(parts) and all(isinstance(e, KafkaStorageError) for e in errors), errors
    assert len(events) == 1 and events[0].log_dir == "/b"
    assert set(events[0].partitions) == {("t", p) for p in b}
    m.shutdown()

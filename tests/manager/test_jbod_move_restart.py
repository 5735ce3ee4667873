"""KIP-113 moves that restart during their copy (retention removed a source file): the half-made copy goes, startup
never finds two futures of one partition, and leftovers from a crash or an older kafkalog are resolved."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, MoveRestartsExhaustedError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager, move_copy
from kafkalog.manager.replica_mover import MAX_RESTARTS
from kafkalog.names import delete_dir_name, future_dir_name, parse_partition_dir

CFG_PROPS = {"segment.bytes": 2000, "index.interval.bytes": 200}
CFG = LogConfig.from_properties(CFG_PROPS)
VALUE = b"v" * 60


def _futures(dirs: list[Path], name: str = "t-0") -> list[Path]:
    return [p for d in dirs if d.is_dir() for p in d.iterdir()
            if p.name.startswith(name + ".") and p.name.endswith("-future")]


def _fill(m: LogManager, n: int, partition: int = 0) -> None:
    m.get_or_create_log("t", partition)
    for i in range(n):
        m.append("t", partition, [(f"{i}".encode(), VALUE)])


def _keys(m: LogManager, topic: str = "t", partition: int = 0) -> list[int]:
    log = m.get_log(topic, partition)
    out: list[int] = []
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        batches = m.read(topic, partition, offset)
        out.extend(r.offset for b in batches for r in b.records())
        offset = batches[-1].last_offset + 1
    return out


def _cut_source_during_copy(monkeypatch: pytest.MonkeyPatch, m: LogManager, dirs: list[Path], times: int,
                            seen: list[int]) -> None:
    """After the first file of a copy attempt, raise the source's log start past its first segment and run
    retention, so the next file the copy opens is gone (a real RestartMove); ``times`` attempts are cut. Before
    each cut, the number of ``-future`` dirs of the partition is recorded in ``seen``."""
    real = move_copy.MoveCopier._copy_file
    cut = [0]

    def copy_file(self, mv, e, fd, dest, size):  # noqa: ANN001, ANN202 - test double of a private method
        real(self, mv, e, fd, dest, size)
        if cut[0] < times and dest.endswith(".log"):
            seen.append(len(_futures(dirs)))
            cut[0] += 1
            log = m.get_log("t", 0)
            log.maybe_increment_log_start_offset(log.segments.higher(log.segments.first.base_offset).base_offset)
            assert m.delete_old_segments("t", 0) >= 1

    monkeypatch.setattr(move_copy.MoveCopier, "_copy_file", copy_file)


def test_a_restarted_copy_removes_its_partial_future(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _fill(m, 300)
        seen: list[int] = []
        starts: list[int] = []

        def hook(key, step) -> None:  # noqa: ANN001
            if step == "future_created":
                starts.append(len(_futures([a, b])))

        m._replica_mover().step_hook = hook
        _cut_source_during_copy(monkeypatch, m, [a, b], times=2, seen=seen)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "completed" and p.restarts == 2, p
        assert starts == [1, 1, 1]  # each attempt finds only its own future: the cut ones are gone
        assert seen == [1, 1]
        assert _futures([a, b]) == [] and m.log_dir_of("t", 0) == str(b)
        # the partial copies are queued for deletion as -delete dirs, like any dropped future
        assert sum(1 for p in m.pending_deletions if p.startswith(str(b))) == 2
        start = m.get_log("t", 0).log_start_offset
        assert _keys(m) == list(range(start, 300))
    with LogManager([a, b], log_config=CFG) as m:
        assert m.log_dir_of("t", 0) == str(b) and _keys(m) == list(range(start, 300))


def test_too_many_restarts_is_its_own_error_and_no_dir_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _fill(m, 600)
        _cut_source_during_copy(monkeypatch, m, [a, b], times=MAX_RESTARTS + 1, seen=[])
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "failed" and p.restarts == MAX_RESTARTS + 1
        assert p.error.startswith("MoveRestartsExhaustedError:"), p.error
        assert not issubclass(MoveRestartsExhaustedError, KafkaStorageError)
        assert MoveRestartsExhaustedError.retriable
        assert m.offline_log_dirs == [] and _futures([a, b]) == []
        assert m.log_dir_of("t", 0) == str(a) and m.get_log("t", 0, is_future=True) is None
    with LogManager([a, b], log_config=CFG) as m:  # nothing for a restart to trip on
        assert m.log_dir_of("t", 0) == str(a) and m.get_log("t", 0, is_future=True) is None


def test_a_stopped_copy_removes_its_partial_future(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Abort during the copy of the inactive segments: the unregistered half copy does not outlive the move."""
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _fill(m, 300)
        real = move_copy.MoveCopier._copy_file

        def copy_file(self, mv, e, fd, dest, size):  # noqa: ANN001, ANN202
            real(self, mv, e, fd, dest, size)
            mv.stop.set()  # as abort_replica_move / shutdown do

        monkeypatch.setattr(move_copy.MoveCopier, "_copy_file", copy_file)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "aborted"
        assert _futures([a, b]) == [] and m.get_log("t", 0, is_future=True) is None
    with LogManager([a, b], log_config=CFG) as m:
        assert m.get_log("t", 0, is_future=True) is None and len(_keys(m)) == 300


def test_back_and_forth_under_retention_keeps_one_future(tmp_path: Path) -> None:
    """Moves back and forth while appends and retention run on another thread, for a bounded number of moves: at
    every step at most one ``-future`` per partition, and a clean restart loads everything."""
    a, b = tmp_path / "a", tmp_path / "b"
    cfg = LogConfig.from_properties({**CFG_PROPS, "retention.bytes": 6000})
    parts = (0, 1)
    worst = [0]
    stop = threading.Event()
    errors: list[BaseException] = []
    with LogManager([a, b], log_config=cfg) as m:
        for p in parts:
            _fill(m, 200, p)

        def check(key, step) -> None:  # noqa: ANN001 - at every step of every move
            for p in parts:
                worst[0] = max(worst[0], len(_futures([a, b], f"t-{p}")))

        m._replica_mover().step_hook = check

        def churn() -> None:
            try:
                while not stop.is_set():
                    for p in parts:
                        m.append("t", p, [(b"k", VALUE)] * 5)
                        m.delete_old_segments("t", p)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        t = threading.Thread(target=churn)
        t.start()
        deadline = time.monotonic() + 3
        moves = 0
        try:
            while time.monotonic() < deadline or moves < 4:
                for p in parts:
                    target = a if m.log_dir_of("t", p) == str(b) else b
                    m.alter_replica_log_dir("t", p, str(target), wait=True)
                    moves += 1
                    check(None, None)
        finally:
            stop.set()
            t.join()
        assert not errors, errors
        assert worst[0] <= 1
        assert m.offline_log_dirs == []
        ends = {p: m.get_log("t", p).log_end_offset for p in parts}
    with LogManager([a, b], log_config=cfg) as m:  # a clean restart: every dir loads, nothing duplicated
        assert m.offline_log_dirs == []
        for p in parts:
            assert m.get_log("t", p).log_end_offset == ends[p]
            assert len(_futures([a, b], f"t-{p}")) <= 1


# --- leftovers on disk: two futures of one partition ----------------------------------------------------------


def _make_partition(tmp_path: Path, dirs: list[Path]) -> None:
    with LogManager(dirs, log_config=CFG) as m:
        _fill(m, 150)  # in dirs[0]
        m.get_or_create_log("x", 0)
        assert m.log_dir_of("t", 0) == str(dirs[0])


def _copy_as_future(src: Path, log_dir: Path, *, segments: int | None = None) -> Path:
    """A ``-future`` copy of the partition dir ``src`` in ``log_dir`` (only its first ``segments`` segments: a
    half-made copy)."""
    dest = log_dir / future_dir_name("t", 0)
    dest.mkdir()
    logs = sorted(p.name[:-4] for p in src.iterdir() if p.suffix == ".log")
    keep = set(logs if segments is None else logs[:segments])
    for f in src.iterdir():
        if f.stem in keep or not f.stem.isdigit():
            shutil.copy2(f, dest / f.name)
    return dest


def test_startup_drops_duplicate_futures_when_the_current_log_is_loaded(tmp_path: Path) -> None:
    """Two futures of one partition beside its current log (an older kafkalog's restarted copies): neither can be
    told complete and the current log holds everything, so both are dropped (renamed ``-delete``, as Kafka drops a
    future) and every dir starts."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _make_partition(tmp_path, [a, b, c])
    f1 = _copy_as_future(a / "t-0", b, segments=2)
    f2 = _copy_as_future(a / "t-0", b, segments=4)
    f3 = _copy_as_future(a / "t-0", c)
    with LogManager([a, b, c], log_config=CFG) as m:
        assert m.offline_log_dirs == [] and m.get_log("x", 0) is not None
        assert m.get_log("t", 0, is_future=True) is None and _futures([a, b, c]) == []
        assert not f1.exists() and not f2.exists() and not f3.exists()
        assert sorted(Path(p).parent.name for p in m.pending_deletions) == ["b", "b", "c"]
        assert m.log_dir_of("t", 0) == str(a) and _keys(m) == list(range(150))
        assert m.alter_replica_log_dir("t", 0, str(b), wait=True).state == "completed"
    with LogManager([a, b, c], log_config=CFG) as m:
        assert m.log_dir_of("t", 0) == str(b) and _keys(m) == list(range(150))


def test_startup_promotes_the_paired_one_of_duplicate_futures(tmp_path: Path) -> None:
    """No current log, two futures, one paired with the source's ``-delete`` (same uuid): a crash between the two
    renames of a swap, so that future is the complete one and becomes the current log; the other is dropped."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _make_partition(tmp_path, [a, b, c])
    half = _copy_as_future(a / "t-0", b, segments=2)
    full = _copy_as_future(a / "t-0", c)
    uid = parse_partition_dir(full.name).uuid
    (a / "t-0").rename(a / delete_dir_name("t", 0, unique_id=uid))
    with LogManager([a, b, c], log_config=CFG) as m:
        assert m.offline_log_dirs == []
        assert m.log_dir_of("t", 0) == str(c) and _keys(m) == list(range(150))
        assert m.get_log("t", 0, is_future=True) is None and _futures([a, b, c]) == []
        assert not half.exists()


def test_startup_leaves_ambiguous_duplicate_futures_on_disk(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No current log and no pairing: which copy is right cannot be known (the current may be on a disk that is
    offline now). Both stay on disk, unloaded, named in one error; every dir and the other partitions start."""
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _make_partition(tmp_path, [a, b, c])
    f1 = _copy_as_future(a / "t-0", b, segments=2)
    f2 = _copy_as_future(a / "t-0", c)
    shutil.rmtree(a / "t-0")  # the current log is gone (its disk replaced, say)
    with caplog.at_level(logging.ERROR):
        with LogManager([a, b, c], log_config=CFG) as m:
            assert m.offline_log_dirs == [] and m.get_log("x", 0) is not None
            assert m.get_log("t", 0) is None and m.get_log("t", 0, is_future=True) is None
            assert f1.exists() and f2.exists()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(f1) in errors[0] and str(f2) in errors[0], errors


def _fds_under(path: Path) -> list[str]:
    """This process's open descriptors on files under ``path``."""
    out = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return out


def test_a_future_whose_first_flush_fails_releases_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy is opened as a future log, then its flush hits EIO: the target dir goes offline and the opened log's
    segment files and index mappings are released (nothing else holds them: it was never registered)."""
    import errno

    from kafkalog.log.log import Log

    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _fill(m, 300)
        real = Log.flush

        def flush(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - a failing disk under the future
            if str(self.dir).endswith("-future"):
                raise OSError(errno.EIO, "Input/output error", str(self.dir))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Log, "flush", flush)
        p = m.alter_replica_log_dir("t", 0, str(b), wait=True)
        assert p.state == "failed", p
        assert str(b) in m.offline_log_dirs and m.log_dir_of("t", 0) == str(a)
        assert _fds_under(b) == []
        assert len(_keys(m)) == 300

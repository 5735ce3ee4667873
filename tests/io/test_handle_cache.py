"""The bounded handle cache: descriptors and mappings stay under ``max_open_files`` whatever a Log or LogManager
does, closed handles reopen invisibly, nothing in use is closed, and EMFILE is relieved by eviction."""

from __future__ import annotations

import builtins
import errno
import gc
import os
import threading
from pathlib import Path

import pytest

from kafkalog.errors import ConfigError, ResourceExhaustedError
from kafkalog.io.handle_cache import HandleCache, default_cache, default_max_open_files
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager import LogManager
from kafkalog.manager.sanity_checker import check_segment
from tests.threads import threads_running

CFG = LogConfig.from_properties({"segment.bytes": 600, "index.interval.bytes": 50, "segment.index.bytes": 4096})


def fds_under(path: Path) -> int:
    """Descriptors of this process (mappings' duplicates included) pointing at files under ``path``."""
    root = str(path)
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(root):
                n += 1
        except OSError:
            continue
    return n


def _fill(log: Log, segments: int) -> int:
    offset = 0
    for s in range(segments):
        for _ in range(3):
            log.append_as_leader([(b"k%d" % offset, b"v" * 40)], timestamp=1000 + offset)
            offset += 1
        if s < segments - 1:
            log.roll()
    return offset


def _read_all(log: Log, upto: int | None = None) -> list[int]:
    out, offset = [], log.log_start_offset
    end = log.log_end_offset if upto is None else upto
    while offset < end:
        batches = log.read(offset, 1 << 16)
        assert batches, offset
        for b in batches:
            out.extend(r.offset for r in b.records())
        offset = out[-1] + 1
    return [o for o in out if o < end]


def test_default_is_a_share_of_the_soft_limit() -> None:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    n = default_max_open_files()
    assert 16 <= n <= max(16, soft // 4 if soft != resource.RLIM_INFINITY else 1 << 16)
    assert HandleCache().capacity == n


@pytest.mark.parametrize("bad", [0, -1, "x", 2.5, True])
def test_bad_capacity(bad: object) -> None:
    with pytest.raises(ConfigError):
        HandleCache(bad)  # type: ignore[arg-type]


def test_log_alone_stays_under_max_open_files(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CFG, max_open_files=6)
    end = _fill(log, 30)
    assert len(log.segments) == 30
    cache = log.handle_cache
    assert cache.capacity == 6 and len(cache) <= 6
    assert _read_all(log) == list(range(end))
    for ts in (1000, 1010, 1050, 1000 + end - 1):
        assert log.offset_for_timestamp(ts).offset == ts - 1000
    for seg in log.segments:
        check_segment(seg)
        assert len(cache) <= 6
    gc.collect()  # drop the maps of the .log files that read results held
    assert fds_under(tmp_path) <= 6
    assert cache.evictions > 0 and cache.peak <= 7
    log.flush()
    log.close()
    again = Log.open(tmp_path / "t-0", CFG, max_open_files=6)
    assert _read_all(again) == list(range(end))
    again.close()


def test_read_results_held_by_the_caller_hold_no_descriptor(tmp_path: Path) -> None:
    """A consumer may keep what ``Log.read`` returned for as long as it likes: the batches own their bytes, so
    holding the answers of every segment does not hold a descriptor or map per segment past the cache's bound."""
    log = Log.open(tmp_path / "t-0", CFG, max_open_files=4)
    end = _fill(log, 30)
    held = []
    offset = 0
    while offset < end:
        batches = log.read(offset, 1 << 16)
        held.append(batches)
        offset = batches[-1].last_offset + 1
    assert len(held) == 30
    assert fds_under(tmp_path) <= 4
    assert [r.offset for batches in held for b in batches for r in b.records()] == list(range(end))
    assert all(b.is_valid() for batches in held for b in batches)
    log.close()


def test_evicted_active_segment_keeps_its_entries(tmp_path: Path) -> None:
    """Evicting the active segment (index unmapped untrimmed, .log closed) loses no entry and no byte."""
    log = Log.open(tmp_path / "t-0", CFG, max_open_files=3)
    for i in range(8):
        log.append_as_leader([(b"k", b"v" * 40)], timestamp=1000 + i)
    active = log.active_segment
    entries = active.offset_index.entry_count
    assert entries > 0
    log.handle_cache.clear()
    assert len(log.handle_cache) == 0 and not active.offset_index.is_loaded
    for i in range(8, 12):
        log.append_as_leader([(b"k", b"v" * 40)], timestamp=1000 + i)
    assert active.offset_index.entry_count > entries
    log.handle_cache.clear()
    log.flush()  # fsyncs through new descriptors what was written before the eviction
    log.close()
    again = Log.open(tmp_path / "t-0", CFG)
    assert _read_all(again) == list(range(12))
    for seg in again.segments:
        check_segment(seg)
    again.close()


def test_concurrent_readers_with_a_tiny_cache(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CFG, max_open_files=2)
    end = _fill(log, 12)

    def reader(_: int) -> None:
        for _ in range(5):
            assert _read_all(log, end) == list(range(end))

    with threads_running(reader, 4) as errors:
        for i in range(20):  # an appender and roller alongside
            log.append_as_leader([(b"x", b"y")], timestamp=5000 + i)
            if i % 5 == 0:
                log.roll()
    assert not errors, errors[0]
    assert log.handle_cache.evictions > 0
    log.close()


def _emfile_n_times(monkeypatch: pytest.MonkeyPatch, n: int) -> list[int]:
    """``os.open`` fails with EMFILE for the next ``n`` calls."""
    real = os.open
    left = [n]

    def fake(*a: object, **k: object) -> int:
        if left[0] > 0:
            left[0] -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake)
    return left


def test_emfile_is_relieved_by_eviction_and_retried_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", CFG, max_open_files=50)
    end = _fill(log, 12)
    assert _read_all(log) == list(range(end))
    cache = log.handle_cache
    held = len(cache)
    log.segments.first.close_handlers()  # its .log must be opened again by the next read
    _emfile_n_times(monkeypatch, 1)
    assert log.read(0, 100)[0].base_offset == 0  # evicted and retried
    assert cache.retries == 1 and len(cache) < held
    left = _emfile_n_times(monkeypatch, 2)
    log.segments.first.close_handlers()
    with pytest.raises(ResourceExhaustedError) as info:
        log.read(0, 100)
    assert info.value.errno == errno.EMFILE and info.value.retriable and left[0] == 0
    assert log.read(0, 100)[0].base_offset == 0  # the same call, once descriptors are there
    log.close()


def test_manager_property_and_shared_cache(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        LogManager([tmp_path / "x"], properties={"kafkalog.max.open.files": "0"})
    props = {"kafkalog.max.open.files": "10", "log.retention.check.interval.ms": 10**9}
    with LogManager([tmp_path / "a", tmp_path / "b"], log_config=CFG, properties=props) as m:
        assert m.handle_cache.capacity == 10
        for p in range(6):
            log = m.get_or_create_log("t", p)
            assert log.handle_cache is m.handle_cache
            for i in range(9):
                m.append("t", p, [(b"k", b"v" * 40)], timestamp=1000 + i)
                if i % 3 == 2:
                    m.roll("t", p)
            assert len(m.handle_cache) <= 10
        for p in range(6):
            got = [r.offset for b in m.read("t", p, 0, 1 << 20) for r in b.records()]
            assert got[:1] == [0]
        gc.collect()
        assert fds_under(tmp_path) <= 10 + 2  # + the two dirs' .lock files
        assert m.offline_log_dirs == []


def test_managers_without_the_property_share_the_process_budget(tmp_path: Path) -> None:
    """The default is a share of the process's limit, so it is one budget: two managers (and Logs opened alone)
    without ``kafkalog.max.open.files`` draw on the same cache instead of each taking a quarter of RLIMIT_NOFILE."""
    props = {"log.retention.check.interval.ms": 10**9}
    with (
        LogManager([tmp_path / "a"], log_config=CFG, properties=props) as one,
        LogManager([tmp_path / "b"], log_config=CFG, properties=props) as two,
    ):
        assert one.handle_cache is two.handle_cache is default_cache()
        assert one.handle_cache.capacity == default_max_open_files()
        alone = Log.open(tmp_path / "c" / "t-0", CFG)
        assert alone.handle_cache is one.handle_cache
        alone.close()
    with LogManager([tmp_path / "d"], log_config=CFG, properties={**props, "kafkalog.max.open.files": "7"}) as own:
        assert own.handle_cache is not default_cache() and own.handle_cache.capacity == 7


def test_manager_threads_share_a_tiny_cache(tmp_path: Path) -> None:
    """Readers, an appender/roller and the background KIP-263 checker on one manager whose cache holds 4 handles:
    every handle is closed and reopened many times under them, and no read, check or append fails or differs."""
    props = {"kafkalog.max.open.files": 4, "log.retention.check.interval.ms": 10**9,
             "sanity.check.all.logs.enabled": "false"}
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, log_config=CFG, properties=props) as m:
        for p in range(4):
            m.get_or_create_log("t", p)
            for i in range(24):
                m.append("t", p, [(b"k", b"%d-%d" % (p, i))], timestamp=1000 + i)
                if i % 4 == 3:
                    m.roll("t", p)
    with LogManager(dirs, log_config=CFG, properties=props) as m:  # lazy: inactive segments pending
        stop = threading.Event()

        def reader(p: int) -> None:
            while not stop.is_set():
                got = []
                offset = 0
                while offset < 24:
                    for b in m.read("t", p, offset, 1 << 16):
                        for r in b.records():
                            if r.offset >= offset:
                                got.append(r.value)
                                offset = r.offset + 1
                assert got[:24] == [b"%d-%d" % (p, i) for i in range(24)]

        with threads_running(reader, 4) as errors:
            try:
                run = m.start_sanity_checker()
                for i in range(30):
                    m.append("t", i % 4, [(b"k", b"late")], timestamp=9000 + i)
                    if i % 7 == 0:
                        m.roll("t", i % 4)
                assert run.wait(60) and not run.errors
            finally:
                stop.set()
        assert not errors, errors[0]
        assert all(s.status.value == "checked" for s in m.sanity_check_states().values())
        assert m.handle_cache.evictions > 0 and m.offline_log_dirs == []


def test_clean_lazy_load_touches_only_the_active_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KIP-263 taken literally: a clean lazy load builds inactive segments from their names; none of their files
    is opened, stat'ed or mapped, and nothing stays open after the load."""
    props = {"log.retention.check.interval.ms": 10**9, "sanity.check.all.logs.enabled": "false"}
    with LogManager([tmp_path / "a"], log_config=CFG, properties=props) as m:
        m.get_or_create_log("t", 0)
        for i in range(20):
            m.append("t", 0, [(b"k", b"v" * 40)], timestamp=1000 + i)
            if i % 2 == 1:
                m.roll("t", 0)
    touched: list[str] = []
    real_open, real_stat = os.open, os.stat

    def spy_open(path: object, *a: object, **k: object) -> int:
        touched.append(os.fspath(path))  # type: ignore[arg-type]
        return real_open(path, *a, **k)  # type: ignore[arg-type]

    def spy_stat(path: object, *a: object, **k: object) -> os.stat_result:
        touched.append(os.fspath(path))  # type: ignore[arg-type]
        return real_stat(path, *a, **k)  # type: ignore[arg-type]

    real_builtin_open = builtins.open

    def spy_builtin_open(path: object, *a: object, **k: object) -> object:
        if isinstance(path, (str, bytes, os.PathLike)):
            touched.append(os.fsdecode(path))
        return real_builtin_open(path, *a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "stat", spy_stat)
    monkeypatch.setattr(builtins, "open", spy_builtin_open)
    with LogManager([tmp_path / "a"], log_config=CFG, properties=props) as m:
        monkeypatch.undo()
        log = m.get_log("t", 0)
        inactive = list(log.segments.inactive())
        assert len(inactive) == 10
        stems = {os.path.basename(str(s.log_path))[:20] for s in inactive}
        assert any(p.endswith(".index") for p in touched)  # the spies saw the active segment's files
        assert not [p for p in touched if os.path.basename(p)[:20] in stems]
        assert all(s._file is None and not s._indexes_made() for s in inactive)
        assert len(m.handle_cache) == 0
        assert [r.offset for b in m.read("t", 0, 0) for r in b.records()][:1] == [0]  # reopened on demand

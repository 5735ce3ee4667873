"""The LogManager's cleaner: a pass over the filthiest compacted log with its checkpoint, pauses around
truncation, deletion and moves, a failed dir aborting and pausing its partitions, an I/O error in a pass taking
only its dir offline (a process limit none), and Kafka's cleaner metrics."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from kafkalog.cleaner import read_cleaner_checkpoint
from kafkalog.errors import InvalidArgumentError, LogCleaningAbortedError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager
from kafkalog.manager.cleaning_state import Aborted, CleaningStates, InProgress, Paused

COMPACT = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": 600,
                                     "min.cleanable.dirty.ratio": "0.01", "index.interval.bytes": 128})
OFF = {"log.cleaner.enable": "false", "log.cleaner.dedupe.buffer.size": str(24 * 1000)}


def _fill(m: LogManager, topic: str, rounds: int = 12) -> None:
    for i in range(rounds):
        m.append(topic, 0, [(f"k{j}".encode(), f"v{i}-{j}".encode()) for j in range(4)], timestamp=1_000 + i)


def _keys_below(log, end: int) -> list[bytes]:
    return [r.key for b in log.read(log.log_start_offset, 1 << 20, max_offset=end) for r in b.records()
            if r.offset < end]


@pytest.fixture
def two_dirs(tmp_path: Path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, properties=OFF, topic_configs={"ta": COMPACT, "tb": COMPACT}, clock=lambda: 10_000)
    m.startup()
    yield m, dirs
    m.shutdown()


def test_a_pass_cleans_the_filthiest_log_and_checkpoints_it(two_dirs) -> None:
    m, _ = two_dirs
    m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    log = m.get_log("ta", 0)
    assert len(log.segments) > 2
    assert m.cleaner.clean_filthiest() is True
    end = m.cleaner.passes[-1].result.end_offset
    keys = _keys_below(log, end)
    assert len(keys) == len(set(keys))  # one record per key below where the pass ended
    assert read_cleaner_checkpoint(log.dir.parent) == {("ta", 0): end}
    metrics = m.metrics()["LogCleaner"]
    assert metrics["max-dirty-percent"] == 100 and metrics["cleaner-recopy-percent"] < 100
    assert m.cleaner.clean_filthiest() is False  # nothing dirty left below the active segment


def test_truncation_pauses_cleaning_and_brings_the_checkpoint_back(two_dirs) -> None:
    m, _ = two_dirs
    m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    m.cleaner.clean_filthiest()
    log = m.get_log("ta", 0)
    assert m.truncate_to("ta", 0, 5)
    assert read_cleaner_checkpoint(log.dir.parent)[("ta", 0)] == log.log_end_offset == 5
    assert m.cleaner.states.get(("ta", 0)) is None  # resumed


def test_deletion_drops_the_partition_from_the_checkpoint(two_dirs) -> None:
    m, _ = two_dirs
    m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    m.cleaner.clean_filthiest()
    parent = m.get_log("ta", 0).dir.parent
    m.delete_log("ta", 0)
    assert read_cleaner_checkpoint(parent) == {}


def test_an_io_error_in_a_pass_takes_only_its_dir_offline(two_dirs, monkeypatch) -> None:
    m, dirs = two_dirs
    m.get_or_create_log("ta", 0)
    m.get_or_create_log("tb", 0)
    _fill(m, "ta")
    failing = str(m.get_log("ta", 0).dir.parent)
    import kafkalog.cleaner.cleaner as cleaner_module

    real = cleaner_module.pread

    def pread(fh, position, size):
        if str(fh.name).startswith(failing):
            raise OSError(errno.EIO, "Input/output error", fh.name)
        return real(fh, position, size)

    monkeypatch.setattr(cleaner_module, "pread", pread)
    assert m.cleaner.clean_filthiest() is True
    assert m.offline_log_dirs == [failing]
    assert m.cleaner.states.get(("ta", 0)) == Paused(1)  # the failed dir's partition: aborted and paused
    other = [d for d in dirs if d != failing][0]
    _fill(m, "tb")
    assert m.get_log("tb", 0).dir.parent == Path(other)
    assert m.cleaner.clean_filthiest() is True  # the live dir's partitions are still cleaned
    assert ("tb", 0) in read_cleaner_checkpoint(other)


def test_a_process_limit_in_a_pass_leaves_the_dir_online(two_dirs, monkeypatch) -> None:
    m, _ = two_dirs
    m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    import kafkalog.cleaner.cleaner as cleaner_module

    def pread(fh, position, size):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(cleaner_module, "pread", pread)
    assert m.cleaner.clean_filthiest() is True
    assert m.offline_log_dirs == []
    monkeypatch.undo()
    assert m.cleaner.clean_filthiest() is True  # retried later
    assert m.cleaner.passes and m.cleaner.passes[-1].cleaned


def test_the_cleaner_thread_cleans_in_the_background(tmp_path: Path) -> None:
    props = {**OFF, "log.cleaner.enable": "true", "log.cleaner.backoff.ms": "20"}
    with LogManager([str(tmp_path / "a")], properties=props, topic_configs={"ta": COMPACT}) as m:
        m.get_or_create_log("ta", 0)
        _fill(m, "ta")
        m.cleaner.wake()
        done = threading.Event()
        for _ in range(500):
            if m.cleaner.passes:
                done.set()
                break
            done.wait(0.02)
        assert done.is_set(), "no pass ran"
        m.cleaner.shutdown()  # no pass after this one
        assert read_cleaner_checkpoint(str(tmp_path / "a"))[("ta", 0)] == m.cleaner.passes[-1].checkpoint_offset


def test_cleaning_states_follow_kafkas_transitions() -> None:
    s = CleaningStates()
    key = ("t", 0)
    assert s.start(key) and isinstance(s.get(key), InProgress) and not s.start(key)
    waiter = threading.Thread(target=s.abort_and_pause, args=(key,))
    waiter.start()
    while not isinstance(s.get(key), Aborted):
        waiter.join(0.001)
    assert s.should_stop(key) and waiter.is_alive()  # the pause waits for the pass to stop
    s.done(key)
    waiter.join()
    assert s.get(key) == Paused(1)
    s.abort_and_pause(key)
    assert s.get(key) == Paused(2)
    s.resume(key)
    s.resume(key)
    assert s.get(key) is None and s.start(key)
    s.done(key)
    with pytest.raises(InvalidArgumentError):
        s.resume(key)
    assert issubclass(LogCleaningAbortedError, Exception)


def test_reads_and_appends_go_on_while_the_cleaner_runs(tmp_path: Path) -> None:
    props = {**OFF, "log.cleaner.enable": "true", "log.cleaner.backoff.ms": "1"}
    with LogManager([str(tmp_path / "a")], properties=props, topic_configs={"ta": COMPACT}) as m:
        m.get_or_create_log("ta", 0)
        latest: dict[bytes, bytes] = {}
        for i in range(150):
            batch = [(f"k{(i + j) % 6}".encode(), f"v{i}-{j}".encode()) for j in range(3)]
            m.append("ta", 0, batch, timestamp=1_000 + i)
            latest.update(batch)
            if i % 10 == 0:  # a reader from the start sees offsets in order, whatever the cleaner swapped in
                offsets = [r.offset for b in m.read("ta", 0, m.get_log("ta", 0).log_start_offset, 1 << 20)
                           for r in b.records()]
                assert offsets == sorted(set(offsets))
        m.cleaner.shutdown()
        assert m.cleaner.passes, "the cleaner never ran"
        log = m.get_log("ta", 0)
        seen: dict[bytes, bytes] = {}
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            batches = m.read("ta", 0, offset, 1 << 20)
            for b in batches:
                for r in b.records():
                    seen[r.key] = r.value
            offset = batches[-1].next_offset
        assert seen == latest  # every key's latest value survived every pass


def test_the_cleaner_deletes_segments_below_a_moved_log_start(two_dirs) -> None:
    m, _ = two_dirs
    log = m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    bases = log.segments.base_offsets()
    assert log.maybe_increment_log_start_offset(bases[2])
    assert m.cleaner.delete_old_segments() == 2  # compact only: no retention, but the log start moved
    assert log.segments.base_offsets()[0] == bases[2]


def test_a_batch_failing_its_crc_makes_the_partition_uncleanable_not_rewritten(two_dirs) -> None:
    m, _ = two_dirs
    m.get_or_create_log("ta", 0)
    _fill(m, "ta")
    log = m.get_log("ta", 0)
    first = Path(log.segments.values()[0].log_path)
    data = bytearray(first.read_bytes())
    data[len(data) - 3] ^= 0x01  # a value byte of the segment's last record
    first.write_bytes(bytes(data))
    files = {p.name: p.read_bytes() for p in first.parent.glob("*.log")}
    assert m.cleaner.clean_filthiest() is True
    assert m.cleaner.passes == []  # the pass was refused
    assert {p.name: p.read_bytes() for p in first.parent.glob("*.log")} == files
    assert not [p for p in first.parent.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert sum(m.metrics()["LogCleaner"]["uncleanable-partitions-count"].values()) == 1
    assert m.cleaner.clean_filthiest() is False  # uncleanable: not picked again

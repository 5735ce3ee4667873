"""The KIP-263 background checker's own footprint: one thread per manager however often it is started, and nothing
of a checked segment nobody uses stays in memory."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from pathlib import Path

from kafkalog.log.config import LogConfig
from kafkalog.manager import CheckStatus, LogManager

LAZY = {"sanity.check.all.logs.enabled": "false", "log.retention.check.interval.ms": 10**9}


def _make(d: Path, cfg: LogConfig, partitions: int, appends: int) -> None:
    with LogManager([d], log_config=cfg) as m:
        for p in range(partitions):
            m.get_or_create_log("t", p)
            for i in range(appends):
                m.append("t", p, [(b"k%d" % i, b"v" * 100)])


def _checker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kafkalog-sanity-checker"]


def test_one_checker_thread_however_often_it_is_started(tmp_path: Path) -> None:
    cfg = LogConfig.from_properties({"segment.bytes": 600, "index.interval.bytes": 100})
    _make(tmp_path / "a", cfg, partitions=6, appends=20)
    with LogManager([tmp_path / "a"], log_config=cfg, properties=LAZY) as m:
        held = m._registry.current[("t", 0)].lock
        with held:  # the run blocks on t-0 (its first partition) while more starts arrive
            first = m.start_sanity_checker([("t", 0)])
            runs = [m.start_sanity_checker([("t", p % 6)]) for p in range(50)]
            runs.append(m.start_sanity_checker())
            assert len(_checker_threads()) == 1
            assert all(r is first for r in runs)  # each call joined the running pass
        assert first.wait(60) and first.errors == []
        assert {s.status for s in m.sanity_check_states().values()} == {CheckStatus.CHECKED}
        assert _checker_threads() == []
        again = m.start_sanity_checker()  # a finished pass: the next start is a new (empty) one
        assert again is not first and again.wait(60)


def _retained_per_segment(d: Path, cfg: LogConfig) -> tuple[float, float, int]:
    """(bytes, gc-tracked objects) kept per inactive segment by a background pass that checks every one of them,
    and how many segment objects exist afterwards."""
    with LogManager([d], log_config=cfg, properties=LAZY) as m:
        segments = sum(len(log.segments) - 1 for log in m.all_logs())
        gc.collect()
        tracemalloc.start()
        try:
            before, objects = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
            assert m.start_sanity_checker().wait(120)
            assert {s.status for s in m.sanity_check_states().values()} == {CheckStatus.CHECKED}
            gc.collect()
            after, objects_after = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        finally:
            tracemalloc.stop()
        made = sum(len(log.segments.made()) for log in m.all_logs())
    return (after - before) / segments, (objects_after - objects) / segments, made


def test_checked_unused_segments_keep_nothing(tmp_path: Path) -> None:
    """Checking builds each segment's object and its three indexes; once checked and unused, the segment goes back
    to the bare base offset a lazy load left (a few bytes of bookkeeping)."""
    cfg = LogConfig.from_properties({"segment.bytes": 200, "index.interval.bytes": 100})
    _make(tmp_path / "a", cfg, partitions=2, appends=100)
    per_seg, objs, made = _retained_per_segment(tmp_path / "a", cfg)
    assert per_seg < 100 and objs < 1, (per_seg, objs)  # before: ~2.3 KB and ~12 objects per segment
    assert made == 2  # the active segments alone


def test_a_read_keeps_its_segment_and_forgets_the_one_checked_beside_it(tmp_path: Path) -> None:
    """A read checks the segment it reads and the next one (which a read running off its segment's end may reach):
    the one read stays built for its use, the other is forgotten again; every record is still there."""
    cfg = LogConfig.from_properties({"segment.bytes": 200, "index.interval.bytes": 100})
    _make(tmp_path / "a", cfg, partitions=2, appends=60)
    with LogManager([tmp_path / "a"], log_config=cfg, properties=LAZY) as m:
        log = m.get_log("t", 0)
        bases = log.segments.base_offsets()
        mid = bases[len(bases) // 2]
        assert m.read("t", 0, mid)[0].base_offset == mid
        assert [s.base_offset for s in log.segments.made()] == [mid, bases[-1]]
        assert m.sanity_check_state("t", 0).segments_pending == len(bases) - 3  # mid and the next one checked
        for p in range(2):
            got, offset = [], 0
            while offset < 60:
                batches = m.read("t", p, offset)
                got.extend(r.key for b in batches for r in b.records())
                offset = batches[-1].last_offset + 1
            assert got == [b"k%d" % i for i in range(60)]


def test_a_retention_pass_builds_only_the_segments_it_asks_about(tmp_path: Path) -> None:
    """Retention walks from the oldest segment and stops at the first it keeps: the segments after that one stay
    the bare base offsets a lazy load left (a broker runs this every few minutes on every partition)."""
    cfg = LogConfig.from_properties({"segment.bytes": 200, "index.interval.bytes": 100, "retention.ms": 10**12})
    _make(tmp_path / "a", cfg, partitions=1, appends=40)
    with LogManager([tmp_path / "a"], log_config=cfg, properties=LAZY) as m:
        log = m.get_log("t", 0)
        bases = log.segments.base_offsets()
        assert len(bases) > 10
        assert m.delete_old_segments("t", 0) == 0
        assert [s.base_offset for s in log.segments.made()] == [bases[0], bases[-1]]
        log.maybe_increment_log_start_offset(bases[3])
        assert m.delete_old_segments("t", 0) == 3  # the log start breached: the first three go
        assert log.segments.base_offsets() == bases[3:]
        assert [s.base_offset for s in log.segments.made()] == [bases[3], bases[-1]]

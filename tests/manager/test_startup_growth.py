"""A clean lazy startup (KIP-263) costs per partition, not per segment (docs/log-manager.md), checked by counting
instead of timing: the same partitions with 10 and with 40 segments each are loaded by a ``LogManager``, and

- the file-system calls the load makes (open, stat, listings) are the same in number for both layouts;
- the Python it runs (line events and calls in the loading threads, as ``sys.settrace`` reports them, which
  counts every iteration of a Python loop or comprehension) grows by less than one line per extra segment;
- it leaves the same number of GC-tracked objects behind.

What a load must do per segment (read the names of the dir's files) is done by C code over whole lists (the
listing, ``str.split``/``count`` over the joined names, ``map``, set operations), which the tracer does not see;
a Python loop over the listing's names or the segments shows up as dozens of events per segment.
"""

from __future__ import annotations

import builtins
import gc
import os
import random
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from kafkalog.log.listing import join_names, list_dir, plain_segment_stems, snapshot_files
from kafkalog.manager import LogManager
from tests.layouts import copied_log_dir

#: 20 partitions x 30 extra segments: the main thread's waiting on the loader threads adds a timing-dependent few
#: hundred events to either count (seen: +200 under CI's load), which 6 partitions' 180 extra segments could not
#: tell from a Python loop over the segments (a few events each), while 600 can
PARTITIONS = 20
PROPS = {
    "sanity.check.all.logs.enabled": "false",
    "num.recovery.threads.per.data.dir": 2,
    "log.retention.check.interval.ms": 10**9,
    "log.flush.offset.checkpoint.interval.ms": 10**9,
    "log.flush.start.offset.checkpoint.interval.ms": 10**9,
}
_FS_CALLS = {os: ("open", "stat", "lstat", "scandir", "listdir"), builtins: ("open",)}


def _layout(root: Path, segments: int) -> Path:
    return copied_log_dir(root / f"x{segments}", PARTITIONS, segments, lambda s: [(b"k%d" % s, b"v" * 100)] * 3,
                          index_interval=64)


def _counted_startup(d: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Counter[str], int]:
    """(Python line and call events in the threads that load, file-system calls by name, GC-tracked objects the
    loaded manager holds) for one clean lazy startup of ``d``."""
    fs: Counter[str] = Counter()
    for module, names in _FS_CALLS.items():
        for name in names:
            real = getattr(module, name)

            def spy(*a: object, _real=real, _name=f"{module.__name__}.{name}", **k: object) -> object:
                fs[_name] += 1
                return _real(*a, **k)

            monkeypatch.setattr(module, name, spy)
    events = [0]
    main = threading.current_thread()

    def trace(frame: object, event: str, arg: object):  # noqa: ANN202 - sys.settrace's signature
        t = threading.current_thread()
        if t is not main and not t.name.startswith("kafkalog-recovery"):
            return None  # the scheduler's or the cleaner's threads: not the load
        events[0] += 1
        return local

    def local(frame: object, event: str, arg: object):  # noqa: ANN202
        events[0] += 1
        return local

    m = LogManager([d], properties=PROPS)
    gc.collect()
    before = len(gc.get_objects())
    threading.settrace(trace)
    sys.settrace(trace)
    try:
        m.startup()
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        monkeypatch.undo()
    gc.collect()
    objects = len(gc.get_objects()) - before
    try:
        states = m.sanity_check_states()
        assert len(states) == PARTITIONS and all(s.segments_checked == 1 for s in states.values())
    finally:
        m.shutdown()
    return events[0], fs, objects


def test_clean_lazy_startup_costs_per_partition_not_per_segment(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = {s: _layout(tmp_path, s) for s in (10, 40)}
    for d in dirs.values():  # imports (lazy package names) and a first start's one-time work, uncounted
        m = LogManager([d], properties=PROPS)
        m.startup()
        m.shutdown()
    got = {s: _counted_startup(d, monkeypatch) for s, d in dirs.items()}
    (ev10, fs10, obj10), (ev40, fs40, obj40) = got[10], got[40]
    extra_segments = PARTITIONS * 30
    assert sum(fs10.values()) >= 2 * PARTITIONS  # the spies saw the load (a listing and more per partition)
    assert fs40 == fs10, f"file-system calls grow with segments: {fs10} at x 10, {fs40} at x 40"
    per_segment = (ev40 - ev10) / extra_segments
    assert per_segment < 1, (
        f"{ev10} Python events at x 10 segments, {ev40} at x 40: {per_segment:.1f} per extra segment "
        "(a Python loop over the listing or the segments on the clean startup path)"
    )
    assert obj40 - obj10 < extra_segments / 3, f"{obj10} GC-tracked objects kept at x 10, {obj40} at x 40"


# --- the listing's classification answers as the per-name rules it replaced -------------------------------------

def _reference_stems(names: list[str], plain: set[str]) -> list[str] | None:
    """The fast path's decision name by name (the rule ``listing.plain_segment_stems`` computes over the lot)."""
    if len(plain) != len(names):
        return None
    logs = [n[:-4] for n in names if n.endswith(".log")]
    if not logs or not all(len(s) == 20 and s.isascii() and s.isdigit() for s in logs):
        return None
    with_log = set(logs)
    offset = {n[:-6] for n in names if n.endswith(".index")}
    time = {n[:-10] for n in names if n.endswith(".timeindex")}
    txn = {n[:-9] for n in names if n.endswith(".txnindex")}
    if not (offset <= with_log and time <= with_log and txn <= with_log):
        return None
    inactive = set(logs[:-1])
    if not (inactive <= offset and inactive <= time) or not inactive.isdisjoint(txn):
        return None
    return logs


def _reference_snapshots(prefix: str, names: list[str]) -> dict[int, str]:
    return {int(n[:20]): prefix + n for n in names if n.endswith(".snapshot") and len(n) == 29 and n[:20].isdecimal()}


_ODD_STEMS = ["123", "x" * 20, "\u0660" * 20, "0" * 19 + "a", "0" * 21, "junk\n" + "0" * 20, ""]
_SUFFIXES = [".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".log.deleted", ".index.swap", ""]


def _random_listing(rng: random.Random) -> tuple[list[str], set[str]]:
    """A partition dir's names: mostly a clean layout (each segment's .index, .log, .timeindex, .snapshot), then a
    few names dropped or added (odd stems, txn indexes, orphans, leftovers, a name with a newline, a directory)."""
    bases = sorted(rng.sample(range(0, 10**6), rng.randint(1, 8)))
    names = {"leader-epoch-checkpoint"}
    for b in bases:
        stem = "%020d" % b
        names.update(stem + s for s in (".index", ".log", ".timeindex", ".snapshot"))
    names.add("%020d.snapshot" % (bases[-1] + 7))
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        if rng.random() < 0.4 and names:
            names.discard(rng.choice(sorted(names)))
        else:
            stem = rng.choice(_ODD_STEMS + ["%020d" % rng.choice(bases), "%020d" % rng.randint(0, 10**6)])
            names.add(stem + rng.choice(_SUFFIXES))
    names.discard("")
    files = sorted(names)
    plain = set(files)
    if rng.random() < 0.05:
        plain.add("a-directory")
    return files, plain


def test_the_listing_is_classified_as_name_by_name() -> None:
    rng = random.Random(42)
    fast = 0
    for _ in range(3000):
        files, plain = _random_listing(rng)
        joined = join_names(files) if not any("\n" in n for n in files) else None
        want = _reference_stems(files, plain)
        assert plain_segment_stems(files, plain, joined) == want, files
        fast += want is not None
        assert snapshot_files("/d/", files, joined) == _reference_snapshots("/d/", files), files
    assert 300 < fast < 2700  # both answers were exercised


def test_list_dir_answers_as_the_entry_by_entry_rule(tmp_path: Path) -> None:
    """Regular files, a directory, a symlink to a file, a dangling one: the same files, plain names and links as
    ``Path.is_file`` / ``is_symlink`` say entry by entry."""
    d = tmp_path / "p"
    d.mkdir()
    for n in ("00000000000000000000.log", "00000000000000000000.index", "b"):
        (d / n).write_bytes(b"")
    plain_only = list_dir(str(d))
    assert plain_only == (["00000000000000000000.index", "00000000000000000000.log", "b"],
                          {"00000000000000000000.index", "00000000000000000000.log", "b"}, set())
    (d / "sub").mkdir()
    assert list_dir(str(d))[0] == plain_only[0] and "sub" in list_dir(str(d))[1]
    (d / "link").symlink_to(d / "b")
    (d / "dangling").symlink_to(d / "missing")
    files, plain, links = list_dir(str(d))
    assert files == sorted(p.name for p in d.iterdir() if p.is_file())
    assert plain == {p.name for p in d.iterdir() if not p.is_symlink()}
    assert links == {"link", "dangling"}

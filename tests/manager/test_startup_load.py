"""The clean-load fast paths (docs/log-manager.md, "Startup that grows with partitions"): inactive segments added
by base offset and built on first use, the general path for any listing that is not plain, index resizes that
map nothing, and the loop versions of the batch table and strict index checks, which must answer exactly as the
numpy versions do."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from kafkalog.errors import CorruptIndexError
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex
from kafkalog.log.log import Log
from kafkalog.records import build_batch
from kafkalog.records.scan import scan_batches, small_batch_table

CFG = {"segment.bytes": 1 << 30, "index.interval.bytes": 256}


def _write_log(path: Path, segments: int, *, batches: int = 6) -> int:
    """A partition with ``segments`` segments written through Log; returns its log end offset."""
    log = Log.open(path, CFG)
    offset = 0
    for s in range(segments):
        for _ in range(batches):
            recs = [(b"k%d" % (offset + i), b"v" * 100) for i in range(3)]
            log.append_as_follower(build_batch(recs, base_offset=offset, partition_leader_epoch=0,
                                               timestamp=1000 + offset))
            offset += 3
        if s < segments - 1:
            log.roll()
    log.close()
    return offset


def _offsets(log: Log) -> list[int]:
    """Every offset, read from the start (a read returns the batches of one segment)."""
    out: list[int] = []
    while len(out) < log.log_end_offset:
        got = [r.offset for b in log.read(len(out), max_bytes=1 << 30) for r in b.records()]
        assert got
        out += got
    return out


def test_clean_load_builds_only_the_active_segment(tmp_path: Path) -> None:
    end = _write_log(tmp_path / "t-0", 5)
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=True, recovery_point=end)
    try:
        segs = log.segments
        assert len(segs) == 5 and segs.base_offsets() == [0, 18, 36, 54, 72]
        assert segs.made() == [segs.last]  # the four inactive segments exist as offsets only
        assert log.log_end_offset == end
        first = segs.get(0)
        assert first is not None and first is segs.get(0) and segs.first is first  # built once, then kept
        assert [s.base_offset for s in segs.made()] == [0, 72]
        assert _offsets(log) == list(range(end))  # reads build (and check) what they reach
        assert len(segs.made()) == 5
    finally:
        log.close()


@pytest.mark.parametrize("extra", ["orphan-index", "txnindex", "subdir", "newline-log-name", "short-index-name"])
def test_a_listing_with_exceptions_takes_the_general_path(tmp_path: Path, extra: str) -> None:
    d = tmp_path / "t-0"
    end = _write_log(d, 4)
    if extra == "orphan-index":
        (d / "00000000000000099999.index").write_bytes(b"")
    elif extra == "txnindex":
        (d / "00000000000000000018.txnindex").write_bytes(b"")
    elif extra == "newline-log-name":  # two offsets in one name: no segment for the general path either
        (d / "00000000000000000001\n00000000000000000002.log").write_bytes(b"")
    elif extra == "short-index-name":
        (d / "18.index").write_bytes(b"")  # the general path keeps it: offset 18 has its .log
    else:
        (d / "somedir").mkdir()
    log = Log.open(d, CFG, clean_shutdown=True, recovery_point=end)
    try:
        assert len(log.segments.made()) == 4  # every segment built at load, as before the fast path
        assert log.log_end_offset == end
        if extra == "orphan-index":
            assert ("orphan index", "00000000000000099999.index") in log.load_actions
            assert not (d / "00000000000000099999.index").exists()
        assert _offsets(log) == list(range(end))
    finally:
        log.close()


def test_a_name_with_a_newline_is_no_snapshot(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    end = _write_log(d, 4)
    (d / "junk\n00000000000000000005.snapshot").write_bytes(b"")
    log = Log.open(d, CFG, clean_shutdown=True, recovery_point=end)
    try:
        assert sorted(log._psm.snapshot_listing) == [18, 36, 54, 72]
        assert len(log.segments.made()) == 1  # nothing the segments depend on: the fast path holds
    finally:
        log.close()


def test_unclean_load_builds_every_segment(tmp_path: Path) -> None:
    end = _write_log(tmp_path / "t-0", 3)
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=False, recovery_point=end)
    try:
        assert len(log.segments.made()) == 3
        assert log.log_end_offset == end
    finally:
        log.close()


def test_lazy_segments_follow_a_renamed_dir_and_close_without_being_built(tmp_path: Path) -> None:
    end = _write_log(tmp_path / "t-0", 3)
    log = Log.open(tmp_path / "t-0", CFG, clean_shutdown=True, recovery_point=end)
    segs = log.segments
    os.rename(tmp_path / "t-0", tmp_path / "t-1")
    segs.update_parent_dir(tmp_path / "t-1")
    assert segs.get(0).log_path == tmp_path / "t-1" / "00000000000000000000.log"  # type: ignore[union-attr]
    removed = segs.remove(18)
    assert removed is not None and removed.base_offset == 18 and 18 not in segs
    log.close()


def test_resizing_an_index_nobody_mapped_maps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">iiii", 1, 0, 5, 200))
    idx = OffsetIndex(path, 100, max_index_size=4096)
    assert idx.resize(4096) is True
    assert not idx.is_loaded and os.path.getsize(path) == 4096
    with idx.read_for_check():  # a copy of the two entries, not a map of the grown file
        assert idx.lookup(104) == (101, 0) and idx.length == 4096 and not idx.is_mmapped
    assert not idx.is_loaded
    assert idx.entry_count == 2 and idx.max_entries == 512  # mapped on first use, with its entries and room
    assert idx.resize(4096) is False
    idx.close()
    assert os.path.getsize(path) == 16  # trimmed to the entries on close, as before


def _segment_bytes(tmp_path: Path) -> bytes:
    d = tmp_path / "seg-0"
    _write_log(d, 1, batches=12)
    return (d / "00000000000000000000.log").read_bytes()


def test_small_batch_table_answers_as_scan_batches(tmp_path: Path) -> None:
    data = _segment_bytes(tmp_path)
    rng = random.Random(7)
    answered = 0
    for case in range(400):
        buf = bytearray(data)
        if case:  # case 0: the clean file
            for _ in range(rng.randint(1, 3)):
                kind = rng.random()
                if kind < 0.4:
                    buf[rng.randrange(len(buf))] = rng.randrange(256)
                elif kind < 0.7:
                    del buf[rng.randrange(len(buf)):]
                else:
                    buf += bytes(rng.randrange(1, 80))
        size = len(buf)
        got = small_batch_table(buf, size)
        if got is None:
            continue
        answered += 1
        scan = scan_batches(bytes(buf), end=size, check_crc=False)
        h = scan.headers
        assert got[0] == [int(p) for p in scan.positions]
        assert got[1] == (h["base_offset"].astype(np.int64) + h["last_offset_delta"].astype(np.int64)).tolist()
        assert got[2] == h["max_timestamp"].astype(np.int64).tolist()
        assert scan.valid_bytes == size and (h["magic"] == 2).all()
    assert answered > 20  # the clean file and the damage that keeps whole batches (a flipped value byte)


def _outcome(fn, *args: object) -> str:
    try:
        fn(*args)
    except CorruptIndexError as e:
        return str(e)
    return "ok"


def test_loop_strict_checks_answer_as_the_vectorised_ones(tmp_path: Path) -> None:
    rng = random.Random(11)
    base = 1000
    seen = set()
    for case in range(600):
        nb = rng.randint(0, 8)
        starts = sorted(rng.sample(range(0, 4000, 50), nb))
        lasts = sorted(rng.sample(range(base, base + 60), nb))
        max_ts = [rng.randint(0, 40) for _ in range(nb)]
        size = (starts[-1] + 50) if starts else rng.randint(0, 100)
        n = rng.randint(0, 7)

        def pick(seq: list[int], lo: int, hi: int) -> int:
            return rng.choice(seq) if seq and rng.random() < 0.8 else rng.randint(lo, hi)

        offs = sorted(pick(lasts, base - 3, base + 70) - base for _ in range(n))
        poss = sorted(pick(starts, -2, 4100) for _ in range(n))
        if rng.random() < 0.3 and n > 1:
            rng.shuffle(offs)
        p = tmp_path / f"{case}.index"
        p.write_bytes(b"".join(struct.pack(">ii", o, q) for o, q in zip(offs, poss, strict=True)))
        idx = OffsetIndex(p, base, writable=False)
        vec = _outcome(idx.strict_check, size, np.asarray(starts, np.int64), np.asarray(lasts, np.int64))
        loop = _outcome(idx.strict_check, size, list(starts), list(lasts))
        assert loop == vec, (case, offs, poss, starts, lasts)
        seen.add(vec.split(") ", 1)[-1][:20])

        tss = sorted(rng.randint(0, 45) for _ in range(n))
        if rng.random() < 0.3 and n > 1:
            rng.shuffle(tss)
        toffs = sorted(pick(lasts, base - 3, base + 70) - base for _ in range(n))
        tp = tmp_path / f"{case}.timeindex"
        tp.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in zip(tss, toffs, strict=True)))
        tidx = TimeIndex(tp, base, writable=False)
        nxt = (lasts[-1] + 1) if lasts else base
        vec = _outcome(tidx.strict_check, nxt, np.asarray(lasts, np.int64), np.asarray(max_ts, np.int64))
        loop = _outcome(tidx.strict_check, nxt, list(lasts), list(max_ts))
        assert loop == vec, (case, tss, toffs, lasts, max_ts)
        seen.add(vec.split(") ", 1)[-1][:20])
    assert len(seen) >= 8  # both checks passed and most of their failure branches were reached


def test_size_based_retention_that_deletes_nothing_builds_nothing(tmp_path: Path) -> None:
    """``retention.bytes`` above the log's size: the retention pass adds up the segments' sizes from a stat of
    each lazily added ``.log`` and builds no segment; the size it finds is the built segments' sum."""
    end = _write_log(tmp_path / "t-0", 5)
    files = sum(p.stat().st_size for p in (tmp_path / "t-0").glob("*.log"))
    cfg = {**CFG, "retention.ms": "-1"}
    log = Log.open(tmp_path / "t-0", {**cfg, "retention.bytes": str(files + 1)}, clean_shutdown=True,
                   recovery_point=end)
    try:
        segs = log.segments
        assert log.size == files and log.delete_old_segments() == 0
        assert [s.base_offset for s in segs.made()] == [0, 72]  # the oldest, asked about, and the active one
        assert sum(s.size for s in segs.values()) == files  # now built: the same sum
    finally:
        log.close()
    first = (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size
    log = Log.open(tmp_path / "t-0", {**cfg, "retention.bytes": str(files - first)}, clean_shutdown=True,
                   recovery_point=end)
    try:  # over by the oldest segment's size: only it goes, and only it and the next are built to decide so
        assert log.delete_old_segments() == 1 and log.log_start_offset == 18
        assert [s.base_offset for s in log.segments.made()] == [18, 72]
    finally:
        log.close()

"""Own cases for the index layer: fullness, truncation, resize, laziness, sanity/strict failures, fallback."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    IndexStateError,
    InvalidOffsetError,
)
from kafkalog.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex


def _brute(keys: list[int], target: int) -> int:
    slot = -1
    for i, k in enumerate(keys):
        if k <= target:
            slot = i
    return slot


# ------------------------------------------------------------------------------------------------ offset index


def test_full_offset_index(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=30)  # rounds down to 3 entries
    assert idx.max_entries == 3 and idx.length == 24
    for i in range(3):
        idx.append(i * 10, i * 100)
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.append(100, 1000)
    idx.close()
    assert (tmp_path / "0.index").stat().st_size == 24


def test_append_rules(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "x.index", 50, max_index_size=80)
    idx.append(50, 0)
    with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
        idx.append(50, 10)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(50 + 2**31, 10)
    assert not idx.can_append_offset(49) and idx.can_append_offset(50 + 2**31 - 1)
    ro = OffsetIndex(tmp_path / "x.index", 50, writable=False)
    with pytest.raises(IndexStateError):
        ro.append(60, 0)
    idx.close()


def test_truncate_to_follows_kafka(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "t.index", 100, max_index_size=800)
    for off, pos in [(101, 0), (105, 40), (110, 80), (120, 120)]:
        idx.append(off, pos)
    idx.truncate_to(200)  # past the end: no effect
    assert idx.entry_count == 4
    idx.truncate_to(110)  # exact: removes it and everything after
    assert idx.entries_array()["offset"].tolist() == [101, 105]
    idx.truncate_to(103)  # between: keeps the entry below
    assert idx.entries_array()["offset"].tolist() == [101]
    assert idx.last_offset == 101
    idx.append(102, 50)  # appends continue after the new last entry
    idx.truncate_to(50)  # below everything
    assert idx.entry_count == 0 and idx.last_offset == 100
    assert idx.lookup(150) == (100, 0)
    idx.truncate()
    idx.close()
    assert (tmp_path / "t.index").stat().st_size == 0


def test_resize_grow_and_shrink(tmp_path: Path) -> None:
    p = tmp_path / "r.index"
    idx = OffsetIndex(p, 0, max_index_size=64)
    idx.append(1, 0)
    idx.append(2, 10)
    idx.trim_to_valid_size()
    assert p.stat().st_size == 16 and idx.is_full()
    assert idx.resize(64) and p.stat().st_size == 64 and idx.max_entries == 8
    assert not idx.resize(67)  # rounds down to the same size
    idx.append(3, 20)
    assert idx.lookup(5) == (3, 20)
    with pytest.raises(IndexStateError):
        idx.resize(8)  # would drop entries
    idx.close()
    assert p.read_bytes() == struct.pack(">iiiiii", 1, 0, 2, 10, 3, 20)
    # Reopened: an existing file is full; growing it makes room again.
    again = OffsetIndex(p, 0, max_index_size=64)
    assert again.entry_count == 3 and again.is_full()
    again.resize(again.max_index_size)
    again.append(4, 30)
    again.close()
    assert p.stat().st_size == 32


def test_lazy_construction_touches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real_mmap = mmap.mmap

    def spy(*a: object, **k: object) -> mmap.mmap:
        calls.append(a)
        return real_mmap(*a, **k)

    monkeypatch.setattr(mmap, "mmap", spy)
    missing = tmp_path / "00000000000000000000.index"
    oi = OffsetIndex(missing, 0)
    ti = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0)
    xi = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert not missing.exists() and not any(tmp_path.iterdir())
    assert not (oi.is_loaded or ti.is_loaded or xi.is_loaded) and calls == []
    oi.close()  # closing a never-loaded index touches nothing either
    ti.close()
    xi.close()
    assert not any(tmp_path.iterdir())

    existing = tmp_path / "00000000000000000007.index"
    existing.write_bytes(struct.pack(">ii", 1, 0))
    before = existing.stat().st_mtime_ns
    lazy = OffsetIndex(existing, 7)
    assert calls == [] and existing.stat().st_mtime_ns == before and existing.stat().st_size == 8
    assert lazy.lookup(9) == (8, 0)  # first use maps it
    assert lazy.is_loaded and lazy.is_mmapped and len(calls) == 1
    lazy.close()
    assert not lazy.is_loaded


def test_txn_index_created_only_on_first_append(tmp_path: Path) -> None:
    p = tmp_path / "5.txnindex"
    xi = TransactionIndex(p, 5)
    assert xi.all_entries() == [] and not p.exists()
    xi.truncate_to(0)
    xi.reset()
    assert not p.exists()
    xi.append(AbortedTxn(1, 5, 9, 5))
    assert p.stat().st_size == 34
    with pytest.raises(InvalidOffsetError):
        xi.append(AbortedTxn(2, 6, 9, 5))
    xi.append(AbortedTxn(2, 6, 12, 10))
    xi.append(AbortedTxn(3, 11, 20, 13))
    xi.close()
    again = TransactionIndex(p, 5)
    with pytest.raises(InvalidOffsetError):  # the last offset is read back from the file
        again.append(AbortedTxn(4, 15, 20, 15))
    again.truncate_to(12)
    assert [t.producer_id for t in again.all_entries()] == [1]
    assert p.stat().st_size == 34
    again.append(AbortedTxn(5, 10, 11, 10))
    assert again.collect_aborted_txns(11, 12) == ([AbortedTxn(5, 10, 11, 10)], False)
    assert again.collect_aborted_txns(0, 10) == ([AbortedTxn(1, 5, 9, 5)], True)
    again.strict_check(next_offset=30)
    again.delete()
    assert not p.exists()


def test_txn_index_sanity_failures(tmp_path: Path) -> None:
    p = tmp_path / "100.txnindex"
    p.write_bytes(AbortedTxn(1, 90, 99, 90).to_bytes())
    with pytest.raises(CorruptIndexError, match="less than start offset"):
        TransactionIndex(p, 100).sanity_check()
    p.write_bytes(AbortedTxn(1, 100, 110, 100, version=1).to_bytes())
    with pytest.raises(CorruptIndexError, match="version"):
        TransactionIndex(p, 100).all_entries()
    p.write_bytes(AbortedTxn(1, 100, 110, 100).to_bytes() + b"\x00" * 5)
    xi = TransactionIndex(p, 100)
    xi.sanity_check()  # Kafka ignores a partial tail
    with pytest.raises(CorruptIndexError, match="multiple"):
        xi.strict_check()


# ------------------------------------------------------------------------------------------------ sanity / strict


def test_offset_sanity_failures(tmp_path: Path) -> None:
    p = tmp_path / "a.index"
    p.write_bytes(struct.pack(">ii", 1, 0) + b"\x00" * 3)
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        OffsetIndex(p, 0, writable=False).sanity_check()
    p.write_bytes(struct.pack(">iiii", 1, 0, -3, 10))
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        OffsetIndex(p, 100, writable=False).sanity_check()


def test_time_sanity_failures(tmp_path: Path) -> None:
    p = tmp_path / "a.timeindex"
    p.write_bytes(struct.pack(">qiqi", 1000, 1, 900, 2))
    with pytest.raises(CorruptIndexError, match="last timestamp"):
        TimeIndex(p, 0, writable=False).sanity_check()
    p.write_bytes(struct.pack(">qiqi", 1000, 1, 1100, -2))
    with pytest.raises(CorruptIndexError, match="last offset"):
        TimeIndex(p, 0, writable=False).sanity_check()
    p.write_bytes(struct.pack(">qi", 1000, 1) + b"\x01")
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        TimeIndex(p, 0, writable=False).sanity_check()
    p.write_bytes(struct.pack(">qiqiqi", 1000, 1, 1200, 2, 1100, 3))  # passes Kafka's check, not ours
    idx = TimeIndex(p, 0, writable=False)
    idx.sanity_check()
    with pytest.raises(CorruptIndexError, match="does not increase the timestamp"):
        idx.strict_check()


def test_strict_check_catches_what_sanity_misses(tmp_path: Path) -> None:
    p = tmp_path / "s.index"
    p.write_bytes(struct.pack(">iiii", 1, 0, 5, 5000))
    idx = OffsetIndex(p, 0, writable=False)
    idx.sanity_check()
    with pytest.raises(CorruptIndexError, match="outside the log"):
        idx.strict_check(4096)
    idx.strict_check(6000)
    with pytest.raises(CorruptIndexError, match="batch start"):
        idx.strict_check(6000, np.array([0, 4990]))
    with pytest.raises(CorruptIndexError, match="past the log's last offset 4"):
        idx.strict_check(6000, np.array([0, 5000]), np.array([1, 4]))
    with pytest.raises(CorruptIndexError, match="batch before its position already holds"):
        idx.strict_check(6000, np.array([0, 5000]), np.array([5, 9]))
    idx.strict_check(6000, np.array([0, 100, 5000]), np.array([1, 3, 5]))
    p.write_bytes(struct.pack(">iiiiii", 1, 0, 9, 100, 7, 200))  # offsets go backwards mid-file
    bad = OffsetIndex(p, 0, writable=False)
    bad.sanity_check()  # Kafka only looks at the last entry
    with pytest.raises(CorruptIndexError, match="entry 2 .*does not increase the offset"):
        bad.strict_check(1000)
    p.write_bytes(struct.pack(">iiii", 1, 100, 2, 50))
    with pytest.raises(CorruptIndexError, match="does not increase the position"):
        OffsetIndex(p, 0, writable=False).strict_check(1000)


# ------------------------------------------------------------------------------------------------ time index


def test_time_index_maybe_append_rules(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "t.timeindex", 10, max_index_size=48)  # 4 slots, 3 usable before roll
    assert idx.last_entry == (-1, 10)
    idx.maybe_append(-1, 10)  # no timestamp: nothing appended
    assert idx.entry_count == 0
    idx.maybe_append(100, 11)
    idx.maybe_append(100, 12)  # same timestamp: ignored
    assert idx.entry_count == 1
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(200, 10)
    with pytest.raises(IndexStateError):
        idx.maybe_append(50, 13)
    idx.maybe_append(200, 13)
    idx.maybe_append(300, 13)  # equal offset is allowed
    assert idx.is_full()
    with pytest.raises(IndexFullError):
        idx.maybe_append(400, 14)
    idx.maybe_append(400, 14, skip_full_check=True)  # the reserved slot
    with pytest.raises(IndexFullError):
        idx.maybe_append(500, 15, skip_full_check=True)
    assert idx.lookup(250) == (200, 13) and idx.lookup(99) == (-1, 10) and idx.lookup(10**15) == (400, 14)
    # Offsets [11, 13, 13, 14]: Kafka's binary search stops at the first exact hit (slot 2), so one entry with
    # offset 13 survives truncateTo(13). kafkalog gives the same answer.
    idx.truncate_to(13)
    assert idx.entries_array()["timestamp"].tolist() == [100, 200]
    idx.truncate_to(12)
    assert idx.entries_array()["timestamp"].tolist() == [100]
    assert idx.last_entry == (100, 11)
    idx.close()
    assert (tmp_path / "t.timeindex").stat().st_size == 12


# ------------------------------------------------------------------------------------------------ fallback


def test_pyfakefs_fallback_append_lookup_trim_reopen(fs) -> None:  # noqa: ANN001 - pyfakefs fixture
    d = Path("/logs/t-0")
    d.mkdir(parents=True)
    p = d / "00000000000000000000.index"
    idx = OffsetIndex(p, 0, max_index_size=1024)
    for i in range(20):
        idx.append(i * 3, i * 100)
    assert not idx.is_mmapped and p.stat().st_size == 1024
    assert idx.lookup(31) == (30, 1000)
    assert idx.lookup_many(np.array([-1, 31, 10**6]))[0].tolist() == [0, 30, 57]
    idx.truncate_to(30)
    idx.resize(512)
    idx.close()
    assert p.stat().st_size == 80
    assert p.read_bytes()[:16] == struct.pack(">iiii", 0, 0, 3, 100)
    again = OffsetIndex(p, 0, max_index_size=1024)
    assert again.entry_count == 10 and again.is_full() and again.lookup(100) == (27, 900)
    again.resize(1024)
    again.append(40, 5000)
    again.flush()
    again.close()
    assert p.stat().st_size == 88

    ti = TimeIndex(d / "00000000000000000000.timeindex", 0, max_index_size=120)
    ti.maybe_append(1000, 3)
    ti.maybe_append(2000, 9)
    ti.close()
    ro = TimeIndex(d / "00000000000000000000.timeindex", 0, writable=False)
    assert ro.lookup(1500) == (1000, 3) and ro.entry_count == 2 and not ro.is_mmapped
    ro.sanity_check()

    xi = TransactionIndex(d / "00000000000000000000.txnindex", 0)
    xi.append(AbortedTxn(7, 1, 4, 0))
    xi.close()
    assert TransactionIndex(d / "00000000000000000000.txnindex", 0).all_entries() == [AbortedTxn(7, 1, 4, 0)]


def test_forced_fallback_matches_mmap_bytes(tmp_path: Path) -> None:
    paths = []
    for use_mmap in (True, False):
        p = tmp_path / f"{use_mmap}.timeindex"
        ti = TimeIndex(p, 5, max_index_size=240, use_mmap=use_mmap)
        for i in range(10):
            ti.maybe_append(1000 + i * 7, 5 + i * 2)
        assert ti.is_mmapped is use_mmap
        ti.truncate_to(15)
        ti.close()
        paths.append(p)
    assert paths[0].read_bytes() == paths[1].read_bytes()


# ------------------------------------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=1, max_value=50), min_size=0, max_size=3000),
    targets=st.lists(st.integers(min_value=-10, max_value=200_000), min_size=1, max_size=50),
)
def test_lookup_equals_brute_force(tmp_path_factory: pytest.TempPathFactory, gaps: list[int], targets: list[int]) -> None:
    base = 1000
    offsets = list(np.cumsum(gaps) + base - 1) if gaps else []
    p = tmp_path_factory.mktemp("prop") / "p.index"
    idx = OffsetIndex(p, base, max_index_size=8 * max(1, len(gaps)))
    for i, off in enumerate(offsets):
        idx.append(int(off), i * 8)
    tgt = [base + t for t in targets]
    want = []
    for t in tgt:
        s = _brute(offsets, t)
        want.append((int(offsets[s]), s * 8) if s >= 0 else (base, 0))
    assert [tuple(idx.lookup(t)) for t in tgt] == want
    # the entry before the one found: what a reader starting there knows its first batch must begin after
    prev = [(int(offsets[s - 1]), (s - 1) * 8) if s >= 1 else None for s in (_brute(offsets, t) for t in tgt)]
    got = [idx.lookup_with_previous(t) for t in tgt]
    assert [tuple(f) for f, _ in got] == want
    assert [None if b is None else tuple(b) for _, b in got] == prev
    o, q = idx.lookup_many(np.array(tgt))
    assert list(zip(o.tolist(), q.tolist(), strict=True)) == want
    idx.close()
    ro = OffsetIndex(p, base, writable=False)  # read-only past the warm section: the cached-keys path
    assert [tuple(ro.lookup(t)) for t in tgt] == want
    ro.close()


def test_unsorted_index_lookup_many_matches_single(tmp_path: Path) -> None:
    """On a damaged (unsorted) file the batch path must still give Kafka's per-target answers."""
    rng = np.random.default_rng(3)
    rel = rng.integers(0, 500, size=3000).astype(">i4")
    raw = np.empty(3000, dtype=[("r", ">i4"), ("p", ">i4")])
    raw["r"] = rel
    raw["p"] = np.arange(3000)
    p = tmp_path / "u.index"
    p.write_bytes(raw.tobytes())
    idx = OffsetIndex(p, 0, writable=False)
    targets = np.arange(-5, 520)
    o, q = idx.lookup_many(targets)
    assert list(zip(o.tolist(), q.tolist(), strict=True)) == [tuple(idx.lookup(int(t))) for t in targets]

"""Kafka-written index files: read them back, look them up, and write them again byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from kafkalog.errors import CorruptIndexError
from kafkalog.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
from tests.conftest import GOLDEN


def _partition_manifests() -> list[tuple[str, Path, dict]]:
    """(id, partition dir, manifest) for logdir/, unclean/recovered/ and loader/recovered/."""
    if GOLDEN is None:
        return []
    out = []
    for pattern, root in (
        ("manifests/golden-*.json", "logdir"),
        ("unclean/manifests/*.recovered.json", "unclean/recovered"),
        ("loader/manifests/*.recovered.json", "loader/recovered"),
    ):
        for mf in sorted(GOLDEN.glob(pattern)):
            m = json.loads(mf.read_text())
            out.append((f"{root}/{m['dir']}", GOLDEN / root / m["dir"], m))
    return out


def _segments() -> list:
    params = []
    for pid, pdir, m in _partition_manifests():
        segs = m["segments"]
        sha = {f["name"]: f["sha256"] for f in m["files"]}
        for i, seg in enumerate(segs):
            nxt = segs[i + 1]["baseOffset"] if i + 1 < len(segs) else m["logEndOffsetFromBatches"]
            params.append(pytest.param(pdir, seg, nxt, sha, id=f"{pid}@{seg['baseOffset']}"))
    return params


SEGMENTS = _segments()
if GOLDEN is None:  # keep collection honest without golden files
    SEGMENTS = [pytest.param(None, None, None, None, marks=pytest.mark.skip(reason="Kafka golden files not found"))]


def _largest_le(keys: list[int], target: int) -> int:
    """Brute force, independent of the library: slot of the largest key <= target, -1 if none."""
    slot = -1
    for i, k in enumerate(keys):
        if k <= target:
            slot = i
    return slot


def _sanity(index) -> str:
    try:
        index.sanity_check()
    except CorruptIndexError as e:
        return f"corrupt: {e}"
    return "ok"


def test_golden_partitions_found() -> None:
    if GOLDEN is None:
        pytest.skip("Kafka golden files not found")
    assert len(_partition_manifests()) == 21
    assert len(SEGMENTS) > 100


@pytest.mark.parametrize(("pdir", "seg", "next_base", "sha"), SEGMENTS)
def test_offset_index_reads_and_looks_up_like_kafka(pdir: Path, seg: dict, next_base: int, sha: dict) -> None:
    m = seg["offsetIndex"]
    base = seg["baseOffset"]
    path = pdir / m["file"]
    before = path.stat().st_mtime_ns
    idx = OffsetIndex(path, base, writable=False)
    try:
        expected = [(e["offset"], e["position"]) for e in m["entries"]]
        assert idx.entry_count == len(expected) == idx.max_entries  # an existing file is full
        arr = idx.entries_array()
        assert list(zip(arr["offset"].tolist(), arr["position"].tolist(), strict=True)) == expected
        assert _sanity(idx) == m["sanityCheck"]
        keys = [o for o, _ in expected]
        targets = list(range(base - 2, max(next_base, base) + 3))
        want = []
        for t in targets:
            s = _largest_le(keys, t)
            want.append(expected[s] if s >= 0 else (base, 0))
        got = [tuple(idx.lookup(t)) for t in targets]
        assert got == want
        offs, poss = idx.lookup_many(np.array(targets))
        assert list(zip(offs.tolist(), poss.tolist(), strict=True)) == want
        positions = [p for _, p in expected]
        if positions:
            idx.strict_check(max(positions) + 1, np.array(sorted(positions)))
    finally:
        idx.close()
    assert path.stat().st_mtime_ns == before


@pytest.mark.parametrize(("pdir", "seg", "next_base", "sha"), SEGMENTS)
def test_time_index_reads_and_looks_up_like_kafka(pdir: Path, seg: dict, next_base: int, sha: dict) -> None:
    m = seg["timeIndex"]
    base = seg["baseOffset"]
    idx = TimeIndex(pdir / m["file"], base, writable=False)
    try:
        expected = [(e["timestamp"], e["offset"]) for e in m["entries"]]
        assert idx.entry_count == len(expected)
        arr = idx.entries_array()
        assert list(zip(arr["timestamp"].tolist(), arr["offset"].tolist(), strict=True)) == expected
        assert _sanity(idx) == m["sanityCheck"]
        assert tuple(idx.last_entry) == (expected[-1] if expected else (-1, base))
        keys = [t for t, _ in expected]
        targets = sorted({t + d for t in keys for d in (-1, 0, 1)} | {-1, 0, 2**62})
        want = []
        for t in targets:
            s = _largest_le(keys, t)
            want.append(expected[s] if s >= 0 else (-1, base))
        assert [tuple(idx.lookup(t)) for t in targets] == want
        tss, offs = idx.lookup_many(np.array(targets))
        assert list(zip(tss.tolist(), offs.tolist(), strict=True)) == want
        idx.strict_check(next_base if next_base > base else None)
    finally:
        idx.close()


@pytest.mark.parametrize(("pdir", "seg", "next_base", "sha"), SEGMENTS)
def test_txn_index_reads_like_kafka(pdir: Path, seg: dict, next_base: int, sha: dict) -> None:
    base = seg["baseOffset"]
    m = seg.get("txnIndex")
    path = pdir / f"{base:020d}.txnindex"
    idx = TransactionIndex(path, base, writable=False)
    if m is None:
        assert not path.exists()
        assert idx.all_entries() == []
        return
    expected = [
        AbortedTxn(e["producerId"], e["firstOffset"], e["lastOffset"], e["lastStableOffset"], e["version"])
        for e in m["entries"]
    ]
    assert idx.all_entries() == expected
    assert _sanity(idx) == m["sanityCheck"]
    # Kafka's collectAbortedTxns, computed here with a plain loop over the manifest.
    for fetch in range(base - 1, next_base + 2, 3):
        for upper in (fetch + 1, fetch + 7, next_base, 2**62):
            want, complete = [], False
            for t in expected:
                if t.last_offset >= fetch and t.first_offset < upper:
                    want.append(t)
                if t.last_stable_offset >= upper:
                    complete = True
                    break
            assert tuple(idx.collect_aborted_txns(fetch, upper)) == (want, complete)
    idx.close()


@pytest.mark.parametrize(("pdir", "seg", "next_base", "sha"), SEGMENTS)
def test_rewriting_entries_gives_kafkas_bytes(tmp_path: Path, pdir: Path, seg: dict, next_base: int, sha: dict) -> None:
    base = seg["baseOffset"]
    # Any max size that holds the entries will do: Kafka trims to the used size on close.
    oi = OffsetIndex(tmp_path / seg["offsetIndex"]["file"], base, max_index_size=64 + 8 * len(seg["offsetIndex"]["entries"]))
    assert oi.entry_count == 0  # first use creates the preallocated file (lazy until then)
    for e in seg["offsetIndex"]["entries"]:
        oi.append(e["offset"], e["position"])
    oi.close()
    tentries = seg["timeIndex"]["entries"]
    ti = TimeIndex(tmp_path / seg["timeIndex"]["file"], base, max_index_size=12 * (len(tentries) + 1) + 5)
    assert ti.entry_count == 0
    for i, e in enumerate(tentries):
        ti.maybe_append(e["timestamp"], e["offset"], skip_full_check=i == len(tentries) - 1)
    ti.close()
    produced = [seg["offsetIndex"]["file"], seg["timeIndex"]["file"]]
    if seg.get("txnIndex") is not None:
        xi = TransactionIndex(tmp_path / seg["txnIndex"]["file"], base)
        for e in seg["txnIndex"]["entries"]:
            xi.append(AbortedTxn(e["producerId"], e["firstOffset"], e["lastOffset"], e["lastStableOffset"]))
        xi.close()
        produced.append(seg["txnIndex"]["file"])
    for name in produced:
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == sha[name], name


def _scenario_index_bytes(pdir: Path) -> int | None:
    if GOLDEN is None:
        return None
    for sc in json.loads((GOLDEN / "SCENARIOS.json").read_text())["scenarios"]:
        if sc["dir"].endswith("/" + pdir.name):
            v = sc["topicConfig"].get("segment.index.bytes")
            return int(v) if v is not None else None
    return None


@pytest.mark.skipif(GOLDEN is None, reason="Kafka golden files not found")
def test_indexfull_case_writes_with_kafkas_max_size(tmp_path: Path) -> None:
    """golden-indexfull-0 rolled because its indexes filled at segment.index.bytes=64: replay with that size."""
    pdir = GOLDEN / "logdir" / "golden-indexfull-0"
    max_size = _scenario_index_bytes(pdir)
    assert max_size == 64
    m = json.loads((GOLDEN / "manifests" / "golden-indexfull-0.json").read_text())
    sha = {f["name"]: f["sha256"] for f in m["files"]}
    for seg in m["segments"]:
        base = seg["baseOffset"]
        oi = OffsetIndex(tmp_path / seg["offsetIndex"]["file"], base, max_index_size=max_size)
        assert oi.max_entries == 8
        for e in seg["offsetIndex"]["entries"]:
            oi.append(e["offset"], e["position"])
        ti = TimeIndex(tmp_path / seg["timeIndex"]["file"], base, max_index_size=max_size)
        assert ti.max_entries == 5 and ti.entry_count == 0
        entries = seg["timeIndex"]["entries"]
        for i, e in enumerate(entries):
            ti.maybe_append(e["timestamp"], e["offset"], skip_full_check=i == len(entries) - 1)
        oi.close()
        ti.close()
        for name in (seg["offsetIndex"]["file"], seg["timeIndex"]["file"]):
            assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == sha[name]
    assert os.listdir(tmp_path)

"""LogSegment against Kafka's own files: rebuilding segments byte for byte, lookups, recovery."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import threading
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError, CorruptRecordError, LogSegmentOffsetOverflowError
from kafkalog.index.txn_index import AbortedTxn
from kafkalog.log.config import LogConfig
from kafkalog.records import build_batch, read_batches
from kafkalog.segment.log_segment import LogSegment
from tests.conftest import GOLDEN, golden_cases, load_manifest, needs_golden
from tests.threads import run_threads


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def case_config(manifest: dict) -> LogConfig:
    return LogConfig.from_properties(manifest["scenario"].get("topicConfig", {}))


def segment_batches(log_path: Path) -> list[bytes]:
    return [bytes(b.raw) for b in read_batches(log_path)]


def expected_files(manifest: dict) -> dict[str, dict]:
    return {f["name"]: f for f in manifest["files"]}


@needs_golden
@pytest.mark.parametrize("case", golden_cases())
def test_rebuild_golden_segments_byte_identical(case, tmp_path):
    """Appending Kafka's batches one by one into fresh segments and closing them gives Kafka's exact files."""
    manifest = load_manifest(f"manifests/{case}.json")
    config = case_config(manifest)
    files = expected_files(manifest)
    src = GOLDEN / "logdir" / case
    for seg_info in manifest["segments"]:
        base = seg_info["baseOffset"]
        seg = LogSegment.open(tmp_path, base, config=config)
        for raw in segment_batches(src / f"{base:020d}.log"):
            seg.append(raw)
        for e in (seg_info.get("txnIndex") or {}).get("entries", []):
            seg.append_aborted_txn(
                AbortedTxn(e["producerId"], e["firstOffset"], e["lastOffset"], e["lastStableOffset"])
            )
        seg.close()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            name = f"{base:020d}{suffix}"
            if name in files:
                ours = tmp_path / name
                assert ours.exists(), f"{case}: {name} not written"
                assert sha(ours) == files[name]["sha256"], f"{case}: {name} differs from Kafka's"


@needs_golden
@pytest.mark.parametrize("case", golden_cases())
def test_golden_offset_and_time_lookups(case, golden_copy):
    """translate_offset and find_offset_by_timestamp agree with a brute-force answer from the manifest."""
    manifest = load_manifest(f"manifests/{case}.json")
    d = golden_copy(f"logdir/{case}")
    config = case_config(manifest)
    for seg_info in manifest["segments"]:
        base = seg_info["baseOffset"]
        seg = LogSegment.open(d, base, config=config)
        batches = seg_info["log"]["batches"]
        for b in batches:
            for off in range(b["baseOffset"], b["lastOffset"] + 1):
                got = seg.translate_offset(off)
                assert got is not None and got.position == b["position"], (case, off)
                assert got.offset == b["lastOffset"]
        if batches:
            assert seg.translate_offset(batches[-1]["lastOffset"] + 1) is None
        records = [r for b in batches for r in b["records"]]
        probe_ts = sorted({r["timestamp"] for r in records})[:40]
        for ts in probe_ts + [0, 2**62]:
            expected = next(((r["timestamp"], r["offset"]) for r in records if r["timestamp"] >= ts), None)
            got = seg.find_offset_by_timestamp(ts)
            assert (None if got is None else (got.timestamp, got.offset)) == expected, (case, ts)
        seg.close()


def _recovery_cases():
    if GOLDEN is None:
        return []
    return sorted(p.stem.replace(".result", "") for p in (GOLDEN / "unclean" / "manifests").glob("*.result.json"))


@needs_golden
@pytest.mark.parametrize("case", _recovery_cases())
def test_golden_unclean_segment_recovery(case, golden_copy):
    """Recovering each damaged segment gives Kafka's truncation point and Kafka's rebuilt index bytes."""
    result = load_manifest(f"unclean/manifests/{case}.result.json")
    damaged = golden_copy(f"unclean/input/{case}-0")
    recovered = GOLDEN / "unclean" / "recovered" / f"{case}-0"
    config = LogConfig.from_properties(result["topicConfig"])
    rp = result["loadArgs"]["recoveryPointCheckpoint"]
    clean = result["loadArgs"]["hadCleanShutdown"]
    bases = sorted(int(p.stem) for p in damaged.glob("*.log"))
    for base in bases:
        nxt = next((b for b in bases if b > base), None)
        below_recovery_point = nxt is not None and nxt <= rp
        missing_index = not (damaged / f"{base:020d}.index").exists()
        if not missing_index and (clean or below_recovery_point):
            continue  # Kafka recovers only unflushed segments, or any segment without an offset index
        seg = LogSegment.open(damaged, base, config=config)
        seg.recover()
        seg.close()
        for suffix in (".log", ".index", ".timeindex"):
            theirs = recovered / f"{base:020d}{suffix}"
            if theirs.exists():
                assert sha(damaged / theirs.name) == sha(theirs), f"{case}: {theirs.name}"
        if base == max(bases):
            assert seg.read_next_offset() == result["kafkaLoadResult"]["nextOffset"]


def _make_batches(n: int, per: int = 3, size: int = 100, start: int = 0, ts0: int = 1_700_000_000_000):
    out = []
    off = start
    for _ in range(n):
        recs = [(f"k{off + j}".encode(), os.urandom(size)) for j in range(per)]
        out.append(build_batch(recs, base_offset=off))
        off += per
    return out


def test_append_read_translate_roundtrip(tmp_path):
    seg = LogSegment.open(tmp_path, 100, config=LogConfig.from_properties({"index.interval.bytes": 500}))
    batches = _make_batches(30, start=100)
    for b in batches:
        seg.append(b)
    assert seg.size == sum(len(b) for b in batches)
    assert seg.offset_index.entry_count > 0
    got = seg.read(130, 1)
    assert got and got[0].base_offset <= 130 <= got[0].last_offset
    assert len(got) == 1  # min one batch even when max_bytes is tiny
    all_batches = seg.read(100, 1 << 20)
    assert [bytes(b.raw) for b in all_batches] == batches
    assert seg.read_next_offset() == 190
    assert seg.read(190, 100) is None


def test_truncate_to_drops_later_batches_and_entries(tmp_path):
    seg = LogSegment.open(tmp_path, 0, config=LogConfig.from_properties({"index.interval.bytes": 0}))
    batches = _make_batches(10)
    for b in batches:
        seg.append(b)
    removed = seg.truncate_to(15)
    assert removed == sum(len(b) for b in batches[5:])
    assert seg.read_next_offset() == 15
    assert all(o < 15 for o in seg.offset_index.entries_array()["offset"])
    seg.append(_make_batches(1, start=15)[0])
    assert seg.read_next_offset() == 18


def test_recover_cuts_torn_tail_and_garbage(tmp_path):
    seg = LogSegment.open(tmp_path, 0, config=LogConfig.from_properties({"index.interval.bytes": 0}))
    batches = _make_batches(8)
    for b in batches:
        seg.append(b)
    seg.close()
    good = sum(len(b) for b in batches[:7])
    log = tmp_path / f"{0:020d}.log"
    with open(log, "r+b") as f:
        f.truncate(good + len(batches[7]) // 2)  # torn last batch
        f.seek(0, 2)
        f.write(b"\x00" * 3)
    seg = LogSegment.open(tmp_path, 0, config=LogConfig.from_properties({"index.interval.bytes": 0}))
    truncated = seg.recover()
    assert truncated == len(batches[7]) // 2 + 3
    assert seg.size == good
    seg.sanity_check(strict=True)


def test_recover_stops_at_flipped_byte(tmp_path):
    seg = LogSegment.open(tmp_path, 0)
    batches = _make_batches(6)
    for b in batches:
        seg.append(b)
    seg.close()
    log = tmp_path / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    pos = sum(len(b) for b in batches[:3]) + 70
    data[pos] ^= 0xFF
    log.write_bytes(bytes(data))
    seg = LogSegment.open(tmp_path, 0)
    assert seg.recover() == len(data) - sum(len(b) for b in batches[:3])
    assert seg.read_next_offset() == 9


@pytest.mark.parametrize("per_batch", [False, True])
def test_recover_blames_a_first_batch_that_jumped_ahead_of_the_segment_base(tmp_path, per_batch):
    # Found by the damaged-golden harness: bit 27 of the first batch's base offset set. The second batch then goes
    # backwards; it still starts after the segment's base offset, so the first one is the damaged batch. Keeping
    # it served offset base + 2**27 as a record Kafka never wrote (Kafka itself drops the whole segment here).
    seg = LogSegment.open(tmp_path, 90)
    batches = _make_batches(4, start=90)
    for b in batches:
        seg.append(b)
    seg.close()
    log = tmp_path / f"{90:020d}.log"
    with open(log, "r+b") as f:
        f.write(struct.pack(">q", 90 + (1 << 27)))
    seg = LogSegment.open(tmp_path, 90)
    truncated = seg._recover_per_batch() if per_batch else seg.recover()
    assert truncated == sum(len(b) for b in batches)
    assert seg.size == 0 and seg.read_next_offset() == 90


def test_recover_keeps_a_first_batch_after_the_segment_base_when_the_next_one_is_damaged(tmp_path):
    # A cleaned segment may start after its base offset; when the second batch is flipped backwards below the
    # segment's base offset (no batch of this segment can start there), it is the one cut.
    seg = LogSegment.open(tmp_path, 80)
    batches = _make_batches(4, start=90)
    for b in batches:
        seg.append(b)
    seg.close()
    with open(tmp_path / f"{80:020d}.log", "r+b") as f:
        f.seek(len(batches[0]))
        f.write(struct.pack(">q", 70))
    seg = LogSegment.open(tmp_path, 80)
    assert seg.recover() == sum(len(b) for b in batches[1:])
    assert seg.read_next_offset() == 93


def test_recover_rebuilds_zeroed_and_overlong_index(tmp_path):
    cfg = LogConfig.from_properties({"index.interval.bytes": 0})
    seg = LogSegment.open(tmp_path, 0, config=cfg)
    for b in _make_batches(12):
        seg.append(b)
    seg.close()
    idx = tmp_path / f"{0:020d}.index"
    good = idx.read_bytes()
    idx.write_bytes(b"\x00" * len(good) + b"\x00\x00\x00\x7f\x00\x10\x00\x00")  # zeroed, plus an entry past EOF
    seg = LogSegment.open(tmp_path, 0, config=cfg)
    with pytest.raises(CorruptIndexError):
        seg.sanity_check(strict=True)
    seg.recover()
    seg.close()
    assert idx.read_bytes() == good


def test_missing_offset_index_means_recovery(tmp_path):
    seg = LogSegment.open(tmp_path, 0)
    seg.append(_make_batches(1)[0])
    seg.close()
    (tmp_path / f"{0:020d}.index").unlink()
    seg = LogSegment.open(tmp_path, 0)
    with pytest.raises(FileNotFoundError):
        seg.sanity_check()


def test_append_rejects_partial_batches_and_overflow(tmp_path):
    seg = LogSegment.open(tmp_path, 0)
    b = _make_batches(1)[0]
    with pytest.raises(CorruptRecordError):
        seg.append(b[:-5])
    far = build_batch([(b"k", b"v")], base_offset=2**31 + 5)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(far)
    assert seg.size == 0


def test_should_roll_reasons(tmp_path):
    clock = [1_000]
    seg = LogSegment.open(tmp_path, 0, clock=lambda: clock[0])
    kw = dict(max_segment_ms=10_000, max_timestamp_in_messages=-1, max_offset_in_messages=5, now_ms=clock[0])
    assert not seg.should_roll(max_segment_bytes=1000, messages_size=100, **kw)
    seg.append(build_batch([(b"k", b"v" * 500)], base_offset=0))
    assert seg.should_roll(max_segment_bytes=1000, messages_size=600, **kw)  # size
    kw2 = dict(kw, max_offset_in_messages=2**31 + 10)
    assert seg.should_roll(max_segment_bytes=10**9, messages_size=1, **kw2)  # relative offset overflow
    ts0 = json.loads("1700000000000")
    (tmp_path / "b").mkdir()
    seg2 = LogSegment.open(tmp_path / "b", 0, clock=lambda: clock[0])
    seg2.append(build_batch([(b"k", b"v")], base_offset=0))  # timestamps: build_batch default
    first = seg2.first_batch_timestamp
    assert first >= 0 or first == 2**63 - 1
    assert seg2.should_roll(
        max_segment_bytes=10**9, max_segment_ms=10, messages_size=1,
        max_timestamp_in_messages=max(first, ts0) + 1000, max_offset_in_messages=1, now_ms=clock[0],
    )  # time


def test_lazy_open_touches_no_index_file(tmp_path):
    seg = LogSegment.open(tmp_path, 0)
    seg.append(_make_batches(2)[0])
    seg.close()
    idx = tmp_path / f"{0:020d}.index"
    before = idx.stat().st_mtime_ns
    seg = LogSegment.open(tmp_path, 0)
    assert seg.size > 0
    assert idx.stat().st_mtime_ns == before
    assert not (tmp_path / f"{0:020d}.txnindex").exists()


@pytest.mark.parametrize("op", ["close", "close_handlers", "release_indexes", "suspend"])
def test_lifecycle_of_an_unused_segment_builds_no_index(tmp_path, op):
    """Startup releases and shutdown closes thousands of segments nobody used: that must not build their index
    objects (nor touch an index file) just to let go of them, and the segment must still work afterwards."""
    seg = LogSegment.open(tmp_path, 0)
    seg.append(_make_batches(2)[0])
    seg.close()
    idx = tmp_path / f"{0:020d}.index"
    before = (idx.stat().st_size, idx.stat().st_mtime_ns)
    seg = LogSegment.open(tmp_path, 0)
    getattr(seg, op)()
    assert "_offset_index" not in seg.__dict__
    assert seg._lock_obj is None  # nor a lock: one per segment was a GC-tracked object per listed segment
    assert (idx.stat().st_size, idx.stat().st_mtime_ns) == before
    assert seg.read_next_offset() == 3  # still usable: the indexes are built on first use
    seg.close()


def test_a_segment_makes_one_lock_however_many_threads_ask_first(tmp_path):
    """The lazy open's lock is made on first use; threads racing to make it must all get the same one, or two
    of them could open the ``.log`` at once."""
    seg = LogSegment.open(tmp_path, 0)
    start = threading.Barrier(8)
    got: list[object] = []

    def first_use(_: int) -> None:
        start.wait()
        got.append(seg._lock)

    assert not run_threads(first_use, 8)
    assert len(got) == 8 and all(lock is got[0] for lock in got)
    assert seg._lock is got[0]
    seg.close()


def test_change_suffix_and_delete(tmp_path):
    seg = LogSegment.open(tmp_path, 0)
    seg.append(_make_batches(1)[0])
    seg.close()
    seg.change_file_suffixes("", ".deleted")
    assert (tmp_path / f"{0:020d}.log.deleted").exists()
    assert not (tmp_path / f"{0:020d}.log").exists()
    seg.delete()
    assert not list(tmp_path.iterdir())


def test_scan_without_mmap_matches_mmap(tmp_path, monkeypatch):
    seg = LogSegment.open(tmp_path, 0)
    for b in _make_batches(20, size=3000):
        seg.append(b)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x01" * 30)
    seg.close_handlers()
    it, state = seg.scan(0)
    via_mmap = [(b.position, b.last_offset) for b in it]
    import mmap as mmap_mod

    def refuse(*a, **k):
        raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(mmap_mod, "mmap", refuse)
    it, state2 = seg.scan(0)
    via_read = [(b.position, b.last_offset) for b in it]
    assert via_read == via_mmap
    assert state2["valid_end"] == state["valid_end"]
    shutil.rmtree(tmp_path / "x", ignore_errors=True)


def _all_kafka_partition_dirs() -> list[str]:
    if GOLDEN is None:
        return []
    out = []
    for parent in ("logdir", "legacy/logdir", "loader/recovered", "unclean/recovered"):
        out += [f"{parent}/{p.name}" for p in sorted((GOLDEN / parent).iterdir()) if p.is_dir()]
    return out


@needs_golden
@pytest.mark.parametrize("rel", _all_kafka_partition_dirs())
def test_strict_sanity_check_accepts_every_kafka_written_segment(rel, golden_copy):
    """The stricter checks must not flag what Kafka itself wrote (compacted, legacy per-append, dense indexes)."""
    d = golden_copy(rel)
    for log in sorted(d.glob("*.log")):
        seg = LogSegment.open(d, int(log.stem))
        seg.sanity_check(strict=True)
        seg.close_handlers()


# --- one-pass recovery against the per-batch paths ------------------------------------------------------------------

_T0 = 1_700_000_000_000


def _random_batches(rng, base: int, n: int, *, transactions: bool = False) -> list[bytes]:
    """Random v2 batches from ``base``: random sizes, offset gaps, out-of-order (and some missing) timestamps,
    leader epochs that sometimes rise, and (``transactions``) transactional batches with commit/abort markers."""
    from kafkalog.records import ControlRecordType, EndTransactionMarker, build_end_txn_marker_batch

    out, offset, epoch = [], base, rng.choice([-1, 0, 3])
    open_txn: dict[int, int] = {}  # producer id -> next sequence
    for _ in range(n):
        if rng.random() < 0.1:
            epoch += 1
        ts = -1 if rng.random() < 0.05 else _T0 + rng.randint(-50_000, 50_000)
        if transactions and open_txn and rng.random() < 0.25:
            pid = rng.choice(sorted(open_txn))
            del open_txn[pid]
            kind = rng.choice([ControlRecordType.ABORT, ControlRecordType.COMMIT])
            out.append(build_end_txn_marker_batch(EndTransactionMarker(kind, 0), offset=offset, timestamp=ts,
                                                  producer_id=pid, producer_epoch=0, partition_leader_epoch=epoch))
            offset += 1 + rng.choice([0, 0, 2])
            continue
        count = rng.randint(1, 6)
        records = [(b"k", b"v" * rng.randint(0, 300))] * count
        kwargs = {}
        if transactions and rng.random() < 0.5:
            pid = rng.randint(1, 4)
            seq = open_txn.get(pid, 0)
            open_txn[pid] = seq + count
            kwargs = dict(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        elif rng.random() < 0.2:
            kwargs = dict(producer_id=100, producer_epoch=0, base_sequence=-1)
        out.append(build_batch(records, base_offset=offset, timestamp=ts, partition_leader_epoch=epoch, **kwargs))
        offset += count + rng.choice([0, 0, 0, 5])
    return out


def _index_files(d: Path, base: int) -> dict[str, bytes | None]:
    out = {}
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        p = d / f"{base:020d}{suffix}"
        out[suffix] = p.read_bytes() if p.exists() else None
    return out


@pytest.mark.parametrize("interval", [0, 1, 100, 4096])
@pytest.mark.parametrize("max_index_size", [10 * 1024 * 1024, 60, 200])
def test_one_pass_recovery_equals_append_path(tmp_path, interval, max_index_size):
    """Recovering a segment written by per-batch appends (rolled when an index fills, as a Log does) rebuilds
    exactly the index files the appends and close left, and the same files as the per-batch recovery."""
    import random

    rng = random.Random(interval * 7919 + max_index_size)
    for trial in range(6):
        base = rng.choice([0, 1000])
        kw = dict(index_interval_bytes=interval, max_index_size=max_index_size)
        dirs = [tmp_path / f"{trial}-{name}" for name in ("append", "one-pass", "per-batch")]
        for d in dirs:
            d.mkdir()
        (dirs[0] / f"{base:020d}.log").touch()
        seg = LogSegment(dirs[0], base, **kw)
        for raw in _random_batches(rng, base, rng.randint(0, 60)):
            if seg.offset_index.is_full() or seg.time_index.is_full():
                break
            seg.append(raw)
        seg.close()
        log_name = f"{base:020d}.log"
        for d in dirs[1:]:
            shutil.copy(dirs[0] / log_name, d / log_name)
        one, ref = LogSegment(dirs[1], base, **kw), LogSegment(dirs[2], base, **kw)
        assert one.recover() == 0 == ref._recover_per_batch()
        expected = _index_files(dirs[0], base)
        if not expected[".log"]:  # no append ever touched the indexes; recovery creates them empty
            expected[".index"] = expected[".timeindex"] = b""
        assert _index_files(dirs[1], base) == expected
        assert _index_files(dirs[2], base) == expected
        assert one.max_timestamp_so_far == ref.max_timestamp_so_far == seg.max_timestamp_so_far
        assert one.offset_of_max_timestamp_so_far == ref.offset_of_max_timestamp_so_far
        assert one._bytes_since_last_index_entry == ref._bytes_since_last_index_entry
        for s in (one, ref):
            s.close()
        assert _index_files(dirs[1], base) == _index_files(dirs[2], base)


def _damage(rng, data: bytearray, batch_starts: list[int]) -> None:
    """One random kind of damage: a cut tail, a flipped byte, a rewritten base offset, or none."""
    kind = rng.choice(["none", "cut", "flip", "base", "base"])
    if not data or kind == "none":
        return
    if kind == "cut":
        del data[rng.randrange(len(data)):]
    elif kind == "flip":
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    else:
        at = rng.choice(batch_starts)
        old = int.from_bytes(data[at : at + 8], "big", signed=True)
        new = max(0, old + rng.choice([-100, -3, -1, 1, 2, 50, 2**31]))
        data[at : at + 8] = new.to_bytes(8, "big", signed=True)


@pytest.mark.parametrize("interval", [0, 1, 100, 4096])
def test_one_pass_recovery_equals_per_batch_recovery(tmp_path, interval):
    """Random segments (transactions, epochs, damaged bytes, small indexes that may fill): the one-pass recovery
    leaves the same files, producer state, leader epochs and segment state as the per-batch recovery, or raises
    the same error."""
    import random

    from kafkalog.log.epoch_cache import LeaderEpochFileCache
    from kafkalog.log.producer_state import ProducerStateManager

    rng = random.Random(interval)
    for trial in range(25):
        base = rng.choice([0, 500])
        max_index_size = rng.choice([10 * 1024 * 1024, 10 * 1024 * 1024, 48, 100, 400])
        kw = dict(index_interval_bytes=interval, max_index_size=max_index_size)
        batches = _random_batches(rng, base, rng.randint(0, 50), transactions=True)
        starts, pos = [], 0
        for b in batches:
            starts.append(pos)
            pos += len(b)
        data = bytearray(b"".join(batches))
        _damage(rng, data, starts or [0])
        stale = rng.random() < 0.5  # index files left from before the crash
        results = []
        for name, per_batch in (("one-pass", False), ("per-batch", True)):
            d = tmp_path / f"{trial}-{name}"
            d.mkdir()
            (d / f"{base:020d}.log").write_bytes(data)
            if stale:
                (d / f"{base:020d}.index").write_bytes(b"\x00\x00\x00\x07" * 6)
                (d / f"{base:020d}.txnindex").write_bytes(AbortedTxn(9, base, base + 1, base + 2).to_bytes())
            seg = LogSegment(d, base, **kw)
            psm = ProducerStateManager(d, clock=lambda: _T0)
            cache = LeaderEpochFileCache(None, entries=[(0, 0)] if base else None)
            try:
                truncated = (seg._recover_per_batch if per_batch else seg.recover)(psm, cache)
            except Exception as exc:  # noqa: BLE001 - both paths must fail alike
                results.append(("raised", type(exc)))
                continue
            state = (
                truncated,
                seg.max_timestamp_so_far,
                seg.offset_of_max_timestamp_so_far,
                seg._bytes_since_last_index_entry,
                seg.offset_index.entry_count,
                seg.time_index.last_entry,
                cache.entries(),
                psm.map_end_offset,
                sorted((pid, repr(e)) for pid, e in psm.active_producers.items()),
                sorted(psm.ongoing_txns),
            )
            seg.close()
            results.append((state, _index_files(d, base)))
        assert results[0] == results[1], f"trial {trial}"


def _closed_segment(tmp_path, n: int = 30) -> None:
    seg = LogSegment.open(tmp_path, 0, config=LogConfig.from_properties({"index.interval.bytes": 200}))
    for b in _make_batches(n, size=150):
        seg.append(b)
    seg.close()


def test_checking_a_small_closed_segment_maps_no_file(tmp_path, monkeypatch):
    """A one-shot check reads small files whole instead of mapping them (mmap + faults + munmap cost several
    times a read); it must still see every entry and batch, and leave the indexes unloaded."""
    import kafkalog.index.base as base
    import kafkalog.io.file_access as file_access

    _closed_segment(tmp_path)
    seg = LogSegment.open(tmp_path, 0)

    def no_map(*a, **k):
        raise AssertionError("mapped a small file for a one-shot check")

    monkeypatch.setattr(base.mmap, "mmap", no_map)
    monkeypatch.setattr(file_access.mmap, "mmap", no_map)
    seg.sanity_check(strict=True, whole_batches=True)
    assert not seg.offset_index.is_loaded and not seg.time_index.is_loaded
    monkeypatch.undo()
    assert seg.offset_index.entry_count > 3  # the same file, loaded normally afterwards


def test_check_by_read_finds_what_the_mapped_check_finds(tmp_path, monkeypatch):
    import kafkalog.index.base as base
    import kafkalog.segment.log_segment as segment_mod

    _closed_segment(tmp_path)
    idx = tmp_path / f"{0:020d}.index"
    raw = bytearray(idx.read_bytes())
    raw[-4:] = (10**6).to_bytes(4, "big")  # the last entry points past the end of the log
    idx.write_bytes(bytes(raw))
    errors = []
    for limit in (base.READ_NOT_MAP_BYTES, 0):  # read whole, then mapped
        monkeypatch.setattr(base, "READ_NOT_MAP_BYTES", limit)
        monkeypatch.setattr(segment_mod, "READ_NOT_MAP_BYTES", limit)
        seg = LogSegment.open(tmp_path, 0)
        assert seg.batch_table()[0].size == 30
        with pytest.raises(CorruptIndexError) as e:
            seg.sanity_check(strict=True)
        errors.append(str(e.value))
        seg.close_handlers()
    assert errors[0] == errors[1] and "outside the log" in errors[0]


def test_read_for_check_leaves_a_loaded_index_mapped(tmp_path):
    _closed_segment(tmp_path)
    seg = LogSegment.open(tmp_path, 0)
    n = seg.offset_index.entry_count  # loads (maps) the index
    mm = seg.offset_index._mm
    assert mm is not None
    with seg.offset_index.read_for_check():
        assert seg.offset_index._mm is mm and seg.offset_index.entry_count == n
    assert seg.offset_index.is_loaded
    seg.close()

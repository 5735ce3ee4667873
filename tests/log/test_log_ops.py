"""Log operations: leader/follower appends, each roll reason, retention reasons, truncation, reads, ListOffsets,
topic ids, snapshot fallback and crash recovery (cut/corrupted files reopened as unclean)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkalog.errors import (
    CorruptRecordError,
    InconsistentMetadataError,
    InvalidOffsetError,
    OffsetOutOfRangeError,
)
from kafkalog.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from kafkalog.records import (
    ControlRecordType,
    EndTransactionMarker,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    read_batches,
)

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _recs(n: int, size: int = 10) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % i, b"v" * size) for i in range(n)]


def _open(tmp_path: Path, props: dict | None = None, clock: Clock | None = None, **kw) -> Log:
    return Log.open(tmp_path / "t-0", props or {}, clock=clock or Clock(), **kw)


def _files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# ---------------------------------------------------------------------- appends and reads


def test_leader_append_assigns_offsets_epochs_and_reads_back(tmp_path: Path) -> None:
    log = _open(tmp_path)
    a = log.append_as_leader(_recs(3), leader_epoch=2)
    b = log.append_as_leader(_recs(2), leader_epoch=3)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 4)
    assert log.log_end_offset == 5
    batches = log.read(0)
    assert [bt.base_offset for bt in batches] == [0, 3]
    assert [bt.partition_leader_epoch for bt in batches] == [2, 3]
    assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [(2, 0), (3, 3)]
    assert log.read(5) == []
    assert [bt.base_offset for bt in log.read(4)] == [3]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6)
    log.close()


def test_log_append_time_stamps_with_clock(tmp_path: Path) -> None:
    clock = Clock(T0 + 5)
    log = _open(tmp_path, {"message.timestamp.type": "LogAppendTime"}, clock)
    info = log.append_as_leader(_recs(2), timestamp=T0 - 1000)
    assert info.log_append_time == T0 + 5 and info.max_timestamp == T0 + 5
    (batch,) = log.read(0)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert all(r.timestamp == T0 + 5 for r in batch.records())
    log.close()


def test_leader_append_of_client_bytes_rewrites_offsets(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append_as_leader(_recs(2))
    raw = build_batch(_recs(3), base_offset=0, timestamp=T0)
    info = log.append_as_leader(raw, leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (2, 4)
    (batch,) = log.read(2)
    assert batch.base_offset == 2 and batch.partition_leader_epoch == 7 and batch.is_valid()
    log.close()


def test_idempotent_duplicate_is_not_written_again(tmp_path: Path) -> None:
    log = _open(tmp_path)
    kw = dict(producer_id=42, producer_epoch=0, timestamp=T0)
    first = log.append_as_leader(_recs(2), base_sequence=0, **kw)
    log.append_as_leader(_recs(1), base_sequence=2, **kw)
    dup = log.append_as_leader(_recs(2), base_sequence=0, **kw)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 3
    log.close()


def test_follower_rejects_non_monotonic_and_corrupt(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append_as_follower(build_batch(_recs(3), base_offset=10, timestamp=T0))
    assert log.log_end_offset == 13
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(build_batch(_recs(1), base_offset=12, timestamp=T0))
    two = build_batch(_recs(2), base_offset=20, timestamp=T0) + build_batch(_recs(2), base_offset=15, timestamp=T0)
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(two)
    bad = bytearray(build_batch(_recs(1), base_offset=30, timestamp=T0))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(bad))
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(build_batch(_recs(1), base_offset=30, timestamp=T0)[:-3])
    assert log.log_end_offset == 13
    log.close()


def test_transaction_abort_goes_to_txn_index_and_lso(tmp_path: Path) -> None:
    log = _open(tmp_path)
    txn = dict(producer_id=7, producer_epoch=0, is_transactional=True, timestamp=T0)
    log.append_as_leader(_recs(2), base_sequence=0, **txn)
    log.append_as_leader(_recs(1))
    assert log.last_stable_offset == 0
    marker = build_end_txn_marker_batch(
        EndTransactionMarker(ControlRecordType.ABORT, 3), offset=log.log_end_offset, timestamp=T0,
        producer_id=7, producer_epoch=0,
    )
    log.append_as_follower(marker)
    assert log.last_stable_offset == log.log_end_offset
    entries = log.active_segment.txn_index.all_entries()
    assert [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries] == [(7, 0, 3, 4)]
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.bytes": "300"})
    for i in range(10):
        log.append_as_leader(_recs(2), timestamp=T0 + 100 * i, leader_epoch=1)
    assert len(log.segments) > 1
    found = log.offset_for_timestamp(T0 + 450)
    assert found is not None and (found.timestamp, found.offset) == (T0 + 500, 10)
    assert log.offset_for_timestamp(T0 + 10_000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 20
    mx = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert mx is not None and (mx.timestamp, mx.offset) == (T0 + 900, 18)
    log.close()


# ---------------------------------------------------------------------- rolls


def test_roll_on_size(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.bytes": "500"})
    sizes = []
    for _ in range(12):
        info = log.append_as_leader(_recs(2, 40))
        sizes.append(info.valid_bytes)
    assert len(log.segments) > 1
    for seg in log.segments.inactive():
        assert seg.size <= 500
    # each rolled segment gets a producer snapshot at its base offset
    assert {f"{s.base_offset:020d}.snapshot" for s in log.segments.values()[1:]} <= set(_files(log.dir))
    log.close()


def test_roll_on_time_uses_first_batch_timestamp(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.ms": "1000"})
    log.append_as_leader(_recs(1), timestamp=T0)
    log.append_as_leader(_recs(1), timestamp=T0 + 999)
    assert len(log.segments) == 1
    info = log.append_as_leader(_recs(1), timestamp=T0 + 1001)
    assert info.rolled and log.active_segment.base_offset == 2


def test_roll_on_time_without_timestamps_uses_clock(tmp_path: Path) -> None:
    clock = Clock()
    log = _open(tmp_path, {"segment.ms": "1000"}, clock)
    log.append_as_leader(_recs(1), timestamp=-1)
    clock.now += 1001
    assert log.append_as_leader(_recs(1), timestamp=-1).rolled


def test_roll_on_full_index(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.index.bytes": "32", "index.interval.bytes": "0"})
    for _ in range(12):
        log.append_as_leader(_recs(1))
    assert len(log.segments) >= 3
    for seg in log.segments.inactive():
        assert seg.offset_index.entry_count <= 4


def test_roll_on_offset_overflow(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append_as_follower(build_batch(_recs(1), base_offset=0, timestamp=T0))
    far = 2**31 + 5
    info = log.append_as_follower(build_batch(_recs(1), base_offset=far, timestamp=T0))
    assert info.rolled and log.active_segment.base_offset == far


def test_explicit_roll_and_reopen(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append_as_leader(_recs(3))
    seg = log.roll()
    assert seg.base_offset == 3 and (log.dir / "00000000000000000003.snapshot").exists()
    log.append_as_leader(_recs(2))
    log.flush()
    assert log.recovery_point == 5
    log.close()
    again = Log.open(log.dir, {}, clock=Clock())
    assert (again.log_end_offset, again.segments.base_offsets()) == (5, [0, 3])
    again.close()


# ---------------------------------------------------------------------- truncation


def test_truncate_across_segments_and_epoch_cache(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.bytes": "300"})
    for i in range(12):
        log.append_as_leader(_recs(2), leader_epoch=i // 4)
    bases = log.segments.base_offsets()
    assert len(bases) > 2
    target = bases[1] + 1
    assert log.truncate_to(target)
    assert log.log_end_offset == target and log.segments.base_offsets() == bases[:2]
    assert all(e.start_offset < target for e in log.leader_epoch_cache.entries())
    assert not any(p.endswith(".snapshot") and int(p[:20]) > target for p in _files(log.dir))
    assert not log.truncate_to(target + 5)
    log.append_as_leader(_recs(1), leader_epoch=9)
    assert log.log_end_offset == target + 1
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.segments.base_offsets()) == (100, 100, [100])
    assert log.leader_epoch_cache.entries() == []
    log.close()


# ---------------------------------------------------------------------- retention


def _fill(log: Log, n: int, ts_step: int = 1000) -> None:
    for i in range(n):
        log.append_as_leader(_recs(2, 30), timestamp=T0 + i * ts_step)


def test_retention_by_log_start_offset(tmp_path: Path) -> None:
    clock = Clock()
    log = _open(tmp_path, {"segment.bytes": "400", "file.delete.delay.ms": "5000"}, clock)
    _fill(log, 10)
    bases = log.segments.base_offsets()
    log.maybe_increment_log_start_offset(bases[2] + 1)
    assert log.delete_old_segments() == 2
    assert log.segments.base_offsets() == bases[2:]
    deleted = [p for p in _files(log.dir) if p.endswith(".deleted")]
    assert deleted and all(p.startswith((f"{bases[0]:020d}", f"{bases[1]:020d}")) for p in deleted)
    clock.now += 4999
    assert log.delete_expired_files() == 0
    clock.now += 2
    assert log.delete_expired_files() == len(deleted)
    assert not any(p.endswith(".deleted") for p in _files(log.dir))


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.bytes": "400", "retention.bytes": "800", "file.delete.delay.ms": "0"})
    _fill(log, 12)
    before = log.size
    n = log.delete_old_segments()
    assert n > 0 and log.size <= max(800, before - sum(0 for _ in range(n)))
    assert log.log_start_offset == log.segments.first.base_offset
    assert not any(p.endswith(".deleted") for p in _files(log.dir))


def test_retention_by_time_with_fixed_clock(tmp_path: Path) -> None:
    clock = Clock(T0 + 20_000)
    log = _open(tmp_path, {"segment.bytes": "400", "retention.ms": "10000"}, clock)
    _fill(log, 12)
    bases = log.segments.base_offsets()
    n = log.delete_old_segments()
    assert n >= 1
    for seg in log.segments.values()[:1]:
        assert clock.now - seg.largest_timestamp <= 10_000 or seg is log.active_segment
    assert log.segments.base_offsets()[0] > bases[0]
    # everything expired: the active segment is rolled first so the log never has no segment
    clock.now += 10**9
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset
    log.close()


# ---------------------------------------------------------------------- metadata and snapshots


def test_topic_id_written_and_checked(tmp_path: Path) -> None:
    log = _open(tmp_path, topic_id="dG9waWNJZAFnb2xkZW4AAQ")
    assert (log.dir / "partition.metadata").read_text().rstrip("\n").endswith(
        "topic_id: dG9waWNJZAFnb2xkZW4AAQ"
    )
    log.close()
    with pytest.raises(InconsistentMetadataError):
        Log.open(log.dir, {}, topic_id="AAAAAAAAAAAAAAAAAAAAAA", clock=Clock())
    assert Log.open(log.dir, {}, clock=Clock()).topic_id == "dG9waWNJZAFnb2xkZW4AAQ"


def test_corrupt_snapshot_falls_back_to_older_and_replays(tmp_path: Path) -> None:
    log = _open(tmp_path, {"segment.bytes": "400"})
    for i in range(10):
        log.append_as_leader(_recs(2, 30), producer_id=5, producer_epoch=0, base_sequence=2 * i, timestamp=T0)
    log.close()
    snaps = sorted(p for p in log.dir.iterdir() if p.suffix == ".snapshot")
    latest = snaps[-1]
    good = latest.read_bytes()
    bad = bytearray(good)
    bad[-3] ^= 1
    latest.write_bytes(bytes(bad))
    again = Log.open(log.dir, {"segment.bytes": "400"}, clock=Clock())
    assert again.producer_state.producers[5].last_seq == 19
    again.close()
    assert latest.read_bytes() == good  # rebuilt from the older snapshot + the log, identical


def test_unclean_recovery_leaves_identical_snapshots_alone_and_fixes_the_rest(tmp_path: Path) -> None:
    """Recovery from offset 0 rewrites every producer snapshot past the recovery point. A snapshot that already
    holds the bytes recovery would write stays the same file (deleting and creating it again is most of the cost
    of recovering a small segment); a wrong one gets the right bytes; one that no segment calls for is removed."""
    cfg = {"segment.bytes": "400"}
    log = _open(tmp_path, cfg)
    for i in range(12):
        log.append_as_leader(_recs(2, 30), producer_id=5, producer_epoch=0, base_sequence=2 * i, timestamp=T0 + i)
    log.close()
    snaps = sorted(p for p in log.dir.iterdir() if p.suffix == ".snapshot")
    assert len(snaps) >= 4
    good = {p.name: p.read_bytes() for p in snaps}
    wrong = snaps[1]
    bad = bytearray(good[wrong.name])
    bad[-3] ^= 1
    wrong.write_bytes(bytes(bad))
    stray = log.dir / f"{int(snaps[-1].name[:20]) + 1000:020d}.snapshot"
    stray.write_bytes(good[snaps[-1].name])
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in snaps}

    again = Log.open(log.dir, cfg, clean_shutdown=False, recovery_point=0, clock=Clock())
    assert again.recovered_at_load == frozenset(s.base_offset for s in again.segments.values())
    assert again.producer_state.producers[5].last_seq == 23
    again.close()
    after = {p.name: p for p in log.dir.iterdir() if p.suffix == ".snapshot"}
    assert set(after) == set(good)
    assert {n: p.read_bytes() for n, p in after.items()} == good
    untouched = [n for n in good if n != wrong.name]
    assert {n: (after[n].stat().st_ino, after[n].stat().st_mtime_ns) for n in untouched} == {
        n: before[n] for n in untouched
    }


def test_unclean_recovery_that_truncates_drops_the_later_snapshots(tmp_path: Path) -> None:
    cfg = {"segment.bytes": "400"}
    log = _open(tmp_path, cfg)
    for i in range(12):
        log.append_as_leader(_recs(2, 30), producer_id=5, producer_epoch=0, base_sequence=2 * i, timestamp=T0 + i)
    log.close()
    logs = sorted(log.dir.glob("*.log"))
    cut = logs[2]
    cut.write_bytes(cut.read_bytes()[:-7])  # the last batch of the third segment is torn
    again = Log.open(log.dir, cfg, clean_shutdown=False, recovery_point=0, clock=Clock())
    end = again.log_end_offset
    assert len(again.segments) == 3 and end < int(logs[3].name[:20])
    again.close()
    snaps = sorted(int(p.name[:20]) for p in log.dir.iterdir() if p.name.endswith(".snapshot"))
    assert snaps and max(snaps) <= end
    reopened = Log.open(log.dir, cfg, clock=Clock())
    assert reopened.log_end_offset == end and reopened.producer_state.producers[5].last_seq == end - 1
    reopened.close()


# ---------------------------------------------------------------------- crash recovery


def _reference(tmp_path: Path) -> tuple[Path, list[tuple[int, int]], int]:
    """A log with several segments; returns its dir, (base, last offset) per batch, and the flushed offset."""
    log = Log.open(tmp_path / "ref" / "t-0", {"segment.bytes": "2000", "index.interval.bytes": "200"}, clock=Clock())
    rng = random.Random(7)
    for i in range(60):
        log.append_as_leader(_recs(rng.randint(1, 5), rng.randint(1, 60)), timestamp=T0 + i, leader_epoch=i // 20)
        if i == 30:
            log.flush()
    flushed = log.recovery_point
    log.close()
    batches = []
    for f in sorted(log.dir.glob("*.log")):
        batches += [(b.base_offset, b.last_offset) for b in read_batches(f.read_bytes())]
    return log.dir, batches, flushed


@pytest.mark.parametrize("seed", range(50))
def test_crash_recovery_keeps_a_prefix_with_every_flushed_batch(tmp_path: Path, seed: int) -> None:
    import shutil

    ref, batches, flushed = _reference(tmp_path)
    d = tmp_path / "crash" / "t-0"
    shutil.copytree(ref, d)
    rng = random.Random(seed)
    logs = sorted(d.glob("*.log"))
    floor_base = max(int(g.name[:20]) for g in logs if int(g.name[:20]) <= flushed)
    victim = rng.choice([f for f in logs if int(f.name[:20]) >= floor_base])
    data = bytearray(victim.read_bytes())
    # Bytes before the recovery point were fsynced: damage only what comes after it.
    durable = next((b.position for b in read_batches(bytes(data)) if b.base_offset >= flushed), len(data))
    if rng.random() < 0.5:
        data = data[: rng.randrange(durable, len(data) + 1)]  # cut the file
    else:
        for _ in range(rng.randint(1, 3)):  # flip bytes
            if len(data) > durable:
                data[rng.randrange(durable, len(data))] ^= 1 << rng.randrange(8)
    victim.write_bytes(bytes(data))
    if rng.random() < 0.3:
        for idx in d.glob(victim.name[:20] + ".*index"):
            idx.unlink()
    log = Log.open(d, {"segment.bytes": "2000", "index.interval.bytes": "200"}, recovery_point=flushed,
                   clean_shutdown=False, clock=Clock())
    got = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 16)
        assert chunk
        for b in chunk:
            assert b.is_valid()
            got.append((b.base_offset, b.last_offset))
        offset = chunk[-1].last_offset + 1
    assert got == batches[: len(got)]  # a prefix of what was appended ...
    assert log.log_end_offset >= flushed  # ... holding every flushed batch
    assert all(e.start_offset < log.log_end_offset for e in log.leader_epoch_cache.entries())
    log.append_as_leader(_recs(1))  # and the log is usable
    log.close()


@pytest.mark.parametrize("name", ["0\u00b2.log.cleaned", "\u00b9\u00b2.log.swap", "\u0663.log.cleaned"])
def test_leftovers_with_non_ascii_digit_names_do_not_break_a_load(tmp_path: Path, name: str) -> None:
    """``str.isdigit`` is true for '²' and '٣', which ``int`` refuses or reads as a number Kafka never writes: a
    leftover so named is not a segment's file and must not stop the partition from loading."""
    log = Log.open(tmp_path / "t-0")
    log.append_as_leader([(b"k", b"v")])
    log.close()
    (tmp_path / "t-0" / name).write_bytes(b"junk")
    again = Log.open(tmp_path / "t-0", clean_shutdown=False)
    assert again.log_end_offset == 1
    assert [r.value for b in again.read(0) for r in b.records()] == [b"v"]
    again.close()

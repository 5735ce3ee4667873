"""ProducerStateManager: Kafka's append validation, transactions, LSO, snapshots and their file set."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log.producer_snapshot import read_producer_snapshot
from kafkalog.log.producer_state import (
    AppendOrigin,
    CompletedTxn,
    OutOfOrderSequenceError,
    ProducerFencedError,
    ProducerStateManager,
    _JavaLongHashOrder,
)

T0 = 1_700_000_000_000


def _data(psm: ProducerStateManager, pid: int, epoch: int, seq: int, first: int, last: int, *, txn: bool = False,
          origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
    info = psm.prepare_update(pid, origin)
    info.append_data_batch(epoch, seq, seq + last - first, T0 + last, first, last, txn)
    psm.update(info)
    psm.update_map_end_offset(last + 1)


def test_sequence_and_epoch_validation(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    _data(psm, 1, 0, 0, 0, 2)
    _data(psm, 1, 0, 3, 3, 3)
    with pytest.raises(OutOfOrderSequenceError):
        _data(psm, 1, 0, 9, 4, 4)
    _data(psm, 1, 1, 0, 4, 4)  # epoch bump resets the sequence
    with pytest.raises(ProducerFencedError):
        _data(psm, 1, 0, 1, 5, 5)
    _data(psm, 1, 0, 1, 5, 5, origin=AppendOrigin.REPLICATION)  # followers trust the leader
    assert psm.producers[1].producer_epoch == 0


def test_batch_metadata_keeps_five_and_finds_duplicates(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    for i in range(7):
        _data(psm, 9, 0, i * 2, i * 2, i * 2 + 1)
    entry = psm.producers[9]
    assert len(entry.batch_metadata) == 5
    assert entry.find_duplicate_batch(0, 12, 13) is not None
    assert entry.find_duplicate_batch(0, 0, 1) is None  # aged out


def test_transactions_lso_and_completion(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    _data(psm, 1, 0, 0, 0, 1, txn=True)
    _data(psm, 2, 0, 0, 2, 3, txn=True)
    assert psm.first_unstable_offset == 0
    info = psm.prepare_update(1, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(False, 5, 0, 4, T0)
    psm.update(info)
    assert done == CompletedTxn(1, 0, 4, True)
    assert psm.last_stable_offset(done) == 2  # the other open txn bounds the LSO
    psm.complete_txn(done)
    assert psm.first_undecided_offset == 2
    assert psm.first_unstable_offset == 0  # not yet replicated
    psm.on_high_watermark_updated(5)
    assert psm.first_unstable_offset == 2
    assert psm.producers[1].coordinator_epoch == 5 and psm.producers[1].current_txn_first_offset is None


def test_snapshot_round_trip_and_file_rules(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    for pid in (1000, 17, 2001):
        _data(psm, pid, 0, 0, pid % 7, pid % 7 + 1, txn=pid == 17)
    psm.update_map_end_offset(10)
    path = psm.take_snapshot()
    assert path is not None and path.name == "00000000000000000010.snapshot"
    assert psm.take_snapshot() is None  # nothing new since
    # Java HashMap order: bucket of the (spread) hash in a 16-slot table
    assert [e.producer_id for e in read_producer_snapshot(path)] == [17, 2001, 1000]
    again = ProducerStateManager(tmp_path, clock=lambda: T0)
    again.truncate_and_reload(0, 10)
    assert sorted(again.producers) == [17, 1000, 2001]
    assert again.producers[17].current_txn_first_offset == 17 % 7
    assert again.first_undecided_offset == 17 % 7
    # expired producers (no open txn) are dropped at load
    late = ProducerStateManager(tmp_path, clock=lambda: T0 + 10**9)
    late.truncate_and_reload(0, 10)
    assert sorted(late.producers) == [17]
    # snapshots outside (log start, log end] go on reload
    psm.update_map_end_offset(20)
    psm.take_snapshot()
    psm.truncate_and_reload(10, 15)
    assert psm.snapshot_offsets() == []


def test_corrupt_snapshot_falls_back_to_older(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    _data(psm, 5, 0, 0, 0, 4)
    psm.take_snapshot()
    _data(psm, 5, 0, 5, 5, 9)
    newest = psm.take_snapshot()
    assert newest is not None
    raw = bytearray(newest.read_bytes())
    raw[20] ^= 0xFF
    newest.write_bytes(bytes(raw))
    again = ProducerStateManager(tmp_path, clock=lambda: T0)
    again.truncate_and_reload(0, 10)
    assert again.map_end_offset == 5 and again.producers[5].last_seq == 4
    assert not newest.exists()


def test_remove_stray_snapshots_keeps_latest_past_last_segment(tmp_path: Path) -> None:
    for off in (0, 5, 7, 10, 12, 20):
        (tmp_path / f"{off:020d}.snapshot").write_bytes(b"")
    psm = ProducerStateManager(tmp_path, clock=lambda: T0)
    psm.remove_stray_snapshots([0, 10, 15])
    assert psm.snapshot_offsets() == [0, 10, 20]
    psm.remove_stray_snapshots([0, 10, 25])
    assert psm.snapshot_offsets() == [0, 10]


def test_java_hashmap_order_grows_and_never_shrinks() -> None:
    order = _JavaLongHashOrder()
    order.note_size(13)
    assert order.capacity == 32
    assert order.order([16, 32, 1]) == [32, 1, 16]  # buckets 0, 1, 16 of 32
    order.note_size(1)
    assert order.capacity == 32

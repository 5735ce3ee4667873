"""Per-producer idempotence/transaction state of a partition, and its ``<offset>.snapshot`` files.

A port of the behaviour of Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``.
Two details matter for byte-identical output:

* a snapshot lists producers in the iteration order of Kafka's ``java.util.HashMap<Long, ...>``; that order
  (bucket of the spread Long hash, then insertion order, table doubling past 75% load and never shrinking) is
  reproduced by ``_JavaLongHashOrder`` so our snapshots equal Kafka's byte for byte;
* which snapshot files exist after load/roll/truncation/retention follows Kafka's rules exactly
  (``truncate_and_reload``, ``remove_stray_snapshots``, ``take_snapshot`` only past the last snapshot).

The snapshot file format itself lives in ``kafkalog.log.producer_snapshot``; this module only decides *what*
goes in it and *when*.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafkalog.errors import (
    CorruptSnapshotError,
    InvalidArgumentError,
    InvalidTxnStateError,
    KafkaLogError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
)
from kafkalog.index.txn_index import AbortedTxn
from kafkalog.io.rewrite import rewrite_in_place
from kafkalog.limits import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NUM_BATCHES_TO_RETAIN,
    wall_clock_ms,
)
from kafkalog.log.producer_append import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    TxnMetadata,
)
from kafkalog.log.producer_snapshot import (
    ProducerSnapshotEntry,
    format_producer_snapshot,
    read_producer_snapshot,
    write_producer_snapshot,
)
from kafkalog.names import DELETED_SUFFIX, SNAPSHOT_SUFFIX

# The producer errors, constants and entry types live in errors, limits and producer_append; this module is
# where callers import the whole producer-state surface from.
__all__ = [
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DELETED_SUFFIX",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "NUM_BATCHES_TO_RETAIN",
    "SNAPSHOT_SUFFIX",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "InvalidTxnStateError",
    "OutOfOrderSequenceError",
    "ProducerAppendInfo",
    "ProducerFencedError",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TransactionCoordinatorFencedError",
    "TxnMetadata",
    "read_snapshot",
    "snapshot_file_name",
    "snapshot_offset",
    "write_snapshot",
]

_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(name: str) -> int | None:
    """The offset of a producer snapshot file name (``<20 digits>.snapshot``), None for any other name."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    m = _SNAPSHOT_RE.match(name)
    return int(m.group(1)) if m else None


class _JavaLongHashOrder:
    """Iteration order of a ``java.util.HashMap<Long, V>``: the order Kafka writes snapshot entries in."""

    def __init__(self) -> None:
        self.capacity = 16

    def note_size(self, size: int) -> None:
        while size > self.capacity * 3 // 4:
            self.capacity *= 2

    @staticmethod
    def _bucket_hash(key: int) -> int:
        k = key & 0xFFFFFFFFFFFFFFFF
        h = (k ^ (k >> 32)) & 0xFFFFFFFF
        return h ^ (h >> 16)

    def order(self, keys_in_insertion_order: Iterable[int]) -> list[int]:
        mask = self.capacity - 1
        return sorted(keys_in_insertion_order, key=lambda k: self._bucket_hash(k) & mask)


class ProducerStateManager:
    """Producer id -> state for one partition, plus the partition's producer snapshot files.

    ``clock`` returns ms; it decides producer expiry (``producer.id.expiration.ms``) when loading snapshots, so
    replays of old logs must pass the clock of the time they model (as Kafka's tests do).
    """

    # Segment recovery's ProducerStateRecovery protocol: a batch without a producer id only moves the map end
    # offset in ``recover_batch``/``apply_batch``, so one-pass recovery hands over only batches with one. A
    # subclass that overrides either hook may act on every batch, so it gets every batch unless it sets the
    # flag itself.
    skips_batches_without_producer = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "skips_batches_without_producer" not in own and ("recover_batch" in own or "apply_batch" in own):
            cls.skips_batches_without_producer = False

    def __init__(
        self,
        log_dir: str | Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        clock: Callable[[], int] | None = None,
        snapshot_reader: Callable[[Path], list[ProducerStateEntry]] | None = None,
        snapshot_writer: Callable[[Path, list[ProducerStateEntry]], None] | None = None,
        sync_snapshots: bool = True,
        snapshots: dict[int, Any] | None = None,
        retired: dict[int, Any] | None = None,
    ) -> None:
        self.log_dir = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._clock = clock or wall_clock_ms
        self._read = snapshot_reader or read_snapshot
        self._write = snapshot_writer or write_snapshot
        # Throwaway managers used during recovery skip fsync: a torn snapshot fails its CRC and is rebuilt.
        self.sync_snapshots = sync_snapshots
        self.producers: dict[int, ProducerStateEntry] = {}
        self._hash_order = _JavaLongHashOrder()
        self.ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> txn (kept sorted on read)
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        # offset -> path (str or Path), always in ascending offset order (so the newest is the last key).
        # ``snapshots`` lets a caller that already knows the dir's snapshot files (the loader, handing one listing
        # from one recovery-time manager to the next) skip the listing; the dict is used as is, not copied.
        self._snapshots: dict[int, Any] = self._load_snapshots() if snapshots is None else snapshots
        # Recovery-time managers share ``retired`` with the loader: a snapshot they drop is forgotten (offset ->
        # path) but left on disk, because recovery usually writes the same bytes to the same name right after;
        # ``take_snapshot`` then reuses the file and the loader unlinks whatever is left (``LogLoader._sweep_retired``).
        self._retired = retired
        self.last_map_offset = 0
        self.last_snap_offset = 0

    # ------------------------------------------------------------------ snapshot files

    def _load_snapshots(self) -> dict[int, Any]:
        found: dict[int, Any] = {}
        try:
            with os.scandir(self.log_dir) as it:
                for entry in it:
                    off = snapshot_offset(entry.name)
                    if off is not None and entry.is_file():
                        found[off] = entry.path  # str: Path objects per file add up (O(n^2))
        except FileNotFoundError:
            pass
        return dict(sorted(found.items()))

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    @property
    def snapshot_listing(self) -> dict[int, Any]:
        """The snapshot files this manager knows of (offset -> path, ascending); kept in step with the dir as
        long as nothing else adds or removes snapshot files. The loader passes it on to the next manager."""
        return self._snapshots

    @property
    def latest_snapshot_offset(self) -> int | None:
        return next(reversed(self._snapshots)) if self._snapshots else None  # keys are kept sorted

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return next(iter(self._snapshots)) if self._snapshots else None

    def snapshot_file_for_offset(self, offset: int) -> Path | None:
        path = self._snapshots.get(offset)
        return None if path is None else Path(path)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None and self._retired is not None:
            self._retired[offset] = path
        elif path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it ``.snapshot.deleted``; returns the new path."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        path = Path(path)
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            path.rename(target)
        except FileNotFoundError:
            return None  # already deleted by an intermediate (recovery) manager
        return target

    def delete_snapshots_before(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def delete_snapshots_after(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o > offset]:
            self._remove_and_delete_snapshot(off)

    def reset_snapshot_listing(self, snapshots: dict[int, Any]) -> None:
        """Take ``snapshots`` (offset -> path, ascending; used as is) as the dir's snapshot files: the loader
        hands over the listing it already has instead of this manager listing the dir again."""
        self._snapshots = snapshots

    def remove_stray_snapshots(
        self, segment_base_offsets: Iterable[int], *, snapshots: dict[int, Any] | None = None
    ) -> None:
        """Drop snapshots that match no segment, except the newest one past the last segment (clean close).

        The dir is listed again unless the caller knows its snapshot files (``snapshots``, ascending, taken over).
        """
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        if snapshots is None:
            snapshots = self._load_snapshots()
        strays = sorted(snapshots.keys() - bases)  # set operations, not a Python loop over every snapshot
        latest_stray = strays.pop() if strays else None
        for off in strays:
            _unlink_quiet(snapshots.pop(off))
        if latest_stray is not None and max_base is not None and latest_stray < max_base:
            _unlink_quiet(snapshots.pop(latest_stray))
        self._snapshots = snapshots

    def take_snapshot(self) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless a snapshot at or past that offset was already taken."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = self.log_dir / snapshot_file_name(self.last_map_offset)
        order = self._hash_order.order(self.producers)
        if self._write is write_snapshot:
            retired = None if self._retired is None else self._retired.pop(self.last_map_offset, None)
            write_snapshot(
                path, [self.producers[pid] for pid in order], sync=self.sync_snapshots, in_place=retired is not None
            )
        else:
            self._write(path, [self.producers[pid] for pid in order])
        snaps = self._snapshots
        newest = next(reversed(snaps)) if snaps else None
        snaps[self.last_map_offset] = path
        if newest is not None and self.last_map_offset < newest:
            self._snapshots = dict(sorted(snaps.items()))  # out of order (rare): restore ascending keys
        self.last_snap_offset = self.last_map_offset
        return path

    def update_parent_dir(self, new_dir: str | Path) -> None:
        self.log_dir = Path(new_dir)
        self._snapshots = {o: self.log_dir / Path(p).name for o, p in self._snapshots.items()}

    # ------------------------------------------------------------------ state

    @property
    def map_end_offset(self) -> int:
        return self.last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def is_empty(self) -> bool:
        return not self.producers and not self.unreplicated_txns

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def _add_producer(self, producer_id: int, entry: ProducerStateEntry) -> None:
        self.producers[producer_id] = entry
        self._hash_order.note_size(len(self.producers))

    def _clear_producers(self) -> None:
        self.producers.clear()  # a Java HashMap keeps its table size on clear(): so does _hash_order

    def _is_expired(self, now: int, entry: ProducerStateEntry) -> bool:
        return entry.current_txn_first_offset is None and now - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now: int | None = None) -> list[int]:
        now = self._clock() if now is None else now
        expired = [pid for pid, e in self.producers.items() if self._is_expired(now, e)]
        for pid in expired:
            del self.producers[pid]
        return expired

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self._add_producer(entry.producer_id, entry)
        if entry.current_txn_first_offset is not None:
            self.ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset
            )

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        """Load the newest readable snapshot; a corrupt one is deleted and the next older one tried."""
        while self._snapshots:
            offset = next(reversed(self._snapshots))
            path = Path(self._snapshots[offset])
            try:
                entries = self._read(path)
            except CorruptSnapshotError:
                self._remove_and_delete_snapshot(offset)
                continue
            for e in entries:
                if not self._is_expired(now, e):
                    self.load_producer_entry(e)
            self.last_snap_offset = offset
            self.last_map_offset = offset
            return
        self.last_snap_offset = log_start_offset
        self.last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now: int | None = None) -> None:
        """Drop snapshots outside (log start, log end] and, if needed, reload state from the newest left."""
        now = self._clock() if now is None else now
        # Keys are ascending: the doomed ones sit at both ends, so only those are visited (no O(n) pass per call,
        # which made recovering n segments O(n^2)).
        doomed = []
        for off in reversed(self._snapshots):
            if off <= log_end_offset:
                break
            doomed.append(off)
        for off in self._snapshots:
            if off > log_start_offset or off > log_end_offset:
                break
            doomed.append(off)
        for off in doomed:
            self._remove_and_delete_snapshot(off)
        if log_end_offset != self.last_map_offset:
            self._clear_producers()
            self.ongoing_txns.clear()
            self.unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear_producers()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated(log_start_offset)
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self.last_snap_offset = log_start_offset if latest is None else latest

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        for first, txn in list(self.unreplicated_txns.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self.unreplicated_txns[first]

    def prepare_update(self, producer_id: int, origin: AppendOrigin = AppendOrigin.REPLICATION) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        if info.producer_id == NO_PRODUCER_ID:
            raise InvalidArgumentError("invalid producer id -1 passed to update")
        updated = info.to_entry()
        current = self.producers.get(info.producer_id)
        if current is not None:
            current.update(updated)
        else:
            self._add_producer(info.producer_id, updated)
        for txn in info.started_transactions:
            self.ongoing_txns[txn.first_offset] = txn

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to store in the txn index entry for ``completed`` (Kafka: first other open txn, else end+1)."""
        for first in sorted(self.ongoing_txns):
            txn = self.ongoing_txns[first]
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise KafkaLogError(f"attempted to complete transaction {completed} which was not started")
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    @property
    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    @property
    def first_unstable_offset(self) -> int | None:
        candidates = [*self.ongoing_txns, *self.unreplicated_txns]
        return min(candidates) if candidates else None

    def apply_batch(self, batch: Any, origin: AppendOrigin = AppendOrigin.REPLICATION) -> tuple[CompletedTxn, int] | None:
        """Kafka's ``LogSegment.updateProducerState`` for one batch: returns (completed txn, its LSO) if one ended.

        The caller writes an aborted txn to the segment's ``.txnindex`` (with the returned LSO) before the
        transaction is marked complete here; that is why completion happens inside, after the LSO is computed.
        """
        result = None
        if batch.producer_id != NO_PRODUCER_ID:
            info = self.prepare_update(batch.producer_id, origin)
            completed = info.append(batch)
            self.update(info)
            if completed is not None:
                lso = self.last_stable_offset(completed)
                self.complete_txn(completed)
                result = (completed, lso)
        self.update_map_end_offset(batch.last_offset + 1)
        return result

    def recover_batch(self, batch: Any, segment: Any) -> None:
        """Hook for ``LogSegment.recover``: apply a batch and put an aborted txn into the segment's txn index."""
        done = self.apply_batch(batch)
        if done is not None and done[0].is_aborted:
            txn, lso = done
            segment.append_aborted_txn(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))

    def load_producers_from_batches(self, batches: Iterable[Any]) -> None:
        """Kafka's ``loadProducersFromRecords``: one append-info per producer over many batches, then commit."""
        pending: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if batch.producer_id == NO_PRODUCER_ID:
                continue
            info = pending.get(batch.producer_id)
            if info is None:
                info = pending[batch.producer_id] = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            done = info.append(batch)
            if done is not None:
                completed.append(done)
        for info in pending.values():
            self.update(info)
        for txn in completed:
            self.complete_txn(txn)


def _unlink_quiet(path: Any) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------------- snapshot file adapters


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read a ``.snapshot`` through ``kafkalog.log.producer_snapshot`` into state entries (CorruptSnapshotError)."""
    out = []
    for e in read_producer_snapshot(path):
        last_offset = e.last_offset
        ts = e.timestamp
        txn = e.current_txn_first_offset
        entry = ProducerStateEntry(e.producer_id, e.producer_epoch, e.coordinator_epoch, ts, txn if txn >= 0 else None)
        if last_offset >= 0:
            entry.batch_metadata.append(BatchMetadata(e.last_sequence, last_offset, e.offset_delta, ts))
        out.append(entry)
    return out


def write_snapshot(
    path: Path, entries: list[ProducerStateEntry], *, sync: bool = True, in_place: bool = False
) -> None:
    """Write entries (already in Kafka's order) through ``kafkalog.log.producer_snapshot``.

    ``in_place`` (recovery, over a retired file of the same name): :func:`kafkalog.io.rewrite.rewrite_in_place`,
    which leaves a file that already holds these bytes alone; no fsync, like every recovery-time snapshot.
    """
    rows = [
        ProducerSnapshotEntry(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in entries
    ]
    if in_place:
        rewrite_in_place(path, format_producer_snapshot(rows))
    else:
        write_producer_snapshot(path, rows, sync=sync)

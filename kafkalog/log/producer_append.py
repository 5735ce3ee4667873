"""One producer's state and how a batch changes it: Kafka's ``ProducerStateEntry``, ``BatchMetadata``,
``TxnMetadata``, ``CompletedTxn`` and ``ProducerAppendInfo`` (epoch, sequence and transaction validation of an
append, by origin). ``ProducerStateManager`` (``producer_state.py``) keeps these per partition and decides what
goes into snapshots.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkalog.errors import (
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionCoordinatorFencedError,
)
from kafkalog.limits import INT_MAX as INT32_MAX
from kafkalog.limits import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NUM_BATCHES_TO_RETAIN,
)


class AppendOrigin(enum.Enum):
    """Where an append comes from: how much validation it gets (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"  # full epoch + sequence validation
    COORDINATOR = "coordinator"  # epoch validation only
    REPLICATION = "replication"  # trusted: already validated by the leader


def _decrement_sequence(seq: int, delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence`` (sequences wrap at Integer.MAX_VALUE)."""
    if seq < delta:
        return INT32_MAX - (delta - seq) + 1
    return seq - delta


@dataclass(slots=True)
class BatchMetadata:
    """What is remembered about one of a producer's recent batches (for duplicate detection)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """Kafka's ``ProducerStateEntry``: epoch, coordinator epoch, open txn and up to 5 recent batches."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        return cls(producer_id)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def with_producer_id(self, producer_id: int) -> ProducerStateEntry:
        """A copy without batch metadata: what a ``ProducerAppendInfo`` starts accumulating into."""
        return ProducerStateEntry(
            producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Merge the state accumulated by an append into this (stored) entry."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        for b in other.batch_metadata:
            self._add_batch_metadata(b)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def end_txn(self, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, producer_epoch: int, base_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for b in self.batch_metadata:
            if b.first_seq == base_seq and b.last_seq == last_seq:
                return b
        return None


@dataclass(slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


class CompletedTxn(NamedTuple):
    """A transaction ended by a control batch at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """Validates and accumulates one producer's batches of one append before they reach the state map."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.current_entry = current
        self.origin = origin
        self.updated_entry = current.with_producer_id(producer_id)
        self.started_transactions: list[TxnMetadata] = []

    # -- validation (Kafka: checkProducerEpoch / checkSequence)
    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated_entry.producer_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerFencedError(
                f"epoch of producer {self.producer_id} at offset {offset} is {epoch}, "
                f"older than the last seen epoch {self.updated_entry.producer_epoch}"
            )

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        upd, cur = self.updated_entry, self.current_entry
        if epoch != upd.producer_epoch:
            if first_seq != 0 and upd.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence {first_seq} for new epoch {epoch} of producer {self.producer_id} at {offset}"
                )
            return
        if not upd.is_empty:
            last = upd.last_seq
        elif epoch == cur.producer_epoch:
            last = cur.last_seq
        else:
            last = NO_SEQUENCE
        in_seq = first_seq == last + 1 or (first_seq == 0 and last == INT32_MAX)
        if not (cur.producer_epoch == NO_PRODUCER_EPOCH or in_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence {first_seq} for producer {self.producer_id} at {offset} "
                f"(last sequence {last})"
            )

    def append_data_batch(
        self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int, first_offset: int,
        last_offset: int, is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated_entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        txn = self.updated_entry.current_txn_first_offset
        if txn is not None and not is_transactional:
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(
                    f"expected a transactional write from producer {self.producer_id} at offset {first_offset}"
                )
            # Kafka throws here on every path; a follower cannot refuse what the leader wrote, so keep going.
        elif txn is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, is_commit: bool, coordinator_epoch: int, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        self._check_producer_epoch(epoch, offset)
        if self.updated_entry.coordinator_epoch > coordinator_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"coordinator epoch {coordinator_epoch} of producer {self.producer_id} at {offset} is older than "
                f"{self.updated_entry.coordinator_epoch}"
            )
        first = self.updated_entry.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset, not is_commit)
        self.updated_entry.end_txn(epoch, coordinator_epoch, timestamp)
        return completed

    def append(self, batch: Any) -> CompletedTxn | None:
        """Fold one batch (a ``RecordBatch``) into this producer's pending state."""
        if batch.is_control:
            marker = _control_marker(batch)
            if marker is None:
                return None  # an empty control batch: its transaction was cleaned away
            is_commit, coordinator_epoch, timestamp = marker
            return self.append_end_txn_marker(
                is_commit, coordinator_epoch, batch.producer_epoch, batch.base_offset, timestamp
            )
        self.append_data_batch(
            batch.producer_epoch, batch.base_sequence, _last_sequence(batch), batch.max_timestamp,
            batch.base_offset, batch.last_offset, batch.is_transactional,
        )
        return None

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry


def _last_sequence(batch: Any) -> int:
    seq = getattr(batch, "last_sequence", None)
    if seq is not None:
        return int(seq)
    base = batch.base_sequence
    if base == NO_SEQUENCE:
        return NO_SEQUENCE
    delta = batch.last_offset - batch.base_offset
    return (base + delta) % (INT32_MAX + 1) if base + delta > INT32_MAX else base + delta


def _control_marker(batch: Any) -> tuple[bool, int, int] | None:
    """(is_commit, coordinator_epoch, record timestamp) of a control batch; None when it holds no txn marker."""
    records = batch.records()
    if not records:
        return None  # an empty control batch: the cleaner removed its transaction
    marker = batch.control_marker()
    if marker is None:
        return None  # another control type (e.g. leader change): no producer-state effect
    return marker.is_commit, int(marker.coordinator_epoch), records[0].timestamp

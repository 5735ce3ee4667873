"""The state the group and transaction coordinators load from ``__consumer_offsets`` and ``__transaction_state``.

Both replay every segment in offset order, as a coordinator does when it becomes leader of the partition: the last
record of a key wins and a tombstone removes it. Offset commits written inside a transaction are held per producer
until its marker: a COMMIT applies them (unless a later plain commit of the same partition was already applied,
as ``OffsetMetadataManager`` keeps the most recent record), an ABORT drops them, and a transaction still open at
the end of the log applies nothing. Replay stops at the first unreadable batch (recovery would cut the log there).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import InvalidRecordError, KafkaLogError, MessageDecodeError
from ..records import read_batches
from ..records.control import ControlRecordType, parse_control_type
from .decode import decode_group_record, decode_txn_record
from .snapshot import list_segments

__all__ = ["consumer_offsets", "transaction_states", "TransactionState"]

_OFFSET_COMMIT_TYPES = (0, 1)


def _records(partition_dir: str | os.PathLike) -> Iterator[tuple[object, object]]:
    """(batch, record) of every readable batch of every segment, in offset order."""
    for _, path in list_segments(partition_dir):
        reader = read_batches(path, populate=False)
        for batch in reader:
            if not batch.is_valid():
                return
            try:
                records = batch.records()
            except KafkaLogError:
                return
            for record in records:
                yield batch, record
        if reader.invalid_bytes:
            return


def consumer_offsets(partition_dir: str | os.PathLike) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed offsets ``{group: {(topic, partition): offset}}`` at the end of the log."""
    committed: dict[tuple[str, str, int], tuple[int, int]] = {}  # (group, topic, partition) -> (offset, record offset)
    pending: dict[int, dict[tuple[str, str, int], tuple[int, int] | None]] = {}
    for batch, record in _records(partition_dir):
        if batch.is_control:  # type: ignore[attr-defined]
            try:
                ctype = parse_control_type(record.key)  # type: ignore[attr-defined]
            except InvalidRecordError:
                continue
            if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                txn = pending.pop(batch.producer_id, {})  # type: ignore[attr-defined]
                if ctype == ControlRecordType.COMMIT:
                    for key, entry in txn.items():
                        current = committed.get(key)
                        if entry is None:
                            committed.pop(key, None)
                        elif current is None or entry[1] > current[1]:
                            committed[key] = entry
            continue
        try:
            decoded = decode_group_record(record.key, record.value)  # type: ignore[attr-defined]
        except MessageDecodeError:
            continue
        if decoded.record_type not in _OFFSET_COMMIT_TYPES:
            continue
        k = decoded.key
        key = (k["group"], k["topic"], k["partition"])
        entry = None if decoded.value is None else (decoded.value["offset"], record.offset)  # type: ignore[attr-defined]
        if batch.is_transactional:  # type: ignore[attr-defined]
            pending.setdefault(batch.producer_id, {})[key] = entry  # type: ignore[attr-defined]
        elif entry is None:  # a plain tombstone also drops the partition's pending transactional commits
            committed.pop(key, None)
            for txn in pending.values():
                txn.pop(key, None)
        else:
            committed[key] = entry
    out: dict[str, dict[tuple[str, int], int]] = {}
    for (group, topic, partition), (offset, _) in sorted(committed.items()):
        out.setdefault(group, {})[(topic, partition)] = offset
    return out


@dataclass(frozen=True)
class TransactionState:
    """A transactional id's last record in ``__transaction_state``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: tuple[tuple[str, int], ...]
    timeout_ms: int
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def transaction_states(partition_dir: str | os.PathLike) -> dict[str, TransactionState]:
    """``{transactional id: TransactionState}`` at the end of the log (expired ids' tombstones applied)."""
    states: dict[str, TransactionState] = {}
    for batch, record in _records(partition_dir):
        if batch.is_control:  # type: ignore[attr-defined]
            continue
        try:
            decoded = decode_txn_record(record.key, record.value)  # type: ignore[attr-defined]
        except MessageDecodeError:
            continue
        if decoded.transactional_id is None:
            continue
        v = decoded.value
        if v is None:
            states.pop(decoded.transactional_id, None)
            continue
        states[decoded.transactional_id] = TransactionState(
            decoded.transactional_id, v["producerId"], v["producerEpoch"], decoded.state or "",
            tuple(decoded.partitions), v["transactionTimeoutMs"], v["transactionLastUpdateTimestampMs"],
            v["transactionStartTimestampMs"], v.get("previousProducerId", -1), v.get("nextProducerId", -1),
            v.get("clientTransactionVersion", 0),
        )
    return states

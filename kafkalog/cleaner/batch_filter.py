"""What a cleaning pass keeps of each batch and how it writes it (Kafka's ``MemoryRecords.filterTo`` with the
cleaner's ``RecordFilter``).

A batch is dropped whole, kept whole (its bytes copied as they are, when every record stays and no delete horizon
has to be written), rebuilt from the records that stay (same codec, magic, producer fields, partition leader
epoch and last offset; a KIP-534 delete horizon in its base timestamp when it holds a tombstone or the marker of
an emptied transaction) or, for a producer's last batch and the last batch of the pass, kept as an empty header.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import CleanerError
from kafkalog.records.batch import RECORD_BATCH_OVERHEAD, build_batch, build_empty_batch
from kafkalog.records.legacy import build_legacy_batch
from kafkalog.records.record import Record, TimestampType

from .offset_map import OffsetMap
from .txn_metadata import CleanedTransactionMetadata

__all__ = ["BatchRetention", "CleanerFilter", "CleanerStats", "FilterResult", "LastRecord", "filter_batches",
           "rebuild_batch"]


class BatchRetention(enum.Enum):
    DELETE = 0  # the whole batch goes
    DELETE_EMPTY = 1  # goes if no record stays
    RETAIN_EMPTY = 2  # stays, as an empty header if no record does


@dataclass(frozen=True)
class LastRecord:
    """A producer's last data offset (None: its last entry is a marker) and epoch (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass
class CleanerStats:
    """Kafka's ``CleanerStats`` counters (``invalid_messages_read``: keyless records, dropped)."""

    map_messages_read: int = 0
    map_bytes_read: int = 0
    messages_read: int = 0
    bytes_read: int = 0
    messages_written: int = 0
    bytes_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"mapMessagesRead": self.map_messages_read, "mapBytesRead": self.map_bytes_read,
                "messagesRead": self.messages_read, "bytesRead": self.bytes_read,
                "messagesWritten": self.messages_written, "bytesWritten": self.bytes_written,
                "invalidMessagesRead": self.invalid_messages_read, "bufferUtilization": self.buffer_utilization}


@dataclass
class FilterResult:
    """One chunk's output and counters (Kafka's ``FilterResult``)."""

    output: bytearray = field(default_factory=bytearray)
    bytes_read: int = 0
    messages_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    max_offset: int = -1
    max_timestamp: int = -1

    def _retained(self, max_timestamp: int, max_offset: int, messages: int, size: int) -> None:
        self.messages_retained += messages
        self.bytes_retained += size
        self.max_offset = max(self.max_offset, max_offset)
        self.max_timestamp = max(self.max_timestamp, max_timestamp)


class CleanerFilter:
    """The cleaner's decisions for one source segment (Kafka's ``logCleanerFilter`` in ``cleanInto``)."""

    def __init__(self, offset_map: OffsetMap, *, retain_legacy_deletes: bool, txn: CleanedTransactionMetadata,
                 last_records: Mapping[int, LastRecord], upper_bound_offset: int, stats: CleanerStats,
                 now_ms: int, delete_retention_ms: int) -> None:
        self.map = offset_map
        self.retain_legacy_deletes = retain_legacy_deletes
        self.txn = txn
        self.last_records = last_records
        self.upper_bound_offset = upper_bound_offset
        self.stats = stats
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self._discard_records = False

    def check_batch(self, batch: Any) -> tuple[BatchRetention, bool]:
        """(retention, whether the batch is the marker of a transaction with nothing left)."""
        is_control = batch.magic >= 2 and batch.is_control
        if is_control:
            can_discard = self.txn.on_control_batch_read(batch)
            horizon = batch.delete_horizon_ms
            self._discard_records = can_discard and horizon is not None and horizon <= self.now_ms
        else:
            can_discard = self.txn.on_batch_read(batch)
            self._discard_records = can_discard
        if batch.magic >= 2 and batch.has_producer_id and self._is_last_of_producer(batch, is_control):
            retention = BatchRetention.RETAIN_EMPTY
        elif batch.next_offset == self.upper_bound_offset:
            retention = BatchRetention.RETAIN_EMPTY  # keeps the pass's last offset in the log
        elif self._discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return retention, can_discard and is_control

    def _is_last_of_producer(self, batch: Any, is_control: bool) -> bool:
        last = self.last_records.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return is_control and batch.producer_epoch == last.producer_epoch

    def keep_record(self, batch: Any, record: Record) -> bool:
        if self._discard_records:
            return False
        if batch.magic >= 2 and batch.is_control:
            return True
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages_read += 1
            return False
        latest = record.offset >= self.map.get(record.key)
        if batch.magic >= 2:
            horizon = batch.delete_horizon_ms
            keep_deletes = horizon is None or self.now_ms < horizon
        else:
            keep_deletes = self.retain_legacy_deletes
        return latest and (record.value is not None or keep_deletes)


def _records_of(batch: Any) -> tuple[list[Record], bool]:
    """The batch's records and whether each has the batch's magic (KAFKA-4298: a wrapper whose inner messages
    have another magic is rewritten)."""
    if batch.magic >= 2:
        return batch.records(), True
    messages = batch.messages()
    return [m.to_record() for m in messages], all(m.magic == batch.magic for m in messages)


def rebuild_batch(batch: Any, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch re-written with only ``records`` (Kafka's ``buildRetainedRecordsInto``)."""
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    if batch.magic >= 2:
        return build_batch(
            records, base_offset=batch.base_offset, compression=batch.compression,
            timestamp_type=batch.timestamp_type, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, partition_leader_epoch=batch.partition_leader_epoch,
            is_transactional=batch.is_transactional, is_control=batch.is_control,
            log_append_time=batch.max_timestamp if log_append else None, delete_horizon_ms=delete_horizon_ms,
            last_offset=batch.last_offset,
        )
    return build_legacy_batch(records, magic=batch.magic, compression=batch.compression,
                              timestamp_type=batch.timestamp_type,
                              log_append_time=batch.max_timestamp if log_append else None)


def filter_batches(chunk: memoryview, batches: Iterable[Any], flt: CleanerFilter) -> FilterResult:
    """Filter the whole batches of one read chunk into a new buffer (``batch.position`` is relative to it)."""
    result = FilterResult()
    out = result.output
    for batch in batches:
        retention, marker_of_empty_txn = flt.check_batch(batch)
        result.bytes_read += batch.size_in_bytes
        if retention is BatchRetention.DELETE:
            continue
        records, same_magic = _records_of(batch)
        kept: list[Record] = []
        write_original = same_magic
        tombstones = False
        max_offset = -1
        for record in records:
            result.messages_read += 1
            if flt.keep_record(batch, record):
                kept.append(record)
                max_offset = max(max_offset, record.offset)
                if record.value is None:
                    tombstones = True
            else:
                write_original = False
        if kept:
            horizon = batch.delete_horizon_ms if batch.magic >= 2 else None
            set_horizon = batch.magic >= 2 and (tombstones or marker_of_empty_txn) and horizon is None
            if write_original and not set_horizon:
                start = batch.position
                out += chunk[start:start + batch.size_in_bytes]
                result._retained(batch.max_timestamp, batch.last_offset, len(kept), batch.size_in_bytes)
            else:
                if set_horizon:
                    horizon = flt.now_ms + flt.delete_retention_ms
                data = rebuild_batch(batch, kept, horizon)
                out += data
                result._retained(_max_timestamp(batch, kept), max_offset, len(kept), len(data))
        elif retention is BatchRetention.RETAIN_EMPTY:
            if batch.magic < 2:
                raise CleanerError("empty batches are only supported for magic v2 and above")
            out += build_empty_batch(
                base_offset=batch.base_offset, last_offset=batch.last_offset, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                partition_leader_epoch=batch.partition_leader_epoch, timestamp_type=batch.timestamp_type,
                max_timestamp=batch.max_timestamp, is_transactional=batch.is_transactional,
                is_control=batch.is_control,
            )
            result._retained(batch.max_timestamp, batch.last_offset, 0, RECORD_BATCH_OVERHEAD)
    return result


def _max_timestamp(batch: Any, kept: list[Record]) -> int:
    if batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return batch.max_timestamp
    return max(r.timestamp for r in kept)

"""Appends to a Log: ``LogAppendInfo`` and the ``LogAppend`` mixin of ``Log`` (leader and follower appends,
offset assignment in place, producer state, rolls)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kafkalog.errors import CorruptRecordError, InvalidOffsetError, InvalidRecordError, KafkaStorageError
from kafkalog.index.txn_index import AbortedTxn
from kafkalog.limits import INT_MAX as _I32_MAX
from kafkalog.log.producer_state import AppendOrigin, CompletedTxn
from kafkalog.log.storage_hooks import storage_op
from kafkalog.names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, file_name
from kafkalog.records import CompressionType, Record, RecordBatch, TimestampType, build_batch, read_batches
from kafkalog.records.batch_patch import set_base_offset, set_max_timestamp, set_partition_leader_epoch
from kafkalog.segment.log_segment import LogSegment


@dataclass
class LogAppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``). ``duplicate`` marks an idempotent retry that was not
    written again (offsets are those of the original batch)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int = -1
    log_start_offset: int = 0
    valid_bytes: int = 0
    shallow_count: int = 0
    record_count: int = 0
    last_leader_epoch: int = -1
    compression: CompressionType = CompressionType.NONE
    rolled: bool = False
    duplicate: bool = False
    batches: list[RecordBatch] = field(default_factory=list, repr=False)



class LogAppend:
    """The append half of ``Log`` (Kafka's ``UnifiedLog.append`` + ``LocalLog.roll``): validation, offset
    assignment, producer-state updates, index entries and rolls. A mixin: the state it reads (``_lock``,
    ``_segments``, ``_psm``, ``_config``...) is set by ``Log._init``."""

    # ------------------------------------------------------------------ append

    @storage_op("append")
    def append_as_leader(
        self,
        records: Iterable[Any] | bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        compression: CompressionType | int = CompressionType.NONE,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        timestamp: int | None = None,
    ) -> LogAppendInfo:
        """Append as the leader: offsets assigned from the log end, ``partitionLeaderEpoch`` set, LogAppendTime
        stamped when the topic uses it, producer state validated (duplicates of one of a producer's last 5
        batches are answered with the original offsets and not written again).

        ``records`` are ``Record`` objects / ``(key, value[, headers])`` tuples (one batch is built), or bytes
        of client-built magic-2 batches (rewritten in place as Kafka's validator does for v2).
        """
        with self._lock:
            self._check_open()
            now = self._clock()
            log_append = now if self._config.is_log_append_time else None
            ts_type = TimestampType.LOG_APPEND_TIME if log_append is not None else TimestampType.CREATE_TIME
            if isinstance(records, (bytes, bytearray, memoryview)):
                data = self._assign_offsets_in_place(bytes(records), leader_epoch, log_append)
            else:
                recs = list(records)
                if not recs:
                    raise InvalidRecordError("append of zero records")
                data = build_batch(
                    _renumber(recs, self._log_end_offset), base_offset=self._log_end_offset, compression=compression,
                    timestamp_type=ts_type, producer_id=producer_id, producer_epoch=producer_epoch,
                    base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
                    is_transactional=is_transactional, log_append_time=log_append,
                    timestamp=now if timestamp is None else timestamp,
                )
            return self._append(data, origin=AppendOrigin.CLIENT, log_append_time=log_append if log_append else -1)

    @storage_op("append")
    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches replicated from a leader: offsets, epochs and timestamps are kept as they are.

        Offsets must increase and the first must be >= the log end offset (InvalidOffsetError); a bad CRC or
        trailing partial batch raises CorruptRecordError. Rolls and indexes exactly as Kafka's follower path.
        """
        with self._lock:
            self._check_open()
            return self._append(bytes(batch_bytes), origin=AppendOrigin.REPLICATION, log_append_time=-1)

    def _assign_offsets_in_place(self, data: bytes, leader_epoch: int, log_append: int | None) -> bytes:
        """Kafka's in-place v2 validation path: set base offset, leader epoch (and LogAppendTime), fix CRCs."""
        out = bytearray(data)
        offset = self._log_end_offset
        reader = read_batches(out)
        batches = list(reader)
        if reader.invalid_bytes or not batches:
            raise CorruptRecordError("client batches are truncated or malformed", position=reader.valid_bytes)
        for batch in batches:
            if batch.magic != 2:
                raise InvalidRecordError("append_as_leader takes magic 2 batches only")
            if not batch.is_valid():
                raise CorruptRecordError("client batch has a bad CRC", position=batch.position)
            pos = batch.position
            set_base_offset(out, pos, offset)
            set_partition_leader_epoch(out, pos, leader_epoch)  # neither field is covered by the CRC
            if log_append is not None:
                set_max_timestamp(out, pos, batch.size_in_bytes, TimestampType.LOG_APPEND_TIME, log_append)
            offset += batch.last_offset - batch.base_offset + 1
        return bytes(out)

    def _analyze(self, data: bytes, origin: AppendOrigin) -> LogAppendInfo:
        reader = read_batches(data)
        batches = list(reader)
        if reader.invalid_bytes:
            raise CorruptRecordError(
                f"{reader.invalid_bytes} bytes after the last whole batch", position=reader.valid_bytes
            )
        if not batches:
            raise InvalidRecordError("append of zero batches")
        first = batches[0]
        info = LogAppendInfo(
            first_offset=first.base_offset, last_offset=-1, max_timestamp=-1, offset_of_max_timestamp=-1,
            log_start_offset=self._log_start_offset,
        )
        last = -1
        monotonic = True
        for batch in batches:
            if batch.last_offset <= last:
                monotonic = False
            last = batch.last_offset
            info.last_leader_epoch = batch.partition_leader_epoch
            if batch.size_in_bytes > self._config.max_message_bytes and origin is AppendOrigin.CLIENT:
                raise InvalidRecordError(
                    f"batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {self._config.max_message_bytes}"
                )
            if not batch.is_valid():
                raise CorruptRecordError("batch fails its CRC check", position=batch.position)
            if batch.last_offset < batch.base_offset:
                raise InvalidRecordError(f"batch at {batch.position}: last offset before base offset")
            if batch.max_timestamp > info.max_timestamp:
                info.max_timestamp = batch.max_timestamp
                info.offset_of_max_timestamp = last
            info.valid_bytes += batch.size_in_bytes
            info.shallow_count += 1
            info.record_count += batch.record_count
            if batch.compression != CompressionType.NONE:
                info.compression = batch.compression
        if not monotonic:
            raise InvalidOffsetError(f"out of order offsets in append: {[b.base_offset for b in batches]}")
        info.last_offset = last
        info.batches = batches
        return info

    def _append(self, data: bytes, *, origin: AppendOrigin, log_append_time: int) -> LogAppendInfo:
        info = self._analyze(data, origin)
        info.log_append_time = log_append_time
        if info.first_offset < self._log_end_offset:
            raise InvalidOffsetError(
                f"first offset {info.first_offset} of the append is below the log end offset {self._log_end_offset}"
            )
        # Leader epochs (Kafka: maybeAssignEpochStartOffset per v2 batch; older magic clears the cache).
        for batch in info.batches:
            if batch.magic >= 2:
                if batch.partition_leader_epoch >= 0:
                    self._epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            elif self._epoch_cache.non_empty():
                self._epoch_cache.clear_and_flush()

        segment, info.rolled = self._maybe_roll(len(data), info)

        # Producer state: validate and collect, then write, then commit (Kafka's order).
        pending: dict[int, Any] = {}
        completed: list[CompletedTxn] = []
        for batch in info.batches:
            if not batch.has_producer_id:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self._psm.last_entry(batch.producer_id)
                dup = None if entry is None else entry.find_duplicate_batch(
                    batch.producer_epoch, batch.base_sequence, batch.last_sequence
                )
                if dup is not None:
                    info.first_offset, info.last_offset = dup.first_offset, dup.last_offset
                    info.max_timestamp, info.offset_of_max_timestamp = dup.timestamp, dup.last_offset
                    info.duplicate = True
                    info.batches = []
                    return info
            app = pending.get(batch.producer_id)
            if app is None:
                app = pending[batch.producer_id] = self._psm.prepare_update(batch.producer_id, origin)
            done = app.append(batch)
            if done is not None:
                completed.append(done)

        segment.append(data)
        self._log_end_offset = info.last_offset + 1

        for app in pending.values():
            self._psm.update(app)
        for txn in completed:
            lso = self._psm.last_stable_offset(txn)
            if txn.is_aborted:
                segment.append_aborted_txn(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            self._psm.complete_txn(txn)
        self._psm.update_map_end_offset(info.last_offset + 1)
        if self._high_watermark is None:
            self._psm.on_high_watermark_updated(self._log_end_offset)
        if self._unflushed_messages() >= self._config.flush_messages:
            self.flush()
        return info

    def _unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    # ------------------------------------------------------------------ roll

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo) -> tuple[LogSegment, bool]:
        seg = self.active_segment
        now = self._clock()
        if seg.should_roll(
            max_segment_bytes=self._config.segment_bytes, max_segment_ms=self._config.max_segment_ms(),
            messages_size=messages_size, max_timestamp_in_messages=info.max_timestamp,
            max_offset_in_messages=info.last_offset, now_ms=now,
        ):
            roll_offset = info.first_offset if info.first_offset >= 0 else info.last_offset - _I32_MAX
            return self._roll(roll_offset), True
        return seg, False

    @storage_op("roll")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, log end offset) and snapshot the producer state there."""
        with self._lock:
            self._check_open()
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self.active_segment
        if new_offset in self._segments:
            if active.base_offset == new_offset and active.size == 0:
                # KAFKA-6388: an empty active segment whose index is "full": replace it in place.
                self._segments.remove(new_offset)
                active.delete()
                seg = self._new_segment(new_offset)
            else:
                raise KafkaStorageError(f"segment at {new_offset} already exists in {self._dir}")
        elif new_offset < active.base_offset:
            raise KafkaStorageError(f"cannot roll to {new_offset}: below the active segment {active.base_offset}")
        else:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                p = file_name(self._dir, new_offset, suffix)
                if p.exists():
                    p.unlink()
            active.on_becoming_inactive()
            seg = self._new_segment(new_offset)
        self._psm.update_map_end_offset(new_offset)
        self._psm.take_snapshot()
        return seg

    def _new_segment(self, base: int) -> LogSegment:
        seg = LogSegment.open(self._dir, base, config=self._config, clock=self._clock, handles=self._handles)
        self._segments.add(seg)
        return seg


def _renumber(records: list[Any], base: int) -> list[Any]:
    """Leader appends number records from the log end: Record objects get offsets base, base+1, ... (their
    own offsets are the producer's business), tuples pass through (build_batch numbers them)."""
    out = []
    for i, r in enumerate(records):
        out.append(replace(r, offset=base + i) if isinstance(r, Record) else r)
    return out

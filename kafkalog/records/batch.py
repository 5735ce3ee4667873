"""Magic 2 record batches (Kafka's DefaultRecordBatch): a lazy view and a byte-exact writer.

A ``RecordBatch`` wraps a memoryview of exactly one batch; the 61-byte header is decoded by a single
``struct.unpack_from`` and the records are only decoded (and decompressed) by ``records()``, so shallow scans of a
segment cost one unpack per batch. The records inside a batch (Kafka's DefaultRecord) are ``record_codec``'s.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence

from crc32c import crc32c

from ..errors import CorruptRecordError, InvalidRecordError, KafkaLogError
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType, compress, decompress
from .control import ControlRecordType, EndTransactionMarker, parse_control_type
from .record import Record, TimestampType
from .record_codec import decode_records, encode_record, increment_sequence

__all__ = [
    "RecordBatch",
    "assemble_batch",
    "build_batch",
    "build_empty_batch",
    "build_end_txn_marker_batch",
    "HEADER",
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
]

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
#: maxTimestamp, producerId, producerEpoch, baseSequence, recordCount.
HEADER = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + length
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
_CRC = struct.Struct(">I")
_INT_MAX = (1 << 31) - 1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40

_CODECS = tuple(CompressionType) + (None, None, None)
_TS_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)


class RecordBatch:
    """A magic 2 batch over ``raw`` (a memoryview of exactly ``size_in_bytes`` bytes)."""

    __slots__ = ("raw", "position", "_h")

    magic = 2

    def __init__(self, raw: memoryview | bytes | bytearray, position: int | None = None) -> None:
        if not isinstance(raw, memoryview):
            raw = memoryview(raw)
        if len(raw) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch of {len(raw)} bytes is shorter than the {RECORD_BATCH_OVERHEAD}-byte header",
                position=position,
            )
        h = HEADER.unpack_from(raw, 0)
        if h[1] + LOG_OVERHEAD != len(raw):
            raise CorruptRecordError(
                f"batch length field {h[1]} does not match the {len(raw)} bytes given", position=position
            )
        self.raw = raw
        self.position = position
        self._h = h

    @classmethod
    def _from_header(cls, raw: memoryview, position: int | None, h: tuple) -> RecordBatch:
        """Fast constructor for the reader, which has already unpacked and checked the header."""
        b = object.__new__(cls)
        b.raw = raw
        b.position = position
        b._h = h
        return b

    # --- header fields ---------------------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        """The offset of the batch's first record."""
        return self._h[0]

    @property
    def size_in_bytes(self) -> int:
        """The whole batch on disk, the 12-byte offset/length prefix included."""
        return self._h[1] + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        """The leader epoch the batch was appended in (the leader-epoch cache is built from it)."""
        return self._h[2]

    @property
    def crc(self) -> int:
        """The stored CRC32C (over attributes to the end); ``is_valid()`` compares it with the bytes."""
        return self._h[4]

    @property
    def attributes(self) -> int:
        """The raw attribute bits: compression, timestamp type, transactional, control, delete horizon."""
        return self._h[5]

    @property
    def last_offset_delta(self) -> int:
        """``last_offset - base_offset``: compaction keeps it when it removes the last records."""
        return self._h[6]

    @property
    def last_offset(self) -> int:
        """The offset of the batch's last record (before compaction), which indexes point at."""
        return self._h[0] + self._h[6]

    @property
    def next_offset(self) -> int:
        """``last_offset + 1``: the log end offset after this batch."""
        return self._h[0] + self._h[6] + 1

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (or the delete horizon when ``has_delete_horizon``)."""
        return self._h[7]

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp (the append time under LogAppendTime); the time index uses it."""
        return self._h[8]

    @property
    def producer_id(self) -> int:
        """The idempotent/transactional producer's id, -1 for a plain producer."""
        return self._h[9]

    @property
    def producer_epoch(self) -> int:
        """The producer's epoch, -1 for a plain producer; a newer epoch fences older ones."""
        return self._h[10]

    @property
    def base_sequence(self) -> int:
        """The first record's sequence number, -1 for a plain producer."""
        return self._h[11]

    @property
    def last_sequence(self) -> int:
        """The last record's sequence number (wrapping at 2^31-1 as Kafka does), -1 for none."""
        base = self._h[11]
        return -1 if base == -1 else increment_sequence(base, self._h[6])

    @property
    def record_count(self) -> int:
        """How many records the batch holds (after compaction, possibly fewer than the offset span)."""
        return self._h[12]

    @property
    def count(self) -> int:
        """``record_count`` under the name Kafka's DumpLogSegments prints."""
        return self._h[12]

    @property
    def compression(self) -> CompressionType:
        """The codec the records are compressed with (``CompressionType``)."""
        codec = _CODECS[self._h[5] & _COMPRESSION_MASK]
        if codec is None:
            return CompressionType.from_id(self._h[5] & _COMPRESSION_MASK)  # raises
        return codec

    @property
    def timestamp_type(self) -> TimestampType:
        """CreateTime (the producer's clock) or LogAppendTime (the broker's)."""
        return _TS_TYPES[(self._h[5] & _TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self) -> bool:
        """True for a batch written inside a transaction."""
        return bool(self._h[5] & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """True for a control batch (a transaction COMMIT/ABORT marker, KRaft control records)."""
        return bool(self._h[5] & _CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """True when the cleaner set ``base_timestamp`` to the KIP-534 delete horizon."""
        return bool(self._h[5] & _DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The cleaner's delete horizon (stored in baseTimestamp when attribute bit 6 is set), else None."""
        return self._h[7] if self._h[5] & _DELETE_HORIZON_MASK else None

    @property
    def offset_of_max_timestamp(self) -> int:
        """Kafka uses the batch's last offset for v2 batches (time index entries)."""
        return self._h[0] + self._h[6]

    @property
    def has_producer_id(self) -> bool:
        """True for an idempotent or transactional producer's batch."""
        return self._h[9] >= 0

    # --- integrity -------------------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        """CRC32C over attributes .. end of batch, as Kafka."""
        return crc32c(self.raw[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        """True when the size is sane and the stored CRC matches (Kafka's DefaultRecordBatch.isValid)."""
        return crc32c(self.raw[ATTRIBUTES_OFFSET:]) == self._h[4]

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError when the CRC does not match, like Kafka's ensureValid."""
        computed = crc32c(self.raw[ATTRIBUTES_OFFSET:])
        if computed != self._h[4]:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self._h[4]}, computed crc = {computed})",
                position=self.position,
            )
        if self._h[12] < 0:
            raise CorruptRecordError(f"negative record count {self._h[12]}", position=self.position)

    # --- records ---------------------------------------------------------------------------------------------
    def records_payload(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes | memoryview:
        """The records section, decompressed when the batch is compressed."""
        codec = self._h[5] & _COMPRESSION_MASK
        body = self.raw[RECORD_BATCH_OVERHEAD:]
        if codec == 0:
            return body
        try:
            return decompress(self.compression, body, max_size=max_size)
        except CorruptRecordError as exc:
            raise CorruptRecordError(str(exc), position=self.position) from None

    def records(self, *, stored_timestamps: bool = False, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[Record]:
        """Decode every record (absolute offsets, effective timestamps); CorruptRecordError on a bad payload.

        For LogAppendTime batches Kafka reports the batch's max timestamp for every record; with
        ``stored_timestamps=True`` the timestamps written in the records (base + delta) are returned instead,
        which is what a rewrite needs to reproduce the bytes.
        """
        count = self._h[12]
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", position=self.position)
        return self.records_from(self.records_payload(max_size=max_size), stored_timestamps=stored_timestamps)

    def records_from(self, payload: bytes | memoryview, *, stored_timestamps: bool = False) -> list[Record]:
        """``records()`` from this batch's records section already decompressed (``records_payload()``), so a
        caller that holds it does not decompress it again."""
        h = self._h
        if h[12] < 0:
            raise CorruptRecordError(f"negative record count {h[12]}", position=self.position)
        log_append = None
        if (h[5] & _TIMESTAMP_TYPE_MASK) and not stored_timestamps:
            log_append = h[8]
        try:
            return decode_records(payload, h[12], h[0], h[7], h[11], log_append)
        except CorruptRecordError as exc:
            raise CorruptRecordError(str(exc), position=self.position) from None

    def __iter__(self):
        return iter(self.records())

    def control_marker(self) -> EndTransactionMarker | None:
        """The end-transaction marker of a control batch (None for data batches and other control types)."""
        if not self._h[5] & _CONTROL_MASK:
            return None
        recs = self.records()
        if len(recs) != 1:
            raise InvalidRecordError(f"control batch must hold exactly one record, found {len(recs)}")
        ctype = parse_control_type(recs[0].key)
        if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        return EndTransactionMarker.from_key_value(recs[0].key, recs[0].value)

    def __repr__(self) -> str:
        # never raises (loggers, debuggers): an unknown codec id is shown as its number
        codec_id = self.attributes & 0x07
        try:
            codec = self.compression.kafka_name
        except KafkaLogError:
            codec = f"unknown({codec_id})"
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, size={self.size_in_bytes}, position={self.position}, "
            f"compression={codec}, crc={self.crc})"
        )


# --- writer ------------------------------------------------------------------------------------------------------


def build_batch(
    records: Iterable[Record | Sequence],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    max_timestamp: int | None = None,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
    timestamp: int | None = None,
    last_offset: int | None = None,
) -> bytes:
    """Encode a magic 2 batch exactly as Kafka's MemoryRecordsBuilder does.

    ``records`` are ``Record`` objects (absolute offsets; deltas taken from ``base_offset``) or ``(key, value)`` /
    ``(key, value, headers)`` tuples numbered from ``base_offset`` and stamped with ``timestamp`` (default: now).
    baseTimestamp is the first record's timestamp (or ``delete_horizon_ms``, setting attribute bit 6);
    maxTimestamp is the largest record timestamp for CreateTime and ``log_append_time`` for LogAppendTime,
    unless ``max_timestamp`` is given. ``last_offset`` is the builder's ``overrideLastOffset``: a rebuilt batch
    keeps the last offset (hence the last sequence) of the batch it replaces.
    """
    codec = CompressionType.from_id(int(compression))
    ts_type = TimestampType(int(timestamp_type))
    if ts_type == TimestampType.NO_TIMESTAMP_TYPE:
        raise InvalidRecordError("magic 2 batches need CreateTime or LogAppendTime")
    now = None
    items: list[tuple[int, int, object, object, object]] = []
    next_offset = base_offset
    for r in records:
        if isinstance(r, Record):
            items.append((r.offset, r.timestamp, r.key, r.value, r.headers))
            next_offset = r.offset + 1
        else:
            if len(r) == 2:
                key, value = r
                headers = ()
            elif len(r) == 3:
                key, value, headers = r
            else:
                raise InvalidRecordError(f"record tuple must be (key, value) or (key, value, headers), got {len(r)} items")
            if timestamp is None and now is None:
                now = int(time.time() * 1000)
            items.append((next_offset, timestamp if timestamp is not None else now, key, value, headers or ()))
            next_offset += 1
    if not items:
        raise InvalidRecordError("cannot build a record batch with no records")
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = items[0][1]
    parts = []
    max_ts = -1
    last_delta = 0
    for offset, ts, key, value, headers in items:
        delta = offset - base_offset
        if delta < 0 or delta > _INT_MAX:
            raise InvalidRecordError(f"record offset {offset} cannot be stored relative to base offset {base_offset}")
        if delta < last_delta:
            raise InvalidRecordError(f"record offsets must increase (got {offset} after {base_offset + last_delta})")
        last_delta = delta
        if ts > max_ts:
            max_ts = ts
        parts.append(encode_record(delta, ts - base_ts, key, value, headers))
    if max_timestamp is not None:
        max_ts = max_timestamp
    elif ts_type == TimestampType.LOG_APPEND_TIME and log_append_time is not None:
        max_ts = log_append_time
    if last_offset is not None:
        if last_offset - base_offset < last_delta or last_offset - base_offset > _INT_MAX:
            raise InvalidRecordError(f"last offset {last_offset} is below the records or out of range")
        last_delta = last_offset - base_offset
    return assemble_batch(
        b"".join(parts), count=len(items), base_offset=base_offset, last_offset_delta=last_delta,
        base_timestamp=base_ts, max_timestamp=max_ts, compression=codec, timestamp_type=ts_type,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch, is_transactional=is_transactional, is_control=is_control,
        has_delete_horizon=delete_horizon_ms is not None,
    )


def assemble_batch(
    records_section: bytes,
    *,
    count: int,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: CompressionType,
    timestamp_type: TimestampType | int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> bytes:
    """A magic 2 batch around an encoded (uncompressed) records section: compressed with ``compression``, the
    header's attributes, length and CRC32C filled in (the tail of Kafka's ``MemoryRecordsBuilder.close``)."""
    body = records_section
    if compression is not CompressionType.NONE:
        body = compress(compression, body)
    attributes = int(compression) | _attributes(timestamp_type, is_transactional, is_control)
    if has_delete_horizon:
        attributes |= _DELETE_HORIZON_MASK
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body)
    header = bytearray(HEADER.pack(base_offset, length, partition_leader_epoch, 2, 0, attributes, last_offset_delta,
                                   base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count))
    crc = crc32c(body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return bytes(header) + body


def _attributes(timestamp_type: TimestampType | int, is_transactional: bool, is_control: bool) -> int:
    """The timestamp-type, transactional and control bits of a v2 batch's attributes."""
    attributes = 0
    if int(timestamp_type) == TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    return attributes


def build_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    timestamp_type: TimestampType | int,
    max_timestamp: int,
    is_transactional: bool,
    is_control: bool,
) -> bytes:
    """A header-only v2 batch (no records), as Kafka's ``DefaultRecordBatch.writeEmptyHeader``: what the cleaner
    keeps of a producer's last batch once every record is gone, so the producer's sequence and epoch survive."""
    attributes = _attributes(timestamp_type, is_transactional, is_control)
    header = bytearray(
        HEADER.pack(
            base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
            last_offset - base_offset, -1, max_timestamp, producer_id, producer_epoch, base_sequence, 0,
        )
    )
    _CRC.pack_into(header, CRC_OFFSET, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    return bytes(header)


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    *,
    offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one commit/abort marker, as Kafka's coordinator writes it."""
    rec = Record(offset, timestamp, marker.key_bytes(), marker.value_bytes())
    return build_batch(
        [rec],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )

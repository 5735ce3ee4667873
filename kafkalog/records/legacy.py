"""Magic 0 and 1 messages (Kafka's LegacyRecord / AbstractLegacyRecordBatch), read as shallow batches.

On disk a legacy "batch" is one message: either an uncompressed message standing alone, or a compressed wrapper
whose value is an inner message set. Facts kept from Kafka:
- CRC32 (zlib) covers magic .. end of the message.
- magic 1 wrappers store the *last* absolute offset; inner offsets are relative (0..n-1) and become
  ``wrapper_offset - last_inner + inner`` (a wrapper offset of 0 means base 0, for old librdkafka data).
  magic 0 wrappers store absolute inner offsets.
- magic 0 has no timestamps (-1). Inner magic 1 messages of a LogAppendTime wrapper report the wrapper's
  timestamp. The batch's max timestamp is the wrapper's timestamp.
- magic 0 lz4 payloads were written with a wrong LZ4 frame-header checksum: Kafka ignores that byte for magic 0.
- Inner messages must not be compressed, and a wrapper must hold at least one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import CorruptRecordError, InvalidRecordError
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, CompressionType, compress, decompress
from .record import Record, TimestampType

__all__ = ["LegacyBatch", "LegacyMessage", "build_legacy_batch", "parse_message"]

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TS = struct.Struct(">q")
_LEN = struct.Struct(">i")
_OFFSET_SIZE = struct.Struct(">qi")
LOG_OVERHEAD = 12
_CRC_START = 16  # magic byte, relative to the message start (offset + size + crc)
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22

_CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One decoded magic 0/1 message with the details dump tools show (stored offset, CRC, attributes)."""

    offset: int
    magic: int
    attributes: int
    stored_timestamp: int | None
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    crc: int
    crc_valid: bool
    size_in_bytes: int

    @property
    def compression(self) -> CompressionType:
        return _codec(self.attributes)

    def to_record(self) -> Record:
        return Record(self.offset, self.timestamp, self.key, self.value, ())


def _codec(attributes: int) -> CompressionType:
    cid = attributes & 0x07
    if cid >= len(_CODECS):
        raise CorruptRecordError(f"compression codec id {cid} is not allowed in magic 0/1 messages")
    return _CODECS[cid]


def parse_message(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int, int, int, int, int | None, bytes | None, bytes | None, int]:
    """Decode the message at ``pos``: (offset, size, crc, magic, attributes, timestamp, key, value, next_pos).

    Structure is checked against ``end`` and the size field; CRC is not checked here.
    """
    if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise CorruptRecordError("legacy message is truncated", position=pos)
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
    stop = pos + LOG_OVERHEAD + size
    if size < RECORD_OVERHEAD_V0 or stop > end:
        raise CorruptRecordError(f"legacy message size {size} does not fit", position=pos)
    p = pos + 18
    if magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(f"magic 1 message size {size} is below the minimum", position=pos)
        (ts,) = _TS.unpack_from(buf, p)
        p += 8
    elif magic == 0:
        ts = None
    else:
        raise CorruptRecordError(f"invalid magic {magic} in a legacy message", position=pos)
    (klen,) = _LEN.unpack_from(buf, p)
    p += 4
    if klen < 0:
        key = None
    else:
        if p + klen + 4 > stop:
            raise CorruptRecordError(f"key length {klen} runs past the message", position=pos)
        key = bytes(buf[p : p + klen])
        p += klen
    (vlen,) = _LEN.unpack_from(buf, p)
    p += 4
    if vlen < 0:
        value = None
    else:
        if p + vlen > stop:
            raise CorruptRecordError(f"value length {vlen} runs past the message", position=pos)
        value = bytes(buf[p : p + vlen])
        p += vlen
    if p != stop:
        raise CorruptRecordError(f"legacy message has {stop - p} bytes beyond its key and value", position=pos)
    return offset, size, crc, magic, attributes, ts, key, value, stop


class LegacyBatch:
    """A shallow magic 0/1 message over ``raw`` (exactly ``size_in_bytes`` bytes); same interface as RecordBatch."""

    __slots__ = ("raw", "position", "_h", "_timestamp", "_inner")

    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    partition_leader_epoch = -1
    is_transactional = False
    is_control = False
    has_producer_id = False
    delete_horizon_ms = None
    has_delete_horizon = False

    def __init__(self, raw: memoryview | bytes | bytearray, position: int | None = None) -> None:
        if not isinstance(raw, memoryview):
            raw = memoryview(raw)
        if len(raw) < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"legacy message of {len(raw)} bytes is too short", position=position)
        h = _PREFIX.unpack_from(raw, 0)
        if h[1] + LOG_OVERHEAD != len(raw):
            raise CorruptRecordError(f"message size {h[1]} does not match the {len(raw)} bytes given", position=position)
        magic = h[3]
        if magic == 1:
            if h[1] < RECORD_OVERHEAD_V1:
                raise CorruptRecordError(f"magic 1 message size {h[1]} is below the minimum", position=position)
            self._timestamp = _TS.unpack_from(raw, 18)[0]
        elif magic == 0:
            self._timestamp = -1
        else:
            raise CorruptRecordError(f"invalid magic {magic} in a legacy message", position=position)
        self.raw = raw
        self.position = position
        self._h = h
        self._inner: list[LegacyMessage] | None = None

    # --- header fields -----------------------------------------------------------------------------------------
    @property
    def magic(self) -> int:
        """The message format version, 0 or 1."""
        return self._h[3]

    @property
    def crc(self) -> int:
        """The stored CRC32 (zlib's, over magic to the end); ``is_valid()`` compares it with the bytes."""
        return self._h[2]

    @property
    def attributes(self) -> int:
        """The raw attribute bits: compression codec and (magic 1) the timestamp type."""
        return self._h[4]

    @property
    def size_in_bytes(self) -> int:
        """The whole message on disk, the 12-byte offset/length prefix included."""
        return self._h[1] + LOG_OVERHEAD

    @property
    def compression(self) -> CompressionType:
        """The wrapper's codec; NONE for a single uncompressed message."""
        return _codec(self._h[4])

    @property
    def timestamp_type(self) -> TimestampType:
        """NoTimestampType for magic 0, else CreateTime or LogAppendTime from the attributes."""
        if self._h[3] == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self._h[4] & 0x08 else TimestampType.CREATE_TIME

    @property
    def timestamp(self) -> int:
        """The wrapper's own timestamp (-1 for magic 0)."""
        return self._timestamp

    @property
    def max_timestamp(self) -> int:
        """The wrapper's timestamp (-1 for magic 0), as Kafka reports it for the whole set."""
        return self._timestamp

    @property
    def base_timestamp(self) -> int:
        """The same as ``max_timestamp``: a legacy message has one timestamp."""
        return self._timestamp

    @property
    def last_offset(self) -> int:
        """The stored offset: for a compressed wrapper, the last inner offset."""
        return self._h[0]

    @property
    def next_offset(self) -> int:
        """The wrapper's offset + 1: the log end offset after this message set."""
        return self._h[0] + 1

    @property
    def offset_of_max_timestamp(self) -> int:
        """The wrapper's offset, which Kafka's time index uses for a legacy set."""
        return self._h[0]

    @property
    def base_offset(self) -> int:
        """The first inner offset (Kafka loads the full wrapper for this, so do we; cached)."""
        if self._h[4] & 0x07 == 0:
            return self._h[0]
        return self.messages()[0].offset

    @property
    def record_count(self) -> int:
        """1 for an uncompressed message, else the number of inner messages (decompresses)."""
        if self._h[4] & 0x07 == 0:
            return 1
        return len(self.messages())

    count = record_count

    @property
    def last_offset_delta(self) -> int:
        """``last_offset - base_offset`` of the set."""
        return self.last_offset - self.base_offset

    # --- integrity ---------------------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        """The CRC32 of the stored bytes, to compare with ``crc``."""
        return zlib.crc32(self.raw[_CRC_START:])

    def is_valid(self) -> bool:
        """True when the stored CRC32 matches the bytes."""
        return zlib.crc32(self.raw[_CRC_START:]) == self._h[2]

    def ensure_valid(self) -> None:
        """Raise ``CorruptRecordError`` naming the stored and computed CRC when they differ."""
        computed = zlib.crc32(self.raw[_CRC_START:])
        if computed != self._h[2]:
            raise CorruptRecordError(
                f"message is corrupt (stored crc = {self._h[2]}, computed crc = {computed})", position=self.position
            )

    # --- records -----------------------------------------------------------------------------------------------
    def messages(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[LegacyMessage]:
        """The messages Kafka's deep iteration yields, with absolute offsets (decompresses a wrapper)."""
        if self._inner is not None:
            return self._inner
        raw = self.raw
        try:
            offset, size, crc, magic, attributes, ts, key, value, _ = parse_message(raw, 0, len(raw))
        except CorruptRecordError as exc:
            raise CorruptRecordError(str(exc).split(" (at position")[0], position=self.position) from None
        codec = _codec(attributes)
        ts_type = self.timestamp_type
        if codec is CompressionType.NONE:
            msgs = [
                LegacyMessage(offset, magic, attributes, ts, -1 if ts is None else ts, ts_type, key, value, crc,
                              self.is_valid(), size + LOG_OVERHEAD)
            ]
        else:
            if value is None:
                raise CorruptRecordError("compressed message set with a null value", position=self.position)
            try:
                payload = decompress(codec, value, max_size=max_size, ignore_lz4_header_checksum=(magic == 0))
                msgs = self._inner_messages(payload, magic, offset, ts_type)
            except CorruptRecordError as exc:
                raise CorruptRecordError(str(exc).split(" (at position")[0], position=self.position) from None
        self._inner = msgs
        return msgs

    def _inner_messages(self, payload: bytes, wrapper_magic: int, wrapper_offset: int, wrapper_ts_type) -> list[LegacyMessage]:
        end = len(payload)
        pos = 0
        parsed = []
        while pos < end:
            offset, size, crc, magic, attributes, ts, key, value, nxt = parse_message(payload, pos, end)
            if attributes & 0x07:
                raise CorruptRecordError("inner messages must not be compressed")
            valid = zlib.crc32(memoryview(payload)[pos + _CRC_START : nxt]) == crc
            parsed.append((offset, size, crc, magic, attributes, ts, key, value, valid))
            pos = nxt
        if not parsed:
            raise CorruptRecordError("compressed message set with no inner messages")
        if wrapper_magic == 1:
            if wrapper_offset == 0:
                base = 0
            else:
                last_inner = parsed[-1][0]
                if wrapper_offset < last_inner:
                    raise CorruptRecordError(
                        f"wrapper offset {wrapper_offset} is less than the last inner offset {last_inner}"
                    )
                base = wrapper_offset - last_inner
        else:
            base = None
        wrapper_ts = self._timestamp
        out = []
        for offset, size, crc, magic, attributes, ts, key, value, valid in parsed:
            if magic == 0:
                eff_ts = -1
                ts_type = TimestampType.NO_TIMESTAMP_TYPE
            elif wrapper_ts_type == TimestampType.LOG_APPEND_TIME:
                eff_ts = wrapper_ts
                ts_type = TimestampType.LOG_APPEND_TIME
            else:
                eff_ts = ts
                ts_type = TimestampType.CREATE_TIME if wrapper_magic == 1 else (
                    TimestampType.LOG_APPEND_TIME if attributes & 0x08 else TimestampType.CREATE_TIME)
            out.append(
                LegacyMessage(offset if base is None else base + offset, magic, attributes, ts, eff_ts, ts_type, key,
                              value, crc, valid, size + LOG_OVERHEAD)
            )
        return out

    @property
    def stored_inner_offsets(self) -> list[int]:
        """Inner offsets as stored (relative for magic 1 wrappers); [] for an uncompressed message."""
        if self._h[4] & 0x07 == 0:
            return []
        payload = decompress(self.compression, self._value(), ignore_lz4_header_checksum=(self.magic == 0))
        offsets = []
        pos = 0
        while pos < len(payload):
            offsets.append(parse_message(payload, pos, len(payload))[0])
            pos = parse_message(payload, pos, len(payload))[-1]
        return offsets

    def _value(self) -> bytes | None:
        return parse_message(self.raw, 0, len(self.raw))[7]

    def records(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[Record]:
        """Deep records: absolute offsets, timestamps as Kafka reports them (-1 for magic 0), no headers."""
        return [m.to_record() for m in self.messages(max_size=max_size)]

    def __iter__(self):
        return iter(self.records())

    def control_marker(self) -> None:
        """Always None: magic 0/1 has no control batches (the same call as on a ``RecordBatch``)."""
        return None

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(magic={self.magic}, last_offset={self.last_offset}, size={self.size_in_bytes}, "
            f"position={self.position}, compression={self.compression.kafka_name}, crc={self.crc})"
        )


# --- writer (tests, tools, converting old data) ---------------------------------------------------------------------


def _encode_message(offset: int, magic: int, attributes: int, timestamp: int | None, key, value) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _TS.pack(-1 if timestamp is None else timestamp)
    for part in (key, value):
        if part is None:
            body += _LEN.pack(-1)
        else:
            body += _LEN.pack(len(part))
            body += part
    crc = zlib.crc32(body)
    return _OFFSET_SIZE.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def build_legacy_batch(
    records: Iterable[Record | Sequence],
    *,
    magic: int,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    timestamp: int = -1,
) -> bytes:
    """A magic 0/1 message set as Kafka's MemoryRecordsBuilder writes it: one message per record when uncompressed,
    else one wrapper (magic 1: relative inner offsets, wrapper offset = last offset, wrapper timestamp = max
    timestamp or ``log_append_time``; magic 0: absolute inner offsets)."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"legacy magic must be 0 or 1, got {magic}")
    codec = CompressionType.from_id(int(compression))
    if codec is CompressionType.ZSTD:
        raise InvalidRecordError("zstd needs magic 2")
    lat = magic == 1 and int(timestamp_type) == TimestampType.LOG_APPEND_TIME
    items = []
    nxt = base_offset
    for r in records:
        if isinstance(r, Record):
            items.append((r.offset, r.timestamp, r.key, r.value))
            nxt = r.offset + 1
        else:
            items.append((nxt, timestamp, r[0], r[1]))
            nxt += 1
    if not items:
        raise InvalidRecordError("cannot build an empty message set")
    ts_bit = 0x08 if lat else 0
    if codec is CompressionType.NONE:
        out = []
        for offset, ts, key, value in items:
            t = (log_append_time if lat and log_append_time is not None else ts) if magic == 1 else None
            out.append(_encode_message(offset, magic, ts_bit, t, key, value))
        return b"".join(out)
    inner = []
    first = items[0][0]
    for offset, ts, key, value in items:
        stored = offset - first if magic == 1 else offset
        inner.append(_encode_message(stored, magic, 0, ts if magic == 1 else None, key, value))
    payload = compress(codec, b"".join(inner))
    if magic == 1:
        wrapper_ts = log_append_time if lat and log_append_time is not None else max(i[1] for i in items)
    else:
        wrapper_ts = None
    return _encode_message(items[-1][0], magic, int(codec) | ts_bit, wrapper_ts, None, payload)

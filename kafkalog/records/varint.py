"""Zig-zag varints as Kafka's record format v2 uses them (protobuf style, ByteUtils.readVarint/readVarlong).

Decoding is bounded: an int varint may use at most 5 bytes and a long at most 10; anything longer, or a
varint running off the end of the buffer, is corrupt data rather than a reason to loop or over-allocate.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, InvalidArgumentError
from ..limits import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

__all__ = [
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

#: the value of every one-byte zig-zag varint (index: the byte, below 0x80)
ZIGZAG_1 = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 7))
#: the value of every two-byte one (index: ``(first & 0x7F) | second << 7``, second byte below 0x80); the record
#: decoder reads nearly every length and delta from these two tables instead of calling ``decode_zigzag``
ZIGZAG_2 = tuple((u >> 1) ^ -(u & 1) for u in range(1 << 14))


def _encode_unsigned(u: int) -> bytes:
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 32-bit value."""
    if not INT_MIN <= value <= INT_MAX:
        raise InvalidArgumentError(f"varint out of int32 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    if not LONG_MIN <= value <= LONG_MAX:
        raise InvalidArgumentError(f"varlong out of int64 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _size_of_unsigned(u: int) -> int:
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def size_of_varint(value: int) -> int:
    """Encoded size in bytes of ``value`` as a zig-zag varint."""
    return _size_of_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    """Encoded size in bytes of ``value`` as a zig-zag varlong."""
    return _size_of_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_zigzag(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode a zig-zag varint of at most ``max_bytes`` (5 = int, 10 = long) at ``pos``.

    The one decoding loop; the record decoder reads one- and two-byte varints from the tables above and falls back
    to it. Running past the
    buffer raises IndexError for the caller to turn into its own error.
    """
    result = 0
    shift = 0
    limit = pos + max_bytes
    while True:
        if pos >= limit:
            raise CorruptRecordError(f"{'varint' if max_bytes == 5 else 'varlong'} is longer than {max_bytes} bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    result &= 0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``; return (value, next position). At most 5 bytes, as Kafka."""
    try:
        return decode_zigzag(buf, pos, 5)
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the buffer") from None


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong at ``pos``; return (value, next position). At most 10 bytes, as Kafka."""
    try:
        return decode_zigzag(buf, pos, 10)
    except IndexError:
        raise CorruptRecordError("varlong runs past the end of the buffer") from None

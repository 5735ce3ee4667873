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


def size_of_varint(value: int) -> int:
    """Encoded size in bytes of ``value`` as a zig-zag varint."""
    u = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def size_of_varlong(value: int) -> int:
    """Encoded size in bytes of ``value`` as a zig-zag varlong."""
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def decode_zigzag(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """Decode a zig-zag varint of at most ``max_bytes`` (5 = int, 10 = long) at ``pos``.

    The one decoding loop; hot paths inline the one- and two-byte cases and fall back to it. Running past the
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

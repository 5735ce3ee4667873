"""Compression codecs with the exact framings Kafka writes and reads.

- gzip: a plain gzip stream, written as the JVM's GZIPOutputStream writes it (zlib's deflate at Kafka's default
  level, Java's 10-byte header), so a batch kafkalog compresses has Kafka's bytes; decoded with zlib so output can
  be capped.
- snappy: Kafka writes snappy-java's "xerial" stream framing: magic ``\\x82SNAPPY\\x00``, i32 version, i32
  compatible version, then blocks of i32 length + raw snappy. Readers also accept a bare raw snappy payload.
- lz4: the LZ4 frame format with independent blocks (Kafka's Lz4BlockOutputStream). Kafka before 0.10 wrote a
  wrong frame-descriptor checksum (HC byte); Kafka ignores that byte for magic 0 messages, and so do we.
- zstd: a zstd frame, written at Kafka's default level 3. Decoded by the ``zstandard`` package with one reused
  context per thread (``codec_contexts``; cramjam makes a fresh one per call, several times a batch's decoding);
  what that fast path does not take (several frames, a skippable frame, a window beyond the streaming limit, a
  payload that does not decode in its room) goes to cramjam, whose answer (bytes or error) is the reference.

Every decoder takes ``max_size``: output beyond it is a ``CorruptRecordError`` and no buffer larger than
``max_size`` (or than what the input can really expand to) is allocated, so a hostile payload cannot exhaust memory.
"""

from __future__ import annotations

import enum
import functools
import struct
import zlib
from collections.abc import Iterator

import cramjam

from ..errors import CorruptRecordError, UnsupportedCompressionError
from .codec_contexts import _zstd_cctx, _zstd_fast, zstd_decoder

__all__ = ["CompressionType", "compress", "compressors", "decompress", "decompress_into",
           "DEFAULT_MAX_DECOMPRESSED_SIZE", "xxh32", "BLOCK_DECODERS", "SNAPPY_BLOCK_INTO", "zstd_decoder"]

#: Default cap for one batch's decompressed records section. Kafka's own limit on a batch is
#: ``message.max.bytes`` for the compressed size; 256 MiB of records is beyond anything a broker accepts.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


class CompressionType(enum.IntEnum):
    """Codec id stored in the low 3 attribute bits."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """Kafka's name (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        return self.name.lower()

    @classmethod
    def from_id(cls, codec_id: int) -> CompressionType:
        """The codec of an attribute's compression id (0-4); ``UnsupportedCompressionError`` for others."""
        try:
            return _BY_ID[codec_id]
        except (KeyError, IndexError):
            raise UnsupportedCompressionError(f"unknown compression codec id {codec_id}") from None

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec named as Kafka names it (``none``, ``gzip``, ...); ``UnsupportedCompressionError`` for others."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise UnsupportedCompressionError(f"unknown compression codec {name!r}") from None


_BY_ID = tuple(CompressionType)

# --- xxHash32 (only for the LZ4 frame header checksum, a handful of bytes) ------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data``, in pure Python: used for the few-byte LZ4 frame descriptor only."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --- gzip ------------------------------------------------------------------------------------------------------


#: The header Java's GZIPOutputStream writes (no name, mtime 0, no extra flags, OS 255 "unknown" since JDK 16).
_JAVA_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
#: Kafka's ``compression.gzip.level`` default: -1, ``Deflater.DEFAULT_COMPRESSION``, which zlib reads as 6.
_GZIP_LEVEL = 6


def _gzip_compress(data: bytes | bytearray | memoryview) -> bytes:
    """GZIPOutputStream's bytes: zlib's raw deflate at Kafka's level between Java's header and the CRC32/size
    trailer (the JDK's Deflater is zlib with the same settings, so Kafka's batches come out identical)."""
    c = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, -15)
    return b"".join((_JAVA_GZIP_HEADER, c.compress(data), c.flush(),
                     struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    try:
        d = zlib.decompressobj(wbits=31)
        first = d.decompress(data, max_size + 1)
        if d.eof and len(first) <= max_size and not d.unused_data.startswith(b"\x1f\x8b"):
            return first  # one member (GZIPInputStream ignores trailing bytes that are not another member)
        out = bytearray(first)
        while True:
            if len(out) > max_size:
                raise CorruptRecordError(f"gzip payload expands beyond {max_size} bytes")
            if not d.eof:
                if d.unconsumed_tail:
                    raise CorruptRecordError(f"gzip payload expands beyond {max_size} bytes")
                raise CorruptRecordError("gzip payload is truncated")
            rest = d.unused_data
            if not rest.startswith(b"\x1f\x8b"):  # trailing garbage after a member: GZIPInputStream ignores it
                return bytes(out)
            d = zlib.decompressobj(wbits=31)
            out += d.decompress(rest, max_size + 1 - len(out))
    except zlib.error as exc:
        raise CorruptRecordError(f"corrupt gzip payload: {exc}") from None


# --- snappy (xerial framing) --------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    """snappy-java's xerial stream of ``data``: raw snappy blocks of 32 KiB, each after its big-endian length. A
    records section of one block (most batches) is framed in one join, sparing a Python loop per rebuilt batch."""
    if 0 < len(data) <= _XERIAL_BLOCK:
        block = cramjam.snappy.compress_raw(data)
        return b"".join((_XERIAL_HEADER, len(block).to_bytes(4, "big"), block))
    parts = [_XERIAL_HEADER]
    mv = memoryview(data)
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: bytes | memoryview, budget: int) -> bytes:
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:  # cramjam raises its own DecompressionError types
        raise CorruptRecordError(f"corrupt snappy block: {exc}") from None
    if n > budget:
        raise CorruptRecordError(f"snappy payload expands beyond the {budget} bytes allowed")
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise CorruptRecordError(f"corrupt snappy block: {exc}") from None


def _snappy_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != _XERIAL_MAGIC:
        return _snappy_raw(mv, max_size)
    if len(mv) < 16:
        raise CorruptRecordError("xerial snappy header is truncated")
    pos = 16
    out: list[bytes] = []
    total = 0
    end = len(mv)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block length {n} does not fit the payload")
        chunk = _snappy_raw(mv[pos : pos + n], max_size - total)
        total += len(chunk)
        out.append(chunk)
        pos += n
    return b"".join(out)


# --- lz4 frame ----------------------------------------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_UNCOMPRESSED = 0x80000000


def _lz4_compress(data: bytes | bytearray | memoryview) -> bytes:
    """Frame as Kafka's Lz4BlockOutputStream: version 1, independent blocks, 64 KiB, no checksums but HC."""
    flg = 0x60  # version 01, block independence
    bd = 0x40  # 64 KiB blocks
    hc = (xxh32(bytes((flg, bd))) >> 8) & 0xFF
    parts = [struct.pack("<IBBB", _LZ4_MAGIC, flg, bd, hc)]
    mv = memoryview(data)
    size = 64 * 1024
    for i in range(0, len(mv), size):
        chunk = mv[i : i + size]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            parts.append(struct.pack("<I", len(chunk) | _LZ4_UNCOMPRESSED))
            parts.append(bytes(chunk))
        else:
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


@functools.lru_cache(maxsize=64)
def _lz4_header_checksum(descriptor: bytes) -> int:
    """The HC byte of a frame descriptor: producers repeat a handful of descriptors, and xxh32 here is Python."""
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_blocks(data: bytes | memoryview, ignore_header_checksum: bool) -> Iterator[tuple[memoryview, bool, int]]:
    """The blocks of an lz4 frame as (bytes, stored uncompressed, the frame's block size), checked as they come."""
    mv = memoryview(data)
    end = len(mv)
    if end < 7:
        raise CorruptRecordError("lz4 frame header is truncated")
    magic, flg, bd = struct.unpack_from("<IBB", mv, 0)
    if magic != _LZ4_MAGIC:
        raise CorruptRecordError("not an lz4 frame (bad magic)")
    if flg >> 6 != 1:
        raise CorruptRecordError(f"unsupported lz4 frame version {flg >> 6}")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if block_max is None:
        raise CorruptRecordError(f"bad lz4 block size descriptor {bd:#x}")
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    pos = 6
    if flg & 0x08:
        pos += 8
    if flg & 0x01:  # dictionary id
        pos += 4
    if pos >= end:
        raise CorruptRecordError("lz4 frame header is truncated")
    if not ignore_header_checksum:
        if mv[pos] != _lz4_header_checksum(bytes(mv[4:pos])):
            raise CorruptRecordError("lz4 frame descriptor checksum mismatch")
    pos += 1
    while True:
        if pos + 4 > end:
            raise CorruptRecordError("lz4 frame is truncated")
        (word,) = struct.unpack_from("<I", mv, pos)
        pos += 4
        if word == 0:
            if content_checksum:
                if pos + 4 > end:
                    raise CorruptRecordError("lz4 content checksum is truncated")
                # Content checksum needs xxh32 over the output; pure Python would dominate the cost, and the
                # batch CRC already protects these bytes. Kafka's own writer never sets this flag.
            return
        n = word & 0x7FFFFFFF
        if n > block_max or pos + n > end:
            raise CorruptRecordError(f"lz4 block of {n} bytes does not fit (max {block_max})")
        block = mv[pos : pos + n]
        pos += n
        if block_checksum:
            if pos + 4 > end:
                raise CorruptRecordError("lz4 block checksum is truncated")
            pos += 4
        yield block, bool(word & _LZ4_UNCOMPRESSED), block_max


def _lz4_block_into(block: memoryview, out: bytearray | memoryview) -> int:
    try:
        return cramjam.lz4.decompress_block_into(block, out)
    except Exception as exc:
        raise _lz4_block_error(exc) from None


def _lz4_block_error(exc: BaseException) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt lz4 block: {exc}")


def _lz4_decompress(data: bytes | memoryview, max_size: int, ignore_header_checksum: bool) -> bytes:
    out: list[bytes] = []
    total = 0
    scratch = None
    for block, stored, block_max in _lz4_blocks(data, ignore_header_checksum):
        if stored:
            chunk = bytes(block)
        else:
            if scratch is None:
                scratch = bytearray(min(block_max, max_size + 1))
            chunk = bytes(scratch[: _lz4_block_into(block, scratch)])
        total += len(chunk)
        if total > max_size:
            raise CorruptRecordError(f"lz4 payload expands beyond {max_size} bytes")
        out.append(chunk)
    return b"".join(out)


def _lz4_decompress_into(data: bytes | memoryview, out: memoryview, max_size: int) -> int | None:
    """``_lz4_decompress`` (Kafka's v2 rules: header checksum checked) written into ``out``; None if it may not
    fit. Each block gets the room ``_lz4_decompress`` gives it, so the same blocks succeed and fail."""
    total = 0
    for block, stored, block_max in _lz4_blocks(data, False):
        room = len(block) if stored else min(block_max, max_size + 1)
        if total + room > len(out):
            return None
        if stored:
            out[total : total + room] = block
            total += room
        else:
            total += _lz4_block_into(block, out[total : total + room])
        if total > max_size:
            raise CorruptRecordError(f"lz4 payload expands beyond {max_size} bytes")
    return total


# --- zstd ---------------------------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528


def _zstd_bound(mv: memoryview) -> int:
    """Upper bound of a zstd payload's output, from its frame and block headers (no decompression)."""
    pos = 0
    end = len(mv)
    bound = 0
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecordError("zstd frame is truncated")
        (magic,) = struct.unpack_from("<I", mv, pos)
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            if pos + 8 > end:
                raise CorruptRecordError("zstd skippable frame is truncated")
            (n,) = struct.unpack_from("<I", mv, pos + 4)
            pos += 8 + n
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError("not a zstd frame (bad magic)")
        pos += 4
        if pos >= end:
            raise CorruptRecordError("zstd frame header is truncated")
        fhd = mv[pos]
        pos += 1
        single_segment = fhd & 0x20
        fcs_flag = fhd >> 6
        window = 0
        if not single_segment:
            if pos >= end:
                raise CorruptRecordError("zstd frame header is truncated")
            wd = mv[pos]
            pos += 1
            exp = (wd >> 3) + 10
            base = 1 << exp
            window = base + (base >> 3) * (wd & 7)
        pos += (0, 1, 2, 4)[fhd & 3]
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        if pos + fcs_size > end:
            raise CorruptRecordError("zstd frame header is truncated")
        if fcs_size:
            fcs = int.from_bytes(mv[pos : pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
            if single_segment:
                window = fcs
        pos += fcs_size
        block_max = min(window, 128 * 1024) if window else 128 * 1024
        while True:
            if pos + 3 > end:
                raise CorruptRecordError("zstd block header is truncated")
            hdr = int.from_bytes(mv[pos : pos + 3], "little")
            pos += 3
            last = hdr & 1
            btype = (hdr >> 1) & 3
            bsize = hdr >> 3
            if btype == 0:
                bound += bsize
                pos += bsize
            elif btype == 1:
                bound += bsize
                pos += 1
            elif btype == 2:
                bound += block_max
                pos += bsize
            else:
                raise CorruptRecordError("reserved zstd block type")
            if pos > end:
                raise CorruptRecordError("zstd block is truncated")
            if last:
                break
        if fhd & 0x04:
            pos += 4
    return bound


#: What cramjam's ``DecompressionError`` says when ``decompress_into`` filled its output before the payload ended
#: (Rust's ``write_all`` on a full slice, ``io::ErrorKind::WriteZero``). Every other error is the payload's own.
_CRAMJAM_OUTPUT_FULL = "failed to write whole buffer"


def _output_full(exc: BaseException) -> bool:
    """True when a cramjam ``decompress_into`` failed only because its output buffer was too small."""
    return str(exc) == _CRAMJAM_OUTPUT_FULL


def _zstd_into(src: bytes | memoryview, dst: bytearray | memoryview) -> int:
    """cramjam.zstd.decompress_into's contract (bytes written into ``dst``, its errors where it fails), taking
    ``_zstd_fast`` first: the zstd call of ``BLOCK_DECODERS`` and of ``decompress_into``."""
    out = _zstd_fast(src, len(dst))
    if out is None:
        return cramjam.zstd.decompress_into(src, dst)
    n = len(out)
    dst[:n] = out
    return n


def _zstd_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    """Decode into a buffer that starts near the payload's size and doubles up to the header bound.

    The frame headers only give an upper bound, and a hostile payload of empty blocks can claim hundreds of MiB
    while producing nothing: allocating the bound up front would make memory follow a lying header. Retrying
    with a doubled buffer costs at most log2(bound / start) extra decodes for highly compressible data, and only
    happens when the output was too small: a payload that does not decode fails at the first attempt, so garbage
    blocks claiming the whole bound cost one small buffer, not a climb to ``max_size``.
    """
    mv = memoryview(data)
    bound = min(_zstd_bound(mv), max_size)
    fast = _zstd_fast(mv, min(bound, max(32 * len(mv), 1 << 20)))  # about the compiled walker's scratch room
    if fast is not None:
        return fast
    size = min(bound, max(16 * len(mv), 64 * 1024))
    while True:
        out = bytearray(size)
        try:
            n = cramjam.zstd.decompress_into(mv, out)
        except Exception as exc:
            if _output_full(exc) and size < bound:
                del out
                size = min(bound, size * 2)
                continue
            raise _zstd_error(exc, mv, max_size) from None
        del out[n:]
        return bytes(out)


def _zstd_error(exc: BaseException, mv: memoryview, max_size: int) -> CorruptRecordError:
    """The error for a zstd payload whose decode raised ``exc``: filling the whole room (its header bound, capped
    by ``max_size``) is a bomb when the header claims more than ``max_size``; any other failure is corruption."""
    if _output_full(exc) and _zstd_bound(mv) > max_size:
        return CorruptRecordError(f"zstd payload expands beyond {max_size} bytes")
    return CorruptRecordError(f"corrupt zstd payload: {exc}")


def _zstd_decompress_into(data: bytes | memoryview, out: memoryview, max_size: int) -> int | None:
    """``_zstd_decompress`` written into ``out``: decoded into exactly the room its last attempt has (the header
    bound, capped by ``max_size``), so it succeeds on the same payloads. None if ``out`` is smaller than that room
    or the payload does not decode (the caller then asks ``decompress``, which raises the precise error)."""
    mv = memoryview(data)
    bound = min(_zstd_bound(mv), max_size)
    if bound > len(out):
        return None
    try:
        return _zstd_into(mv, out[:bound])
    except Exception:  # noqa: BLE001 -- decompress() gives the error its message
        return None


def codec_error(codec: CompressionType | int, data: bytes | bytearray | memoryview, exc: BaseException, *,
                max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> CorruptRecordError:
    """What ``decompress(codec, data, max_size=max_size)`` raises when ``BLOCK_DECODERS``' lz4 block call or zstd
    payload call, made by the compiled walker with the room this module gives it, raised ``exc``: the same call
    fails the same way here, so the error is known without decompressing the payload a second time."""
    if CompressionType.from_id(int(codec)) is CompressionType.LZ4:
        return _lz4_block_error(exc)
    return _zstd_error(exc, memoryview(data), max_size)


#: What the compiled columnar decoder calls itself once it has walked an lz4 frame / bounded a zstd payload in C
#: (``_columns_codec.h`` mirrors ``_lz4_blocks`` and ``_zstd_bound``): the codec functions used above, and the limit.
BLOCK_DECODERS = (cramjam.lz4.decompress_block_into, _zstd_into, DEFAULT_MAX_DECOMPRESSED_SIZE)

#: What the compiled decoder calls per raw snappy block once it has walked the xerial framing and read the block's
#: declared length in C (``_columns_snappy.h`` mirrors ``_snappy_decompress``): the call ``_snappy_raw`` makes, into
#: a buffer of exactly that length.
SNAPPY_BLOCK_INTO = cramjam.snappy.decompress_raw_into


# --- entry points -------------------------------------------------------------------------------------------------


def compress(codec: CompressionType | int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a records section with ``codec`` in the framing Kafka writes."""
    codec = CompressionType.from_id(int(codec))
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_compress(data)
    if codec is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data)
    return _zstd_cctx().compress(data)


def compressors() -> tuple:
    """``compress`` as one function per codec id (None for none), for callers that compress many records sections
    in a row (the cleaner's compiled writer): each takes a bytes-like section and returns the framed payload. The
    zstd one is this thread's context: use the tuple in the thread that asked for it."""
    return (None, _gzip_compress, _snappy_compress, _lz4_compress, _zstd_cctx().compress)


def decompress(
    codec: CompressionType | int,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ignore_lz4_header_checksum: bool = False,
) -> bytes:
    """Decompress ``data``; raise CorruptRecordError on bad input or output beyond ``max_size`` bytes.

    ``ignore_lz4_header_checksum`` reproduces Kafka's tolerance of the wrong HC byte old clients wrote (Kafka
    sets it for magic 0 messages).
    """
    codec = CompressionType.from_id(int(codec))
    if codec is CompressionType.NONE:
        if len(data) > max_size:
            raise CorruptRecordError(f"payload larger than {max_size} bytes")
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_decompress(data, max_size)
    if codec is CompressionType.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec is CompressionType.LZ4:
        return _lz4_decompress(data, max_size, ignore_lz4_header_checksum)
    return _zstd_decompress(data, max_size)


def decompress_into(codec: CompressionType | int, data: bytes | bytearray | memoryview, out: bytearray | memoryview,
                    *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> int | None:  # fmt: skip
    """Decompress a v2 records section into the front of ``out`` and return its length, sparing ``decompress``'s
    new output object per batch (the columnar decoder reuses one buffer). None when this codec has no such path
    (none, gzip, snappy), ``out`` may be too small, or (zstd) the payload does not decode: then ``decompress``
    gives the answer. Whatever length is returned, the bytes are ``decompress``'s."""
    codec = CompressionType.from_id(int(codec))
    if codec is CompressionType.LZ4:
        return _lz4_decompress_into(data, memoryview(out), max_size)
    if codec is CompressionType.ZSTD:
        return _zstd_decompress_into(data, memoryview(out), max_size)
    return None

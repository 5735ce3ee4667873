"""``.rsm-manifest``: the JSON Aiven's RemoteStorageManager writes beside each segment it uploads.

It says how the segment's ``.log`` object was cut and transformed (the chunk index), where each index sits in the
``.indexes`` object, whether chunks are zstd-compressed, and for encrypted segments the AES data key (wrapped with
the RSA key pair named before the colon) and the AES-GCM associated data. Layout (the plugin's
``SegmentManifestV1``)::

    {"version": "1",
     "chunkIndex": {"type": "fixed", "originalChunkSize", "originalFileSize",
                    "transformedChunkSize", "finalTransformedChunkSize"}
                 | {"type": "variable", "originalChunkSize", "originalFileSize",
                    "transformedChunks": base64(zstd(count i32, base i32, width u8, (count-1) values, last i32))},
     "segmentIndexes": {"offset"|"timestamp"|"producerSnapshot"|"leaderEpoch"|"transaction":
                        {"position", "size"} | null},
     "compression": bool,
     "encryption": {"dataKey": "<key pair id>:base64(RSA-OAEP(key))", "aad": base64} (absent: not encrypted),
     "remoteLogSegmentMetadata": {...}}

Original chunks are ``originalChunkSize`` bytes (the last one the rest); transformed chunks follow each other in
the object. Everything here is pure parsing: any inconsistency is a :class:`CorruptTieredObjectError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass, field

import numpy as np

from kafkalog.errors import CorruptRecordError, CorruptTieredObjectError
from kafkalog.records.compression import CompressionType, decompress

__all__ = ["INDEX_KINDS", "ChunkIndex", "SegmentManifest", "parse_manifest"]

#: the manifest's index names -> the plugin's IndexType names, in the order the plugin writes them to .indexes
INDEX_KINDS = {
    "offset": "OFFSET",
    "timestamp": "TIMESTAMP",
    "producerSnapshot": "PRODUCER_SNAPSHOT",
    "leaderEpoch": "LEADER_EPOCH",
    "transaction": "TRANSACTION",
}
#: the plugin's sanity bound on the decoded transformed-chunk list
_MAX_CHUNK_LIST = 10 << 20
_INT_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class ChunkIndex:
    """Where each chunk of the original file lies in the transformed object (numpy int64 columns, one row per
    chunk). ``kind`` is ``fixed`` (every transformed chunk one size, e.g. encryption alone) or ``variable``."""

    kind: str
    original_chunk_size: int
    original_file_size: int
    original_position: np.ndarray
    original_size: np.ndarray
    transformed_position: np.ndarray
    transformed_size: np.ndarray

    def __len__(self) -> int:
        return len(self.original_size)

    @property
    def transformed_total(self) -> int:
        """The size the transformed object must have."""
        return int(self.transformed_position[-1] + self.transformed_size[-1]) if len(self) else 0

    def chunks_for_range(self, start: int, end: int) -> range:
        """Ids of the chunks holding original bytes ``[start, end)`` (empty when the range is)."""
        end = min(end, self.original_file_size)
        if start >= end:
            return range(0)
        return range(start // self.original_chunk_size, (end - 1) // self.original_chunk_size + 1)


@dataclass(frozen=True)
class SegmentManifest:
    """A parsed ``.rsm-manifest``; ``indexes`` maps the manifest's index names to ``(position, size)`` in
    ``.indexes`` (absent: the segment has no such index); ``data_key`` is ``(key pair id, wrapped key)``."""

    chunk_index: ChunkIndex
    indexes: dict[str, tuple[int, int]]
    compression: bool
    data_key: tuple[str, bytes] | None = None
    aad: bytes | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def encrypted(self) -> bool:
        return self.data_key is not None

    @property
    def indexes_total(self) -> int:
        """The size the ``.indexes`` object must have (its parts follow each other)."""
        return max((p + s for p, s in self.indexes.values()), default=0)


def _int(d: dict, key: str, where: str, obj: str, *, minimum: int = 0) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not minimum <= v <= _INT_MAX:
        raise CorruptTieredObjectError(f"manifest {where}.{key} is {v!r}, not an integer >= {minimum}", obj=obj)
    return v


def _b64(text: object, what: str, obj: str) -> bytes:
    if not isinstance(text, str):
        raise CorruptTieredObjectError(f"manifest {what} is not a base64 string", obj=obj)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CorruptTieredObjectError(f"manifest {what} is not valid base64", obj=obj) from None


def _chunk_sizes(blob: bytes, obj: str) -> list[int]:
    """The plugin's binary list of transformed chunk sizes (``ChunkSizesBinaryCodec``): big-endian count, then
    for two or more values a base and a byte width, each value but the last as ``width`` bytes above the base, and
    the last value as a full int."""
    bad = CorruptTieredObjectError("manifest chunkIndex.transformedChunks is malformed", obj=obj)
    if len(blob) < 4:
        raise bad
    (count,) = struct.unpack_from(">i", blob, 0)
    if count < 0:
        raise bad
    if count == 0:
        return []
    if count == 1:
        if len(blob) != 8:
            raise bad
        return [struct.unpack_from(">i", blob, 4)[0]]
    if len(blob) < 9:
        raise bad
    base, width = struct.unpack_from(">iB", blob, 4)
    if not 1 <= width <= 4 or len(blob) != 9 + (count - 1) * width + 4 or base < 0:
        raise bad
    body = np.frombuffer(blob, dtype=np.uint8, count=(count - 1) * width, offset=9).reshape(count - 1, width)
    values = np.zeros(count - 1, dtype=np.int64)
    for col in range(width):
        values = (values << 8) | body[:, col]
    (last,) = struct.unpack_from(">i", blob, 9 + (count - 1) * width)
    out = (values + base).tolist() + [last]
    if last < 0 or max(out) > _INT_MAX:
        raise bad
    return out


def _chunk_index(d: object, obj: str) -> ChunkIndex:
    if not isinstance(d, dict):
        raise CorruptTieredObjectError("manifest has no chunkIndex object", obj=obj)
    kind = d.get("type")
    chunk = _int(d, "originalChunkSize", "chunkIndex", obj, minimum=1)
    size = _int(d, "originalFileSize", "chunkIndex", obj)
    count = -(-size // chunk)
    if kind == "fixed":
        each = _int(d, "transformedChunkSize", "chunkIndex", obj)
        final = _int(d, "finalTransformedChunkSize", "chunkIndex", obj)
        transformed = [each] * max(count - 1, 0) + ([final] if count else [])
    elif kind == "variable":
        blob = _b64(d.get("transformedChunks"), "chunkIndex.transformedChunks", obj)
        try:
            raw = decompress(CompressionType.ZSTD, blob, max_size=_MAX_CHUNK_LIST)
        except CorruptRecordError as exc:
            raise CorruptTieredObjectError(f"manifest chunkIndex.transformedChunks: {exc}", obj=obj) from None
        transformed = _chunk_sizes(raw, obj)
        if len(transformed) != count:
            raise CorruptTieredObjectError(f"manifest lists {len(transformed)} chunks for {size} bytes in chunks of "
                                           f"{chunk} ({count} expected)", obj=obj)  # fmt: skip
    else:
        raise CorruptTieredObjectError(f"manifest chunkIndex.type is {kind!r} (fixed or variable expected)", obj=obj)
    orig_size = np.full(count, chunk, dtype=np.int64)
    if count:
        orig_size[-1] = size - (count - 1) * chunk
    t_size = np.asarray(transformed, dtype=np.int64)
    t_pos = np.concatenate(([0], np.cumsum(t_size)[:-1])) if count else np.zeros(0, dtype=np.int64)
    return ChunkIndex(kind, chunk, size, np.arange(count, dtype=np.int64) * chunk, orig_size, t_pos.astype(np.int64),
                      t_size)  # fmt: skip


def _segment_indexes(d: object, obj: str) -> dict[str, tuple[int, int]]:
    if not isinstance(d, dict):
        raise CorruptTieredObjectError("manifest has no segmentIndexes object", obj=obj)
    out: dict[str, tuple[int, int]] = {}
    for name in INDEX_KINDS:
        part = d.get(name)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise CorruptTieredObjectError(f"manifest segmentIndexes.{name} is not an object", obj=obj)
        out[name] = (_int(part, "position", f"segmentIndexes.{name}", obj),
                     _int(part, "size", f"segmentIndexes.{name}", obj))  # fmt: skip
    parts = sorted(out.values())
    for (p1, s1), (p2, _) in zip(parts, parts[1:], strict=False):
        if p1 + s1 > p2:
            raise CorruptTieredObjectError("manifest segmentIndexes overlap each other", obj=obj)
    return out


def parse_manifest(data: bytes, *, obj: str) -> SegmentManifest:
    """Parse a ``.rsm-manifest`` (``obj`` names it in errors); raises CorruptTieredObjectError."""
    try:
        m = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptTieredObjectError(f"manifest is not JSON: {exc}", obj=obj) from None
    if not isinstance(m, dict):
        raise CorruptTieredObjectError("manifest is not a JSON object", obj=obj)
    if str(m.get("version")) != "1":
        raise CorruptTieredObjectError(f"manifest version {m.get('version')!r} (only 1 is known)", obj=obj)
    compression = m.get("compression", False)
    if not isinstance(compression, bool):
        raise CorruptTieredObjectError(f"manifest compression is {compression!r}, not a boolean", obj=obj)
    data_key = aad = None
    enc = m.get("encryption")
    if enc is not None:
        if not isinstance(enc, dict) or not isinstance(enc.get("dataKey"), str):
            raise CorruptTieredObjectError("manifest encryption has no dataKey", obj=obj)
        key_id, sep, wrapped = enc["dataKey"].partition(":")
        if not sep or not key_id or ":" in wrapped:
            raise CorruptTieredObjectError("manifest encryption.dataKey is not '<key pair id>:<base64>'", obj=obj)
        data_key = (key_id, _b64(wrapped, "encryption.dataKey", obj))
        aad = _b64(enc.get("aad"), "encryption.aad", obj)
    meta = m.get("remoteLogSegmentMetadata")
    return SegmentManifest(_chunk_index(m.get("chunkIndex"), obj), _segment_indexes(m.get("segmentIndexes"), obj),
                           compression, data_key, aad, meta if isinstance(meta, dict) else {})  # fmt: skip

"""A test-side writer of Aiven tiered-storage objects, laid out and transformed as the plugin's
``RemoteStorageManager.copyLogSegmentData`` does (chunks zstd-compressed then AES-GCM-encrypted as IV + ciphertext +
tag with the segment's AAD, indexes encrypted one chunk each, the data key wrapped with RSA-OAEP SHA3-512, a fixed
chunk index without compression and a variable one with it). It exists to make held-out archives: chunk sizes,
prefixes and key pairs the golden sets do not have. Independent of kafkalog.archive.tiered (only the libraries).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import cramjam
from Crypto.Cipher import PKCS1_OAEP
from Crypto.Hash import SHA3_512
from Crypto.PublicKey import RSA
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.conftest import GOLDEN

AIVEN = GOLDEN / "tiered-aiven" if GOLDEN is not None else None


@dataclass
class SegmentFiles:
    """What a broker hands the plugin for one segment (``LogSegmentData``) and its metadata."""

    base_offset: int
    end_offset: int
    segment_id: str
    log: bytes
    indexes: dict[str, bytes]  # manifest names -> bytes (absent: no such index)


def golden_segments() -> list[SegmentFiles]:
    """The five segments of the golden partition, with the inputs the plugin's run was given (RESULT.json)."""
    assert AIVEN is not None
    result = json.loads((AIVEN / "variants" / "plain-chunk512" / "RESULT.json").read_text())
    out = []
    for seg in result["segments"]:
        d = seg["logSegmentData"]
        files = {"offset": d["offsetIndex"], "timestamp": d["timeIndex"], "producerSnapshot": d["producerSnapshotIndex"],
                 "transaction": d["transactionIndex"]}  # fmt: skip
        indexes = {k: (AIVEN / v).read_bytes() for k, v in files.items() if v}
        indexes["leaderEpoch"] = d["leaderEpochIndexText"].encode()
        md = seg["metadata"]
        out.append(SegmentFiles(md["startOffset"], md["endOffset"], md["segmentId"], (AIVEN / d["logSegment"]).read_bytes(),
                                indexes))  # fmt: skip
    return out


def _chunk_sizes(values: list[int]) -> bytes:
    if not values:
        return struct.pack(">i", 0)
    if len(values) == 1:
        return struct.pack(">ii", 1, values[0])
    base = min(values[:-1])
    width = max(1 if v - base <= 0xFF else 2 if v - base <= 0xFFFF else 3 if v - base <= 0xFFFFFF else 4
                for v in values[:-1])  # fmt: skip
    body = b"".join(struct.pack(">i", v - base)[4 - width :] for v in values[:-1])
    return struct.pack(">iiB", len(values), base, width) + body + struct.pack(">i", values[-1])


def new_key_pair(dirpath: Path, bits: int = 2048) -> tuple[Path, Path]:
    key = RSA.generate(bits)
    dirpath.mkdir(parents=True, exist_ok=True)
    priv, pub = dirpath / "private.pem", dirpath / "public.pem"
    priv.write_bytes(key.export_key(pkcs=8))
    pub.write_bytes(key.public_key().export_key())
    return priv, pub


def write_rsm_properties(path: Path, *, chunk_size: int, compression: bool, key_id: str | None = None,
                         private: Path | None = None, public: Path | None = None, prefix: str = "") -> None:  # fmt: skip
    lines = [f"chunk.size={chunk_size}", f"compression.enabled={str(compression).lower()}"]
    if prefix:
        lines.append(f"key.prefix={prefix}")
    if key_id is not None:
        lines += ["encryption.enabled=true", f"encryption.key.pair.id={key_id}", f"encryption.key.pairs={key_id}",
                  f"encryption.key.pairs.{key_id}.private.key.file={os.path.relpath(private, path.parent)}",
                  f"encryption.key.pairs.{key_id}.public.key.file={os.path.relpath(public, path.parent)}"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def write_segment(root: Path, seg: SegmentFiles, *, chunk_size: int, compression: bool, prefix: str = "",
                  topic: str = "tiered", topic_id: str = "dGllcmVkAAAAAAAAAAAEBQ", partition: int = 0,
                  key_id: str | None = None, public: Path | None = None) -> Path:  # fmt: skip
    """Upload one segment under ``root`` (a bucket as a dir); return the ``.log`` object's path."""
    aes = aad = data_key = None
    if key_id is not None:
        data_key, aad = os.urandom(32), os.urandom(32)
        aes = AESGCM(data_key)

    def transform(chunk: bytes, compress: bool) -> bytes:
        if compress:
            chunk = bytes(cramjam.zstd.compress(chunk))
        if aes is not None:
            iv = os.urandom(12)
            chunk = iv + aes.encrypt(iv, chunk, aad)
        return chunk

    chunks = [transform(seg.log[i : i + chunk_size], compression) for i in range(0, len(seg.log), chunk_size)]
    sizes = [len(c) for c in chunks]
    if compression:
        blob = bytes(cramjam.zstd.compress(_chunk_sizes(sizes)))
        index = {"type": "variable", "originalChunkSize": chunk_size, "originalFileSize": len(seg.log),
                 "transformedChunks": base64.b64encode(blob).decode()}  # fmt: skip
    else:
        over = 28 if aes is not None else 0
        index = {"type": "fixed", "originalChunkSize": chunk_size, "originalFileSize": len(seg.log),
                 "transformedChunkSize": chunk_size + over, "finalTransformedChunkSize": sizes[-1]}  # fmt: skip
    parts, positions, pos = [], {}, 0
    for name in ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction"):
        if name not in seg.indexes:
            positions[name] = None
            continue
        data = transform(seg.indexes[name], False)
        parts.append(data)
        positions[name] = {"position": pos, "size": len(data)}
        pos += len(data)
    manifest: dict = {"version": "1", "chunkIndex": index, "segmentIndexes": positions, "compression": compression}
    if aes is not None:
        wrapped = PKCS1_OAEP.new(RSA.import_key(public.read_bytes()), hashAlgo=SHA3_512).encrypt(data_key)
        manifest["encryption"] = {"dataKey": f"{key_id}:{base64.b64encode(wrapped).decode()}",
                                  "aad": base64.b64encode(aad).decode()}  # fmt: skip
    manifest["remoteLogSegmentMetadata"] = {"startOffset": seg.base_offset, "endOffset": seg.end_offset,
                                            "remoteLogSegmentId": {"id": seg.segment_id}}  # fmt: skip
    stem = root / f"{prefix}{topic}-{topic_id}" / str(partition) / f"{seg.base_offset:020d}-{seg.segment_id}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{stem}.log").write_bytes(b"".join(chunks))
    Path(f"{stem}.indexes").write_bytes(b"".join(parts))
    Path(f"{stem}.rsm-manifest").write_text(json.dumps(manifest))
    return Path(f"{stem}.log")

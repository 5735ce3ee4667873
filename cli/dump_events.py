"""What ``kafkalog dump`` prints: one :class:`~kafkalog_cli.output.Event` per line kind, each with Kafka's text shape
(DumpLogSegments' words, so grep scripts written against Kafka keep working) and its JSON fields (docs/cli.md).
"""

from __future__ import annotations

import json as _json
import os
import re
from dataclasses import dataclass
from typing import Any

from kafkalog.metadata.dump_text import RecordContents, control_contents, decode_contents

from .output import Event

DECODERS = ("string", "hex", "json", "none")
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
RECORD_INDENT = "|"

def _b(value: bool) -> str:
    return "true" if value else "false"


def _codec_name(batch: Any) -> str:
    try:
        return batch.compression.kafka_name
    except Exception:  # noqa: BLE001 - an unknown codec id in a corrupt batch is still dumped
        return f"unknown({batch.attributes & 0x07})"


def _ts_type_name(batch: Any) -> str:
    return batch.timestamp_type.kafka_name


def optional_long(value: int | None) -> str:
    """Java's OptionalLong.toString, which Kafka prints for deleteHorizonMs and currentTxnFirstOffset."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def java_file_path(path: str) -> str:
    """The path as ``java.io.File`` prints it (Kafka's ``Dumping $file``): repeated slashes collapsed, a trailing
    slash dropped; ``.`` and ``..`` are kept."""
    collapsed = re.sub("/+", "/", path)
    return collapsed[:-1] if len(collapsed) > 1 and collapsed.endswith("/") else collapsed


def java_absolute_path(path: str) -> str:
    """``new File(path).getAbsolutePath``, which names a file in Kafka's end-of-run reports: relative paths are
    joined to the working dir without resolving ``.`` or ``..``."""
    return java_file_path(path if path.startswith("/") else f"{os.getcwd()}/{path}")


# --- decoders ---------------------------------------------------------------------------------------------------


def _cont(b: int) -> bool:
    return b & 0xC0 == 0x80


def java_utf8(raw: bytes) -> str:
    """``new String(raw, UTF_8)`` as Java 17 decodes it (``String.decodeUTF8_UTF16``): Kafka's StringDecoder.

    Valid UTF-8 reads as in Python. Invalid input differs from Python's ``replace`` where Java's decoder takes a
    3-byte lead with any two continuation bytes as one unit (a UTF-16 surrogate ``ED A0 80``, or ``ED BB`` before a
    non-continuation byte, is one U+FFFD, not two or three) and where a truncated sequence ends the input."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    sp, sl = 0, len(raw)
    while sp < sl:
        b1 = raw[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < sl:
                if _cont(raw[sp]):
                    out.append(chr(((b1 & 0x1F) << 6) | (raw[sp] & 0x3F)))
                    sp += 1
                else:
                    out.append("\ufffd")
                continue
            out.append("\ufffd")
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < sl:
                b2, b3 = raw[sp], raw[sp + 1]
                if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append("\ufffd")
                    sp += 0 if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append("\ufffd" if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < sl and ((b1 == 0xE0 and raw[sp] & 0xE0 == 0x80) or not _cont(raw[sp])):
                out.append("\ufffd")
                continue
            out.append("\ufffd")
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < sl:
                b2, b3, b4 = raw[sp], raw[sp + 1], raw[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append("\ufffd")  # malformed4: how many bytes the bad sequence takes
                    if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80)
                            or not _cont(b2)):
                        pass
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < sl and ((b1 == 0xF0 and not 0x90 <= raw[sp] <= 0xBF)
                                          or (b1 == 0xF4 and raw[sp] & 0xF0 != 0x80) or not _cont(raw[sp]))):
                out.append("\ufffd")
                continue
            sp += 1
            out.append("\ufffd")
            if sp < sl and not _cont(raw[sp]):
                continue
            break
        else:
            out.append("\ufffd")
    return "".join(out)


def decode_bytes(data: bytes, decoder: str) -> tuple[str, Any]:
    """(text form, JSON value) of a key or value under ``decoder``.

    ``string`` is Kafka's StringDecoder (UTF-8, bad bytes become U+FFFD as in Java); ``json`` parses the bytes as JSON and
    falls back to the string form when they are not JSON (dumping must not stop on one odd record).
    """
    if decoder == "hex":
        text = bytes(data).hex()
        return text, text
    s = java_utf8(bytes(data))
    if decoder == "json":
        try:
            value = _json.loads(s)
        except ValueError:
            return s, s
        return _json.dumps(value, separators=(",", ":"), ensure_ascii=False), value
    return s, s


# --- events -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class FileHeader(Event):
    """``Dumping <file>`` (and ``Log starting offset: N`` for a ``.log``)."""

    path: str
    kind: str
    start_offset: int | None = None
    #: a KRaft snapshot's (end offset, epoch); None for ``bootstrap.checkpoint``
    snapshot: tuple[int, int] | None = None
    type = "file"  # type: ignore[misc]

    def text(self) -> str:
        line = f"Dumping {java_file_path(self.path)}"
        if self.kind == "log" and self.start_offset is not None:
            line += f"\nLog starting offset: {self.start_offset}"
        elif self.kind == "kraft-snapshot":
            line += ("\nKRaft bootstrap snapshot" if self.snapshot is None
                     else f"\nSnapshot end offset: {self.snapshot[0]}, epoch: {self.snapshot[1]}")
        return line

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.path, "kind": self.kind}
        if self.start_offset is not None:
            out["startOffset"] = self.start_offset
        if self.snapshot is not None:
            out["snapshotEndOffset"], out["snapshotEpoch"] = self.snapshot
        return out


@dataclass(slots=True)
class BatchEvent(Event):
    batch: Any
    type = "batch"  # type: ignore[misc]

    def text(self) -> str:
        b = self.batch
        if b.magic >= 2:
            head = (
                f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count}"
                f" baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id}"
                f" producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch}"
                f" isTransactional: {_b(b.is_transactional)} isControl: {_b(b.is_control)}"
                f" deleteHorizonMs: {optional_long(b.delete_horizon_ms)}"
            )
        else:
            head = f"offset: {b.last_offset}"
        return (
            f"{head} position: {b.position} {_ts_type_name(b)}: {b.max_timestamp} size: {b.size_in_bytes}"
            f" magic: {b.magic} compresscodec: {_codec_name(b)} crc: {b.crc} isvalid: {_b(b.is_valid())}"
        )

    def fields(self) -> dict[str, Any]:
        b = self.batch
        out: dict[str, Any] = {"baseOffset": b.base_offset, "lastOffset": b.last_offset}
        if b.magic >= 2:
            out.update(
                count=b.record_count,
                baseSequence=b.base_sequence,
                lastSequence=b.last_sequence,
                producerId=b.producer_id,
                producerEpoch=b.producer_epoch,
                partitionLeaderEpoch=b.partition_leader_epoch,
                isTransactional=b.is_transactional,
                isControl=b.is_control,
                deleteHorizonMs=b.delete_horizon_ms,
            )
        out.update(
            {
                "position": b.position,
                # stable keys for scripts; the Kafka-named key (CreateTime/LogAppendTime) stays for api.md
                "timestamp": b.max_timestamp,
                "timestampType": _ts_type_name(b),
                _ts_type_name(b): b.max_timestamp,
                "size": b.size_in_bytes,
                "magic": b.magic,
                "compresscodec": _codec_name(b),
                "crc": b.crc,
                "isvalid": b.is_valid(),
            }
        )
        return out


@dataclass(slots=True)
class RecordEvent(Event):
    batch: Any
    record: Any
    skip_metadata: bool
    print_data: bool
    key_decoder: str
    value_decoder: str
    #: an internal topic's decoder (``cluster-metadata``, ``offsets``, ``transaction-log``), or None
    internal: str | None = None
    type = "record"  # type: ignore[misc]

    def _contents(self) -> list[tuple[str, str, Any]]:
        """(label, text, json) of the key and payload Kafka would print (none for control records)."""
        if not self.print_data or self.batch.is_control:
            return []
        r = self.record
        if self.internal is not None:
            decoded: RecordContents = decode_contents(self.internal, r.offset, r.key, r.value)
            out = []
            if decoded.key_text is not None:
                out.append(("key", decoded.key_text, decoded.key))
            if decoded.payload_text is not None:
                out.append(("payload", decoded.payload_text, decoded.payload))
            return out
        out = []
        if r.key is not None and self.key_decoder != "none":
            out.append(("key", *decode_bytes(r.key, self.key_decoder)))
        if r.value is not None and self.value_decoder != "none":
            out.append(("payload", *decode_bytes(r.value, self.value_decoder)))
        return out

    def _control(self) -> tuple[str, dict[str, Any]] | None:
        if not self.batch.is_control:
            return None
        found = control_contents(self.record.key, self.record.value)
        return found.text, found.fields

    def text(self) -> str | None:
        r, b = self.record, self.batch
        parts: list[str] = []
        if not self.skip_metadata:
            line = (
                f"{RECORD_INDENT} offset: {r.offset} {_ts_type_name(b)}: {r.timestamp}"
                f" keySize: {_size(r.key)} valueSize: {_size(r.value)}"
            )
            if b.magic >= 2:
                line += f" sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]"
            else:
                # Legacy messages carry their own CRC (Kafka prints the inner message's for compressed wrappers),
                # and Kafka's format string ends in a stray "}" (``crc: ${r.checksum}}``), printed on every one.
                line += f" isValid: {_b(r.crc_valid)} crc: {r.crc}}}"
            control = self._control()
            if control is not None:
                line += control[0]
            parts.append(line)
        # Kafka: the key follows "| " (or " " after the metadata); the payload always follows a single space
        prefix = f"{RECORD_INDENT} " if self.skip_metadata else " "
        for label, text, _ in self._contents():
            parts.append(f"{prefix if label == 'key' else ' '}{label}: {text}")
        if not parts:
            return None  # Kafka prints an empty line here; nothing is more useful to a reader
        return "".join(parts)

    def fields(self) -> dict[str, Any]:
        r, b = self.record, self.batch
        out: dict[str, Any] = {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": _ts_type_name(b),
            "keySize": _size(r.key),
            "valueSize": _size(r.value),
        }
        if b.magic >= 2:
            out["sequence"] = r.sequence
            out["headerKeys"] = [k for k, _ in r.headers]
        else:
            out["headerKeys"] = []
            out["isValid"] = r.crc_valid
            out["crc"] = r.crc
        control = self._control()
        if control is not None:
            out.update(control[1])
        for label, _, value in self._contents():
            out[label] = value
        return out


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


@dataclass(slots=True)
class InvalidBytes(Event):
    """``Found N invalid bytes at the end of <name>`` (stdout, as Kafka prints it)."""

    name: str
    position: int
    size: int
    type = "invalid_bytes"  # type: ignore[misc]

    def text(self) -> str:
        return f"Found {self.size} invalid bytes at the end of {self.name}"

    def fields(self) -> dict[str, Any]:
        return {"file": self.name, "position": self.position, "size": self.size}


@dataclass(slots=True)
class Report(Event):
    """A block of problems for one file (stderr in text mode; one JSON object per item)."""

    header: str
    lines: list[str]
    items: list[dict[str, Any]]
    type: str = "problem"  # type: ignore[misc]
    is_problem = True  # type: ignore[misc]

    def text(self) -> str:
        return "\n".join([self.header, *self.lines])

    def fields(self) -> dict[str, Any]:  # pragma: no cover - to_json is used
        return {}

    def to_json(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"type": self.type, **item} for item in self.items]

"""What ``kafka-dump-log.sh`` prints for a record of an internal topic: its decoders' key and payload, and the body
of KRaft control records, as text (Kafka's exact spelling) and as JSON values.

The decoders mirror DumpLogSegments' parsers: ``--cluster-metadata-decoder`` (no key; the payload is
``{"type","version","data"}``), ``--offsets-decoder`` (key ``{"type","data"}``, payload ``{"version","data"}`` with
versions as strings, ``<DELETE>`` for a tombstone) and ``--transaction-log-decoder`` (Kafka's one-line forms). A
record that does not decode is printed the way Kafka prints it (``Error at ..., skipping. ...``), never raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRecordError, MessageDecodeError, UnknownRecordTypeError
from ..records.control import ControlRecordType, EndTransactionMarker, parse_control_type
from .codec import dumps_java
from .decode import decode_control_record, decode_group_record, decode_metadata_record, decode_txn_record
from .group_records import DUMPED_TYPES
from .kraft_records import PRINTED_AS

__all__ = ["DECODERS", "RecordContents", "ControlContents", "decode_contents", "control_contents"]

#: decoder name -> kafka-dump-log.sh's option
DECODERS = {
    "cluster-metadata": "--cluster-metadata-decoder",
    "offsets": "--offsets-decoder",
    "transaction-log": "--transaction-log-decoder",
}

_LEADER_CHANGE_JSON = "LeaderChange"


@dataclass(frozen=True, slots=True)
class RecordContents:
    """The decoded ``key``/``payload`` of one record: the text Kafka prints and the JSON value (an object when
    the text is JSON); ``None`` where Kafka prints nothing. ``error`` says why the record did not decode."""

    key_text: str | None
    payload_text: str | None
    key: Any = None
    payload: Any = None
    error: MessageDecodeError | None = None


def decode_contents(decoder: str, offset: int, key: bytes | None, value: bytes | None) -> RecordContents:
    """Key and payload of a data record under ``decoder`` (``cluster-metadata``, ``offsets``, ``transaction-log``)."""
    if decoder == "cluster-metadata":
        return _metadata(offset, value)
    if decoder == "offsets":
        return _offsets(offset, key, value)
    if decoder == "transaction-log":
        return _txn(offset, key, value)
    raise ValueError(f"unknown decoder {decoder!r}")


def _metadata(offset: int, value: bytes | None) -> RecordContents:
    try:
        record = decode_metadata_record(value)
    except MessageDecodeError as exc:
        text = f"Error at {offset}, skipping. {exc.kafka_text or exc}"
        return RecordContents(None, text, None, text, exc)
    data = record.to_json()
    return RecordContents(None, dumps_java(data), None, data)


def _offsets(offset: int, key: bytes | None, value: bytes | None) -> RecordContents:
    try:
        record = decode_group_record(key, value)
        if record.record_type not in DUMPED_TYPES:
            raise UnknownRecordTypeError("group coordinator", record.record_type)
    except UnknownRecordTypeError as exc:
        text = f"Unknown record type {exc.type_id} at offset {offset}, skipping."
        return RecordContents(text, None, text, None, exc)
    except MessageDecodeError as exc:
        text = f"Error at offset {offset}, skipping. {exc.kafka_text or exc}"
        return RecordContents(text, None, text, None, exc)
    key_json = {"type": str(record.record_type), "data": record.key_json()}
    value_json = record.value_json()
    if value_json is None:
        return RecordContents(dumps_java(key_json), "<DELETE>", key_json, "<DELETE>")
    payload = {"version": str(record.value_version), "data": value_json}
    return RecordContents(dumps_java(key_json), dumps_java(payload), key_json, payload)


def _txn(offset: int, key: bytes | None, value: bytes | None) -> RecordContents:
    try:
        record = decode_txn_record(key, value)
    except MessageDecodeError as exc:
        text = f"Error at offset {offset}, skipping. {exc}"
        return RecordContents(text, None, text, None, exc)
    key_text, payload = record.key_text(), record.value_text()
    return RecordContents(key_text, payload, key_text, payload)


@dataclass(frozen=True, slots=True)
class ControlContents:
    """What follows a control record's metadata: ``text`` (with its leading space) and the JSON fields."""

    text: str
    fields: dict[str, Any]
    error: Exception | None = None


def control_contents(key: bytes | None, value: bytes | None) -> ControlContents:
    """A control record as DumpLogSegments prints it: transaction markers, the KRaft records with their JSON
    body (``SnapshotHeader {...}``), any other type as ``controlType: NAME(id)``."""
    try:
        ctype = parse_control_type(key)
        if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = EndTransactionMarker.from_key_value(key, value)
            return ControlContents(
                f" endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}",
                {"endTxnMarker": marker.control_type.name, "coordinatorEpoch": marker.coordinator_epoch},
            )
        type_id = int.from_bytes(bytes(key[2:4]), "big", signed=True)  # type: ignore[index]
        if ctype == ControlRecordType.UNKNOWN:
            return ControlContents(f" controlType: UNKNOWN({type_id})", {"controlType": f"UNKNOWN({type_id})"})
        word = PRINTED_AS.get(ctype)
        if word is None:  # LEADER_CHANGE: Kafka prints its type only, whatever the body holds
            text = f" controlType: {ctype.name}({type_id})"
            try:
                body = decode_control_record(ctype, value).to_json()
            except MessageDecodeError as exc:
                return ControlContents(text, {"controlType": ctype.name, "controlError": str(exc)}, exc)
            return ControlContents(text, {"controlType": ctype.name, _LEADER_CHANGE_JSON: body})
        body = decode_control_record(ctype, value).to_json()
        return ControlContents(f" {word} {dumps_java(body)}", {"controlType": ctype.name, word: body})
    except (InvalidRecordError, MessageDecodeError) as exc:
        return ControlContents(f" controlError: {exc}", {"controlError": str(exc)}, exc)

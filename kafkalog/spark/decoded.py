"""The DataSource option ``decode=metadata|offsets|txn``: each row of an internal topic's archive also gets its
record decoded by :mod:`kafkalog.metadata` (type, version, fields as a JSON string), or why it did not decode.

Columns added after the others: ``decoded_type`` (``PARTITION_RECORD``, ``OffsetCommit``, ``TransactionLog``, a
control record's type), ``decoded_version`` (the record's or value's version; null for a tombstone),
``decoded`` (JSON: the metadata record's ``data``; ``{"key", "value"}`` for the coordinators' records, ``value``
null for a tombstone; a control record's body), ``decode_error`` (null when it decoded).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InvalidArgumentError, InvalidRecordError, MessageDecodeError
from ..metadata.decode import decode_control_record, decode_group_record, decode_metadata_record, decode_txn_record
from ..records.control import ControlRecordType, EndTransactionMarker, parse_control_type

__all__ = ["DECODE_OPTIONS", "DECODED_SCHEMA", "DECODED_COLUMNS", "NEEDED_COLUMNS", "decode_option", "decode_row",
           "split_schema", "add_decoded"]

DECODE_OPTIONS = ("metadata", "offsets", "txn")
DECODED_SCHEMA = "decoded_type string, decoded_version int, decoded string, decode_error string"
DECODED_COLUMNS = ("decoded_type", "decoded_version", "decoded", "decode_error")
#: the scanned columns a decoder reads
NEEDED_COLUMNS = ("key", "value", "is_control")


def decode_option(raw: str | None) -> str | None:
    if raw is None:
        return None
    value = raw.strip().lower()
    if value not in DECODE_OPTIONS:
        raise InvalidArgumentError(f"kafkalog option decode must be one of {', '.join(DECODE_OPTIONS)}, not {raw!r}")
    return value


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=lambda b: bytes(b).hex())


def decode_row(decoder: str, key: bytes | None, value: bytes | None, is_control: bool
               ) -> tuple[str | None, int | None, str | None, str | None]:
    """(decoded_type, decoded_version, decoded JSON, decode_error) of one record."""
    try:
        if is_control:
            ctype = parse_control_type(key)
            if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                marker = EndTransactionMarker.from_key_value(key, value)
                return ctype.name, marker.version, _json({"coordinatorEpoch": marker.coordinator_epoch}), None
            if ctype == ControlRecordType.UNKNOWN:
                return ctype.name, None, None, "unknown control record type"
            body = decode_control_record(ctype, value)
            return ctype.name, body.version, _json(body.to_json()), None
        if decoder == "metadata":
            record = decode_metadata_record(value)
            return record.type_name, record.version, _json(record.to_json()["data"]), None
        if decoder == "offsets":
            group = decode_group_record(key, value)
            return (group.name.removesuffix("Key"), group.value_version,
                    _json({"key": group.key_json(), "value": group.value_json()}), None)
        txn = decode_txn_record(key, value)
        doc = None if txn.value is None else {**txn.value, "state": txn.state,
                                              "partitions": [[t, p] for t, p in txn.partitions]}
        return "TransactionLog", txn.value_version, _json({"transactionalId": txn.transactional_id, "value": doc}), None
    except (MessageDecodeError, InvalidRecordError) as exc:
        return None, None, None, str(exc)


def split_schema(schema: Any) -> tuple[Any, Any]:
    """(the StructType to scan, the pyarrow schema to emit) for Spark's schema under ``decode``: the decoded columns
    are left out of the scan, and the columns a decoder reads are scanned even when the schema does not name them."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import StructType

    from .scan import arrow_schema

    ours = {f.name: f for f in from_arrow_schema(arrow_schema()).fields}
    scan = [f for f in schema.fields if f.name.lower() not in DECODED_COLUMNS]
    have = {f.name.lower() for f in scan}
    scan += [ours[name] for name in NEEDED_COLUMNS if name not in have]
    return StructType(scan), to_arrow_schema(schema, timezone="UTC")


def add_decoded(batch: Any, decoder: str, schema: Any) -> Any:
    """A scanned ``batch`` (holding NEEDED_COLUMNS) as a batch of ``schema`` (Spark's columns in Spark's order),
    the decoded columns computed from each record's key, value and is_control."""
    import pyarrow as pa

    scanned = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    rows = [decode_row(decoder, k, v, c) for k, v, c in zip(
        scanned["key"].to_pylist(), scanned["value"].to_pylist(), scanned["is_control"].to_pylist(), strict=True)]
    columns = []
    for field in schema:
        name = field.name.lower()
        if name in DECODED_COLUMNS:
            i = DECODED_COLUMNS.index(name)
            columns.append(pa.array([r[i] for r in rows], type=field.type))
        else:
            columns.append(scanned[name])
    return pa.RecordBatch.from_arrays(columns, schema=schema)

"""Decoding one record of ``__cluster_metadata``, ``__consumer_offsets`` or ``__transaction_state`` with the tables.

Each ``decode_*`` returns a small frozen object and raises a :class:`~kafkalog.errors.MessageDecodeError` subclass
for anything it cannot read (unknown type, unsupported version, malformed bytes); nothing else escapes for bad input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..checkpoint.meta_properties import java_string_hash
from ..errors import MalformedRecordError, MessageDecodeError, UnknownRecordTypeError
from ..records.control import ControlRecordType
from .codec import Reader, read_message, to_json
from .group_records import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, GROUP_KEYS, GROUP_VALUES
from .kraft_records import CONTROL_MESSAGES
from .metadata_records import RECORD_TYPES, TYPE_NAMES
from .schema import Message
from .txn_records import TXN_KEY, TXN_STATES, TXN_VALUE

__all__ = [
    "MetadataRecord",
    "ControlMessage",
    "GroupRecord",
    "TxnRecord",
    "decode_metadata_record",
    "decode_control_record",
    "decode_group_record",
    "decode_txn_record",
    "read_framed",
    "scala_set_order",
]

#: MetadataRecordSerde's only frame version
FRAME_VERSION = 1


def _version(r: Reader, what: str) -> int:
    """MetadataRecordSerde's unsignedIntToShort."""
    try:
        value = r.uvarint(what)
    except MalformedRecordError as exc:
        raise MalformedRecordError(str(exc), kafka_text=f"Error while reading {what}") from None
    if value > 0x7FFF:
        raise MalformedRecordError(f"Value for {what} was too large.", kafka_text=f"Value for {what} was too large.")
    return value


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A metadata record: ``type_name`` as ``MetadataRecordType`` prints it, ``data`` with JSON field names."""

    api_key: int
    version: int
    data: dict[str, Any]

    @property
    def type_name(self) -> str:
        return TYPE_NAMES[self.api_key]

    @property
    def schema(self) -> Message:
        return RECORD_TYPES[self.api_key]

    def to_json(self) -> dict[str, Any]:
        """``{"type", "version", "data"}`` as kafka-dump-log.sh's cluster metadata decoder prints it."""
        return {"type": self.type_name, "version": self.version,
                "data": to_json(self.schema.fields, self.version, self.data)}


def decode_metadata_record(value: bytes | bytearray | memoryview | None) -> MetadataRecord:
    """A ``__cluster_metadata`` record value (frame version, api key, version as unsigned varints, then the record)."""
    return MetadataRecord(*read_framed(value, RECORD_TYPES, "metadata"))


def read_framed(value: bytes | bytearray | memoryview | None, schemas: dict[int, Message], family: str
                ) -> tuple[int, int, dict[str, Any]]:
    """(api key, version, data) of a value framed by Kafka's ``AbstractApiMessageSerde`` (``__cluster_metadata``'s
    ``MetadataRecordSerde``, ``__remote_log_metadata``'s ``RemoteLogMetadataSerde``), ``schemas`` by api key."""
    if value is None:
        raise MalformedRecordError(f"{family} record without a value")
    r = Reader(value)
    frame = _version(r, "frame version")
    if frame == 0:
        text = ("Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
                "release of KRaft in 2.8 to newer versions are not supported.")
        raise MalformedRecordError(text, kafka_text=text)
    if frame != FRAME_VERSION:
        text = (f"Could not deserialize metadata record due to unknown frame version {frame}"
                f"(only frame version {FRAME_VERSION} is supported)")
        raise MalformedRecordError(text, kafka_text=text)
    api_key = _version(r, "type")
    version = _version(r, "version")
    schema = schemas.get(api_key)
    if schema is None:
        raise UnknownRecordTypeError(
            family, api_key,
            kafka_text=f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}",
        )
    try:
        data = read_message(schema, r, version, exact=False)
    except MessageDecodeError as exc:
        exc.kafka_text = f"Failed to deserialize record with type {api_key}"
        raise
    if r.remaining:
        raise MalformedRecordError(f"{r.remaining} byte(s) left after {schema.name} v{version}",
                                   kafka_text=f"Found {r.remaining} byte(s) of garbage after {api_key}")
    return api_key, version, data


@dataclass(frozen=True, slots=True)
class ControlMessage:
    """A KRaft control record's message (leader change, snapshot header/footer, kraft.version, voters)."""

    control_type: ControlRecordType
    version: int
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return to_json(CONTROL_MESSAGES[self.control_type].fields, self.version, self.data)


def decode_control_record(control_type: ControlRecordType, value: bytes | bytearray | memoryview | None
                          ) -> ControlMessage:
    """The message of a KRaft control record; its leading int16 ``Version`` field is the version it is read at."""
    schema = CONTROL_MESSAGES.get(control_type)
    if schema is None:
        raise UnknownRecordTypeError("KRaft control", int(control_type))
    if value is None:
        raise MalformedRecordError(f"{schema.name} without a value")
    r = Reader(value)
    version = r.fixed("int16", f"{schema.name} version")
    r.pos = 0
    return ControlMessage(control_type, version, read_message(schema, r, version))


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A ``__consumer_offsets`` record: its type (the key's version), key, and value (None for a tombstone)."""

    record_type: int
    key: dict[str, Any]
    value_version: int | None
    value: dict[str, Any] | None

    @property
    def name(self) -> str:
        return GROUP_KEYS[self.record_type].name

    def key_json(self) -> dict[str, Any]:
        return to_json(GROUP_KEYS[self.record_type].fields, self.record_type, self.key)

    def value_json(self) -> dict[str, Any] | None:
        """The value as the offsets decoder prints it: a classic consumer group's member subscription and
        assignment bytes are expanded when they parse (kept as base64 when they do not, as Kafka does)."""
        if self.value is None or self.value_version is None:
            return None
        out = to_json(GROUP_VALUES[self.record_type].fields, self.value_version, self.value)
        if self.record_type == 2 and out.get("protocolType") == "consumer":
            for member, raw in zip(out.get("members") or [], self.value.get("members") or [], strict=False):
                for name, schema in (("subscription", CONSUMER_SUBSCRIPTION), ("assignment", CONSUMER_ASSIGNMENT)):
                    if name in member:
                        expanded = _consumer_protocol(schema, raw.get(name))
                        if expanded is not None:
                            member[name] = expanded
        return out


def _consumer_protocol(schema: Message, data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        r = Reader(data)
        version = r.fixed("int16", schema.name)
        return to_json(schema.fields, version, read_message(schema, r, version, exact=False))
    except MessageDecodeError:
        return None


def _versioned(data: bytes | bytearray | memoryview | None, what: str) -> tuple[Reader, int]:
    """A coordinator key or value: its leading int16 version and a reader after it."""
    if data is None:
        raise MalformedRecordError(f"no {what}")
    r = Reader(data)
    try:
        return r, r.fixed("int16", f"{what} version")
    except MalformedRecordError as exc:
        raise MalformedRecordError(str(exc), kafka_text=f"Could not read version from {what}'s buffer.") from None


def _coordinator_message(schema: Message, r: Reader, version: int, what: str) -> dict[str, Any]:
    """CoordinatorRecordSerde.readMessage: the version is not checked against the schema's and bytes after the
    message are ignored, as Kafka's coordinators read them."""
    try:
        return read_message(schema, r, version, exact=False, check_version=False)
    except MessageDecodeError as exc:
        exc.kafka_text = (f"Could not read record with version {version} from {what}'s buffer due to: "
                          f"{exc.kafka_text or 'null'}.")
        raise


def decode_group_record(key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
                        ) -> GroupRecord:
    """A ``__consumer_offsets`` record (GroupCoordinatorRecordSerde's layout)."""
    r, record_type = _versioned(key, "key")
    key_schema = GROUP_KEYS.get(record_type)
    if key_schema is None:
        raise UnknownRecordTypeError("group coordinator", record_type)
    key_data = _coordinator_message(key_schema, r, record_type, "key")
    if value is None:
        return GroupRecord(record_type, key_data, None, None)
    rv, version = _versioned(value, "value")
    return GroupRecord(record_type, key_data, version, _coordinator_message(GROUP_VALUES[record_type], rv, version,
                                                                            "value"))


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A ``__transaction_state`` record; ``value`` None is the tombstone of an expired transactional id."""

    key_version: int
    transactional_id: str | None
    value_version: int | None
    value: dict[str, Any] | None

    @property
    def state(self) -> str | None:
        return None if self.value is None else TXN_STATES[self.value["transactionStatus"]]

    @property
    def partitions(self) -> list[tuple[str, int]]:
        """The transaction's partitions, in the order the coordinator's Scala set iterates them (Empty: none)."""
        if self.value is None or self.state == "Empty":
            return []
        groups = [[(p["topic"], pid) for pid in p["partitionIds"]] for p in self.value["transactionPartitions"] or []]
        return scala_set_order(groups)

    def key_text(self) -> str:
        if self.transactional_id is None:
            return f"unknown::version={self.key_version}"
        return f"transaction_metadata::transactionalId={self.transactional_id}"

    def value_text(self) -> str | None:
        """``TransactionLog.formatRecordKeyAndValue``'s payload (None for an unknown key version)."""
        if self.transactional_id is None:
            return None
        v = self.value
        if v is None:
            return "<DELETE>"
        parts = ",".join(f"{t}-{p}" for t, p in self.partitions)
        return (
            f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={self.state},"
            f"partitions=[{parts}],txnLastUpdateTimestamp={v['transactionLastUpdateTimestampMs']},"
            f"txnTimeoutMs={v['transactionTimeoutMs']}"
        )


def decode_txn_record(key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
                      ) -> TxnRecord:
    """A ``__transaction_state`` record; a key version other than 0 is an unknown key (no value is read)."""
    r, key_version = _versioned(key, "key")
    if key_version != 0:
        return TxnRecord(key_version, None, None, None)
    txn_id = read_message(TXN_KEY, r, 0, exact=False)["transactionalId"]
    if value is None:
        return TxnRecord(0, txn_id, None, None)
    rv, version = _versioned(value, "value")
    data = read_message(TXN_VALUE, rv, version, exact=False)
    if data["transactionStatus"] not in TXN_STATES:
        raise MalformedRecordError(
            f"Unknown transaction state byte {data['transactionStatus']} from the transaction status message"
        )
    return TxnRecord(0, txn_id, version, data)


# --- Scala's mutable.HashSet iteration order --------------------------------------------------------------------


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _improve(h: int) -> int:
    u = h & 0xFFFFFFFF
    return _i32(u ^ (u >> 16))  # mutable.HashSet/HashMap.improveHash


def _improved_hash(topic: str, partition: int) -> int:
    return _improve(31 * _i32(31 + partition) + java_string_hash(topic))  # TopicPartition.hashCode


def _table_size_for(capacity: int) -> int:
    n = max(capacity - 1, 4)
    return min((1 << (n.bit_length() - 1)) * 2, 1 << 30)


def scala_set_order(groups: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """The iteration order of a Scala 2.13 ``mutable.HashSet[TopicPartition]`` filled with ``++=`` once per group:
    buckets in index order, each bucket sorted by hash (the order ``TransactionMetadata.topicPartitions`` prints).

    Each group arrives as ``partitionIds.map(...).toSet``. ``addAll`` first sizes the table for the group alone
    (``sizeHint(knownSize)``); a set of up to 4 elements (``Set1``..``Set4``) is then added one ``add`` at a time,
    each checking the load factor and doubling the table, while a larger one (an ``immutable.HashSet``) goes through
    ``addElem`` with no growth check at all, so the table can stay fuller than 0.75 until a later group grows it.
    """
    table, size = 16, 0
    seen: dict[tuple[str, int], int] = {}
    for group in groups:
        unique = list(dict.fromkeys(group))
        target = _table_size_for(int((len(unique) + 1) / 0.75))
        table = max(table, target)
        grows = len(unique) <= 4
        for tp in unique:
            if grows and size + 1 >= int(table * 0.75):
                table *= 2
            if tp in seen:
                continue
            seen[tp] = len(seen)
            size += 1
    mask = table - 1
    return sorted(seen, key=lambda tp: (_improved_hash(*tp) & mask, _improved_hash(*tp), seen[tp]))


def scala_map_order(puts: list[str]) -> list[str]:
    """The key order of a Scala 2.13 ``mutable.HashMap[String, _]`` after ``put(key, ...)`` of each key of ``puts``
    in turn (a key may come again: every ``put`` checks the load factor before it looks for the key, so updates can
    grow the table too). Buckets in index order, each sorted by improved ``String.hashCode``, then by arrival: the
    order kafka-dump-log.sh prints its per-file reports in."""
    table, size = 16, 0
    seen: dict[str, int] = {}
    for key in puts:
        if size + 1 >= int(table * 0.75):
            table *= 2
        if key not in seen:
            seen[key] = len(seen)
            size += 1
    mask = table - 1
    hashes = {key: _improve(java_string_hash(key)) for key in seen}
    return sorted(seen, key=lambda k: (hashes[k] & mask, hashes[k], seen[k]))

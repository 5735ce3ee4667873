"""The generic reader under hypothesis: random and mutated bytes give a typed MessageDecodeError or a record, never
another exception; values drawn from every table round-trip through the writer and the reader."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import MessageDecodeError
from kafkalog.metadata.codec import read_message, uuid_to_str, write_message
from kafkalog.metadata.decode import (
    decode_control_record,
    decode_group_record,
    decode_metadata_record,
    decode_txn_record,
)
from kafkalog.metadata.dump_text import DECODERS, control_contents, decode_contents
from kafkalog.metadata.group_records import GROUP_VALUES
from kafkalog.metadata.kraft_records import CONTROL_MESSAGES
from kafkalog.metadata.metadata_records import RECORD_TYPES
from kafkalog.metadata.schema import Field, Message
from kafkalog.metadata.txn_records import TXN_VALUE
from kafkalog.records.control import ControlRecordType

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# a valid PartitionChangeRecord v2 (frame 1, api key 5, version 2) with tagged fields, mutated below
SEED = bytes([1, 5, 2]) + write_message(RECORD_TYPES[5], 2, {
    "partitionId": 3, "topicId": uuid_to_str(bytes(range(16))), "isr": [1, 2], "leader": 1,
    "directories": [uuid_to_str(bytes(16)), uuid_to_str(bytes([1] * 16))], "eligibleLeaderReplicas": [4],
})


def _decoders(data: bytes) -> None:
    for call in (
        lambda: decode_metadata_record(data),
        lambda: decode_group_record(data[:7], data[7:]),
        lambda: decode_txn_record(data[:5], data[5:]),
        lambda: decode_control_record(ControlRecordType.KRAFT_VOTERS, data),
        lambda: decode_control_record(ControlRecordType.LEADER_CHANGE, data),
    ):
        try:
            call()
        except MessageDecodeError:
            pass
    for decoder in DECODERS:  # the dump never raises: a bad record is a printed finding
        contents = decode_contents(decoder, 0, data[:6], data)
        assert contents.payload_text is not None or contents.key_text is not None
    control_contents(data[:4], data[4:])


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_give_typed_errors_only(data: bytes) -> None:
    _decoders(data)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=4),
       st.integers(0, len(SEED)))
def test_mutated_records_give_typed_errors_only(flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(SEED)
    for pos, value in flips:
        data[pos] = value
    _decoders(bytes(data[:cut]))
    _decoders(bytes(data))


def test_the_seed_decodes() -> None:
    record = decode_metadata_record(SEED)
    assert record.type_name == "PARTITION_CHANGE_RECORD" and record.data["eligibleLeaderReplicas"] == [4]
    with pytest.raises(MessageDecodeError):
        decode_metadata_record(SEED[:-1])
    with pytest.raises(MessageDecodeError):
        decode_metadata_record(SEED + b"\x00")


# --- round trips from the tables --------------------------------------------------------------------------------

_INTS = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
         "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1)}


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        return st.integers(*_INTS[kind])
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=8),
        "bytes": st.binary(max_size=8),
        "uuid": st.binary(min_size=16, max_size=16).map(uuid_to_str),
    }[kind]


def _value(f: Field, version: int) -> st.SearchStrategy[Any]:
    if f.is_array:
        elem = _struct(f.fields, version) if f.is_struct else _primitive(f.element)
        base: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
    elif f.is_struct:
        base = _struct(f.fields, version)
    else:
        base = _primitive(f.type)
    return st.one_of(st.none(), base) if version in f.nullable else base


def _struct(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    present = [f for f in fields if version in f.versions or version in f.tagged]
    return st.fixed_dictionaries({f.json_name: _value(f, version) for f in present})


def _cases() -> list[tuple[Message, int]]:
    tables = [*RECORD_TYPES.values(), *CONTROL_MESSAGES.values(), *GROUP_VALUES.values(), TXN_VALUE]
    return [(m, v) for m in tables for v in range(m.valid.low, min(m.valid.high, 4) + 1)]


@pytest.mark.parametrize("message,version", _cases(), ids=lambda x: getattr(x, "name", str(x)))
def test_values_round_trip_through_the_tables(message: Message, version: int) -> None:
    @settings(max_examples=15, deadline=None)
    @given(_struct(message.fields, version))
    def check(values: dict[str, Any]) -> None:
        data = write_message(message, version, values)
        assert read_message(message, data, version) == values

    check()

"""Kafka message schemas as data: the shape of Kafka's JSON message definitions, written as Python tables.

Kafka generates a Java class per ``*.json`` message definition; kafkalog keeps the same facts (field names, types,
versions, nullable and flexible versions, tags, defaults) as :class:`Message` tables and reads/writes every one of
them with one generic codec (:mod:`kafkalog.metadata.codec`). The tables live one module per family
(``metadata_records``, ``kraft_records``, ``group_records``, ``txn_records``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Field", "Message", "Versions", "F", "versions"]

#: primitive type names of Kafka's message definitions
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "uuid", "records"}
)

_NO_DEFAULT = object()


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range (``"0+"``, ``"1-3"``, ``"2"``, ``"none"``) as Kafka's generator reads it."""

    low: int
    high: int  # inclusive; 32767 for "N+"

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high


def versions(spec: str | None) -> Versions:
    if spec is None or spec == "none":
        return Versions(1, 0)
    if spec.endswith("+"):
        return Versions(int(spec[:-1]), 0x7FFF)
    low, _, high = spec.partition("-")
    return Versions(int(low), int(high or low))


@dataclass(frozen=True, slots=True)
class Field:
    """One field: ``type`` is a primitive, ``[]T`` (array), or a struct name (then ``fields`` holds its fields)."""

    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    fields: tuple[Field, ...] = ()
    #: derived from name and type once (the codec reads them for every value)
    json_name: str = ""  # Kafka's JSON converters lower-case the first letter (KRaftVersion -> kRaftVersion)
    is_array: bool = False
    element: str = ""  # the element type of an array, else the type
    is_struct: bool = False

    def __post_init__(self) -> None:
        is_array = self.type.startswith("[]")
        element = self.type[2:] if is_array else self.type
        object.__setattr__(self, "json_name", self.name[:1].lower() + self.name[1:])
        object.__setattr__(self, "is_array", is_array)
        object.__setattr__(self, "element", element)
        object.__setattr__(self, "is_struct", element not in PRIMITIVES)

    def default_value(self) -> Any:
        """The value a generated class holds before reading: the declared default, else the type's zero."""
        if self.default is not _NO_DEFAULT:
            if self.default == "null" or self.default is None:
                return None
            if self.type == "bool":
                return self.default in (True, "true")
            if self.type in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
                return int(self.default, 0) if isinstance(self.default, str) else int(self.default)
            if self.type == "float64":
                return float(self.default)
            return self.default
        if self.is_array:
            return []
        if self.is_struct:
            return None if self.tagged.low <= self.tagged.high else {}
        return _ZERO[self.type]


_ZERO: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0, "float64": 0.0,
    "string": "", "bytes": b"", "uuid": "AAAAAAAAAAAAAAAAAAAAAA", "records": None,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Message:
    """A top-level message: its name, api key (the record type id where it has one), versions and fields."""

    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]
    extra: dict[str, Any] = field(default_factory=dict)


def F(  # noqa: N802 - reads like the JSON definitions it transcribes
    name: str,
    type: str,  # noqa: A002
    vers: str = "0+",
    *,
    nullable: str | None = None,
    tagged: str | None = None,
    tag: int | None = None,
    default: Any = _NO_DEFAULT,
    fields: tuple[Field, ...] | list[Field] = (),
) -> Field:
    """A field in the spelling of Kafka's JSON definitions (``versions``, ``nullableVersions``, ``taggedVersions``)."""
    return Field(name, type, versions(vers), versions(nullable), versions(tagged), tag, default, tuple(fields))


def M(  # noqa: N802
    name: str, api_key: int | None, valid: str, flexible: str, fields: list[Field] | tuple[Field, ...]
) -> Message:
    return Message(name, api_key, versions(valid), versions(flexible), tuple(fields))

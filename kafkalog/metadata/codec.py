"""One reader and one writer for every schema table: Kafka's wire encoding of generated messages.

Non-flexible versions use int16-length strings and int32-length arrays/bytes; flexible versions use compact
(unsigned-varint length + 1) forms and end every struct with a tagged-field section (count, then tag, size, data).
A decoded message is a plain dict keyed by the JSON field names, in schema order, with UUIDs as Kafka prints them
(URL-safe base64 without padding). Every failure is a :class:`~kafkalog.errors.MessageDecodeError`; lengths are
checked against the bytes left before anything is allocated, as Kafka's generated readers do.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import MalformedRecordError, UnsupportedRecordVersionError
from ..names import base64url_to_uuid_bytes, uuid_to_base64url
from .schema import Field, Message

__all__ = [
    "Reader",
    "Writer",
    "read_message",
    "write_message",
    "to_json",
    "dumps_java",
    "uuid_to_str",
    "uuid_from_str",
]

_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
MAX_STRING = 0x7FFF


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString`` (URL-safe base64, no padding), as its JSON converters print a uuid field."""
    return uuid_to_base64url(raw)


def uuid_from_str(text: str) -> bytes:
    """The 16 bytes of a uuid field's value; InvalidArgumentError for anything else."""
    return base64url_to_uuid_bytes(text)


class Reader:
    """A bounded cursor over bytes; every read checks what is left."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = bytes(buf) if not isinstance(buf, bytes) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int, what: str, *, array: bool = True) -> bytes:
        """``n`` bytes; ``array``: a length-prefixed string/bytes (Kafka's readArray names the shortfall), else a
        fixed-size read (Java's BufferUnderflowException, which has no message)."""
        left = self.end - self.pos
        if n < 0 or n > left:
            java = f"Error reading byte array of {n} byte(s): only {left} byte(s) available" if array else None
            raise MalformedRecordError(f"{what}: needs {n} bytes, {left} left at byte {self.pos}", kafka_text=java)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, kind: str, what: str) -> Any:
        s = _FIXED[kind]
        return s.unpack(self.take(s.size, what, array=False))[0]

    def uvarint(self, what: str) -> int:
        """Kafka's readUnsignedVarint: at most 5 bytes, the value an unsigned 32-bit int."""
        value = 0
        for i in range(5):
            if self.pos >= self.end:
                raise MalformedRecordError(f"{what}: varint ends at byte {self.pos}")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return value & 0xFFFFFFFF
        raise MalformedRecordError(
            f"{what}: varint is too long at byte {self.pos}",
            kafka_text="Varint is too long, the most significant bit in the 5th byte is set, converted value: "
            f"{value & 0xFFFFFFFF:x}",
        )


class Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def fixed(self, kind: str, value: Any) -> None:
        self.parts.append(_FIXED[kind].pack(value))

    def uvarint(self, value: int) -> None:
        out = bytearray()
        value &= 0xFFFFFFFF
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self.parts.append(bytes(out))

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# --- reading ----------------------------------------------------------------------------------------------------


def read_message(message: Message, data: bytes | bytearray | memoryview | Reader, version: int,
                 *, exact: bool = True, check_version: bool = True) -> dict[str, Any]:
    """``message`` at ``version`` from ``data``; with ``exact`` no byte may be left over. Without
    ``check_version`` a version past the schema's reads with the fields of the last one (the coordinators do)."""
    if version < 0 or (check_version and version not in message.valid):
        raise UnsupportedRecordVersionError(message.name, version)
    r = data if isinstance(data, Reader) else Reader(data)
    out = _read_fields(r, message.fields, version, version in message.flexible, message.name)
    if exact and r.remaining:
        raise MalformedRecordError(f"{r.remaining} byte(s) left after {message.name} v{version}")
    return out


def _read_fields(r: Reader, fields: tuple[Field, ...], version: int, flexible: bool, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in fields:
        if flexible and version in f.tagged:
            out[f.json_name] = f.default_value()
            tagged[f.tag] = f  # type: ignore[index]
        elif version in f.versions:
            out[f.json_name] = _read_value(r, f, version, flexible, f"{where}.{f.name}")
    if flexible:
        count = r.uvarint(f"{where} tagged field count")  # each tag read below is bounded by the bytes left
        unknown: list[dict[str, Any]] = []
        for _ in range(count):
            tag = r.uvarint(f"{where} tag")
            size = r.uvarint(f"{where} tag {tag} size")
            f = tagged.get(tag)
            if f is None:
                unknown.append({"tag": tag, "data": r.take(size, f"{where} tag {tag}")})
            else:
                out[f.json_name] = _read_value(r, f, version, flexible, f"{where}.{f.name}")
        if unknown:
            out["_unknownTaggedFields"] = unknown
    return out


def _read_value(r: Reader, f: Field, version: int, flexible: bool, where: str) -> Any:
    nullable = version in f.nullable
    if f.is_array:
        if flexible:
            n = r.uvarint(f"{where} length") - 1
        else:
            n = r.fixed("int32", f"{where} length")
        if n < 0:
            if not nullable:
                raise _null_field(f, where)
            return None
        if n > r.remaining:
            text = f"Tried to allocate a collection of size {n}, but there are only {r.remaining} bytes remaining."
            raise MalformedRecordError(f"{where}: {text}", kafka_text=text)
        elem = f.element
        if f.is_struct:
            return [_read_fields(r, f.fields, version, flexible, where) for _ in range(n)]
        try:
            return [_read_primitive(r, elem, flexible, False, where) for _ in range(n)]
        except _NullField:
            raise _null_field(f, where) from None
    if f.is_struct:
        if nullable:
            present = r.fixed("int8", f"{where} presence")
            if present < 0:
                return None
        return _read_fields(r, f.fields, version, flexible, where)
    try:
        return _read_primitive(r, f.type, flexible, nullable, where)
    except _NullField:
        raise _null_field(f, where) from None


class _NullField(Exception):
    """A null where the schema forbids one (the caller knows the field's name)."""


def _null_field(f: Field, where: str) -> MalformedRecordError:
    return MalformedRecordError(f"non-nullable field {where} was serialized as null",
                                kafka_text=f"non-nullable field {f.json_name} was serialized as null")


def _read_primitive(r: Reader, kind: str, flexible: bool, nullable: bool, where: str) -> Any:
    if kind in _FIXED:
        return r.fixed(kind, where)
    if kind == "bool":
        return r.take(1, where, array=False)[0] != 0
    if kind == "uuid":
        return uuid_to_str(r.take(16, where, array=False))
    if kind == "string":
        n = r.uvarint(f"{where} length") - 1 if flexible else r.fixed("int16", f"{where} length")
        if n < 0:
            if not nullable:
                raise _NullField
            return None
        if n > MAX_STRING:
            raise MalformedRecordError(f"string field {where} had invalid length {n}")
        return r.take(n, where).decode("utf-8", errors="replace")
    if kind in ("bytes", "records"):
        n = r.uvarint(f"{where} length") - 1 if flexible else r.fixed("int32", f"{where} length")
        if n < 0:
            if not nullable:
                raise _NullField
            return None
        return r.take(n, where)
    raise MalformedRecordError(f"{where}: no reader for type {kind}")  # a table error, not bad input


# --- writing ----------------------------------------------------------------------------------------------------


def write_message(message: Message, version: int, values: Mapping[str, Any]) -> bytes:
    """``values`` (JSON field names; missing ones take their defaults) as ``message`` at ``version``."""
    if version not in message.valid:
        raise UnsupportedRecordVersionError(message.name, version)
    w = Writer()
    _write_fields(w, message.fields, version, version in message.flexible, values)
    return w.getvalue()


def _write_fields(w: Writer, fields: tuple[Field, ...], version: int, flexible: bool, values: Mapping[str, Any]) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        value = values.get(f.json_name, f.default_value())
        if flexible and version in f.tagged:
            if value != f.default_value():
                sub = Writer()
                _write_value(sub, f, version, flexible, value)
                tagged.append((f.tag, sub.getvalue()))  # type: ignore[arg-type]
        elif version in f.versions:
            _write_value(w, f, version, flexible, value)
    if flexible:
        tagged.sort()
        w.uvarint(len(tagged))
        for tag, data in tagged:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.raw(data)


def _write_value(w: Writer, f: Field, version: int, flexible: bool, value: Any) -> None:
    if f.is_array:
        if value is None:
            w.uvarint(0) if flexible else w.fixed("int32", -1)
            return
        w.uvarint(len(value) + 1) if flexible else w.fixed("int32", len(value))
        for item in value:
            if f.is_struct:
                _write_fields(w, f.fields, version, flexible, item)
            else:
                _write_primitive(w, f.element, flexible, item)
        return
    if f.is_struct:
        if version in f.nullable:
            if value is None:
                w.fixed("int8", -1)
                return
            w.fixed("int8", 1)
        _write_fields(w, f.fields, version, flexible, value or {})
        return
    _write_primitive(w, f.type, flexible, value)


def _write_primitive(w: Writer, kind: str, flexible: bool, value: Any) -> None:
    if kind in _FIXED:
        w.fixed(kind, value)
    elif kind == "bool":
        w.raw(b"\x01" if value else b"\x00")
    elif kind == "uuid":
        w.raw(uuid_from_str(value))
    elif kind in ("string", "bytes", "records"):
        if value is None:
            w.uvarint(0) if flexible else w.fixed("int16" if kind == "string" else "int32", -1)
            return
        data = value.encode("utf-8") if kind == "string" else bytes(value)
        w.uvarint(len(data) + 1) if flexible else w.fixed("int16" if kind == "string" else "int32", len(data))
        w.raw(data)
    else:  # pragma: no cover - table error
        raise MalformedRecordError(f"no writer for type {kind}")


# --- Kafka's JSON converters ------------------------------------------------------------------------------------


def to_json(fields: Iterable[Field], version: int, values: Mapping[str, Any]) -> dict[str, Any]:
    """What Kafka's generated ``*JsonConverter.write(message, version)`` gives: the fields of ``version`` in
    schema order, tagged fields only when they differ from their default, bytes as base64."""
    out: dict[str, Any] = {}
    for f in fields:
        name = f.json_name
        if name not in values:
            continue
        value = values[name]
        if version in f.tagged:
            if value == f.default_value():
                continue
        elif version not in f.versions:
            continue
        out[name] = _json_value(f, version, value)
    return out


def _json_value(f: Field, version: int, value: Any) -> Any:
    if value is None:
        return None
    if f.is_array:
        if f.is_struct:
            return [to_json(f.fields, version, item) for item in value]
        return [_json_primitive(item) for item in value]
    if f.is_struct:
        return to_json(f.fields, version, value)
    return _json_primitive(value)


def _json_primitive(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def java_double(value: float) -> str:
    """Java's ``Double.toString`` (what Jackson prints for a float64 field)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    a = abs(value)
    digits, exp = _shortest_digits(a)  # a = 0.d1d2... * 10**exp
    if 1e-3 <= a < 1e7:
        point = exp
        if point <= 0:
            text = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
        return sign + text
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exp - 1}"


def _shortest_digits(a: float) -> tuple[str, int]:
    mant, _, e = f"{a!r}".partition("e") if "e" in repr(a) else (repr(a), "", "0")
    whole, _, frac = mant.partition(".")
    digits = (whole + frac).lstrip("0")
    exp = len(whole) + int(e) if whole != "0" else int(e) - (len(frac) - len(frac.lstrip("0")))
    if whole == "0":
        digits = frac.lstrip("0")
    return digits.rstrip("0") or "0", exp


def _java_string(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            short = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(o)
            out.append(short or f"\\u{o:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps_java(value: Any) -> str:
    """Compact JSON as Jackson's ``JsonNode.toString`` writes it (Java double spelling, upper-case escapes)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, str):
        return _java_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_java_string(k)}:{dumps_java(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps_java(v) for v in value) + "]"
    raise TypeError(f"not JSON: {type(value).__name__}")

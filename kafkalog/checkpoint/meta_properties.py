"""``meta.properties``: which cluster and node a log dir belongs to, and the dir's KIP-858 directory id.

A Java properties file written by ``Properties.store(writer, "")``: a ``#`` line, a ``#<Date.toString()>`` line,
then ``key=value`` lines in the iteration order of the JDK's ``ConcurrentHashMap`` inside ``Properties``.
kafkalog reproduces that order and the date format, so re-writing a Kafka-written file with the same date gives
the same bytes. Version 0 names the node ``broker.id`` (ZooKeeper era), version 1 ``node.id`` (KRaft).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError
from kafkalog.limits import INT_MAX as INT32_MAX
from kafkalog.limits import INT_MIN as INT32_MIN
from kafkalog.names import base64url_to_uuid_bytes, is_reserved_directory_id, random_directory_id

META_PROPERTIES_FILENAME = "meta.properties"
VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"
_MAX_FILE_BYTES = 1 << 20



def generate_directory_id() -> str:
    """A fresh ``directory.id``: never UNASSIGNED, LOST, MIGRATING or another of the 100 reserved ids."""
    return random_directory_id()


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """Kafka's ``MetaProperties``: ``node_id`` is ``broker.id`` in version 0, ``node.id`` in version 1."""

    version: int
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: str | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise InvalidArgumentError(f"unknown meta.properties version {self.version!r} (known: 0, 1)")
        if self.version == 1 and (self.cluster_id is None or self.node_id is None):
            raise InvalidArgumentError("meta.properties version 1 needs cluster.id and node.id")
        if self.node_id is not None and (
            isinstance(self.node_id, bool)
            or not isinstance(self.node_id, int)
            or not INT32_MIN <= self.node_id <= INT32_MAX
        ):
            raise InvalidArgumentError(f"node id must be a 32-bit int, got {self.node_id!r}")
        if self.directory_id is not None:
            base64url_to_uuid_bytes(self.directory_id)

    # -- to/from Java properties ---------------------------------------------------------------------------------

    def to_properties(self) -> dict[str, str]:
        """Keys in the order Kafka's ``toProperties`` sets them (which feeds the hash order of the file)."""
        props: dict[str, str] = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.version == 0:
            if self.node_id is not None:
                props[BROKER_ID_PROP] = str(self.node_id)
        else:
            props[NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = self.directory_id
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, path: object = None) -> MetaProperties:
        """Kafka's ``MetaProperties.Builder(Properties)`` + ``build()``; CorruptCheckpointError when invalid."""
        version_text = props.get(VERSION_PROP, "0")
        if version_text not in ("0", "1"):
            raise CorruptCheckpointError(f"unknown meta.properties version {version_text!r}", path=path)
        version = int(version_text)
        id_key = BROKER_ID_PROP if version == 0 else NODE_ID_PROP
        node_id = None
        if id_key in props:
            node_id = _parse_int(props[id_key], id_key, path)
        elif version == 1:
            raise CorruptCheckpointError(f"{NODE_ID_PROP} was not found", path=path)
        cluster_id = props.get(CLUSTER_ID_PROP)
        if version == 1 and cluster_id is None:
            raise CorruptCheckpointError(f"{CLUSTER_ID_PROP} was not found", path=path)
        directory_id = props.get(DIRECTORY_ID_PROP)
        if directory_id is not None:
            try:
                base64url_to_uuid_bytes(directory_id)
            except ValueError as e:
                raise CorruptCheckpointError(f"unable to read {DIRECTORY_ID_PROP} as a Uuid: {e}", path=path) from None
        return cls(version, cluster_id, node_id, directory_id)

    @property
    def has_reserved_directory_id(self) -> bool:
        return self.directory_id is not None and is_reserved_directory_id(self.directory_id)


def _parse_int(text: str, key: str, path: object) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not INT32_MIN <= int(text) <= INT32_MAX:
        raise CorruptCheckpointError(f"unable to read {key} as a base-10 number: {text!r}", path=path)
    return int(text)


# --- Java properties text -----------------------------------------------------------------------------------------

_WS = " \t\f"


def _logical_lines(text: str) -> Iterable[str]:
    """``Properties.load``'s line reader: skips blanks and comments, joins backslash continuations."""
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:  # odd number of backslashes: continue on the next natural line
                parts.append(line[:-1])
                if i >= len(natural):
                    break
                line = natural[i].lstrip(_WS)
                i += 1
                continue
            parts.append(line)
            break
        yield "".join(parts)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, path: object) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(s):
            break  # a lone trailing backslash is dropped, as by Java
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise CorruptCheckpointError(f"malformed \\uxxxx encoding in properties: {s!r}", path=path)
            out.append(chr(int(hexdigits, 16)))
            i += 5
        else:
            out.append(_ESCAPES.get(c, c))
            i += 1
    return "".join(out)


def parse_java_properties(text: str, *, path: object = None) -> dict[str, str]:
    """Parse Java properties text (``Properties.load`` rules: ``#``/``!`` comments, ``=``, ``:`` or blank as
    separator, backslash escapes and continuations). Later keys override earlier ones."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        key_chars = []
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if c in "=:" or c in _WS:
                break
            key_chars.append(c)
            i += 1
        key = "".join(key_chars)
        # separator: whitespace, then at most one '=' or ':', then whitespace
        while i < len(line) and line[i] in _WS:
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in _WS:
                i += 1
        props[_unescape(key, path)] = _unescape(line[i:], path)
    return props


def _save_convert(s: str, *, is_key: bool) -> str:
    """``Properties.saveConvert`` for a Writer (no \\uXXXX escaping)."""
    out = []
    for n, c in enumerate(s):
        if c == " ":
            out.append("\\ " if (n == 0 or is_key) else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!\\":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """The order ``Properties.store`` writes keys inserted in this order: the JDK's ConcurrentHashMap bins.

    Exact for the handful of keys Kafka writes (no resize below 12 keys). Larger maps resize, and the JDK's
    split of a bin during resize is not modelled (it only matters for keys colliding in a bin).
    """
    keys = list(dict.fromkeys(keys))
    n = 16
    while len(keys) >= n - (n >> 2):
        n <<= 1

    def bin_of(k: str) -> int:
        h = java_string_hash(k)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (n - 1)

    return sorted(keys, key=lambda k: bin_of(k))  # sorted() is stable: insertion order within a bin


def java_date_string(when: datetime) -> str:
    """``java.util.Date.toString()`` (``EEE MMM dd HH:mm:ss zzz yyyy``) in the datetime's zone (UTC if naive)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    zone = when.tzname() or "UTC"
    if zone in ("UTC", "UTC+00:00"):
        zone = "UTC"
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return (
        f"{days[when.weekday()]} {months[when.month - 1]} {when.day:02d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} {zone} {when.year}"
    )


def parse_java_date_comment(text: str) -> datetime | None:
    """The UTC time in the ``#<date>`` line Kafka wrote, when it is in UTC; None otherwise."""
    for line in re.split(r"\r\n|\r|\n", text):
        m = re.fullmatch(r"#\w{3} (\w{3}) (\d{2}) (\d{2}):(\d{2}):(\d{2}) UTC (\d{4})", line)
        if m:
            months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            if m.group(1) not in months:
                return None
            return datetime(
                int(m.group(6)),
                months.index(m.group(1)) + 1,
                int(m.group(2)),
                int(m.group(3)),
                int(m.group(4)),
                int(m.group(5)),
                tzinfo=timezone.utc,
            )
    return None


def format_java_properties(props: Mapping[str, str], *, when: datetime | None = None) -> bytes:
    """``Properties.store(writer, "")`` output: ``#``, ``#<date>``, then ``key=value`` in hash order."""
    when = when or datetime.now(timezone.utc)
    lines = ["#", "#" + java_date_string(when)]
    for key in java_properties_order(props):
        lines.append(_save_convert(key, is_key=True) + "=" + _save_convert(props[key], is_key=False))
    return ("\n".join(lines) + "\n").encode("utf-8")


# --- files -----------------------------------------------------------------------------------------------------


def parse_meta_properties(data: bytes, *, path: object = None) -> MetaProperties:
    # Properties.load(InputStream) reads ISO-8859-1; every byte decodes, non-ASCII arrives via \uXXXX escapes.
    return MetaProperties.from_properties(parse_java_properties(data.decode("latin-1"), path=path), path=path)


def read_meta_properties(path: str | os.PathLike[str]) -> MetaProperties:
    """Read ``meta.properties``; CorruptCheckpointError for content Kafka would refuse."""
    with open(path, "rb") as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise CorruptCheckpointError(f"larger than {_MAX_FILE_BYTES} bytes", path=path)
    return parse_meta_properties(data, path=path)


def format_meta_properties(meta: MetaProperties, *, when: datetime | None = None) -> bytes:
    """The bytes Kafka's ``PropertiesUtils.writePropertiesFile`` writes for ``meta`` at time ``when``."""
    return format_java_properties(meta.to_properties(), when=when)


def write_meta_properties(
    path: str | os.PathLike[str], meta: MetaProperties, *, when: datetime | None = None, sync: bool = True
) -> None:
    atomic_write(path, format_meta_properties(meta, when=when), sync=sync)

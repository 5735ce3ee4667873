"""Names on disk: segment files, partition dirs, topic names and Kafka's base64url UUIDs.

Every path kafkalog builds from a topic name goes through :func:`validate_topic`, which is Kafka's own
``Topic.validate`` rule (1-249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``). That rule alone keeps a
name from escaping its log dir: no ``/``, no NUL, no ``..`` component, nothing over a file-name length.
"""

from __future__ import annotations

import base64
import os
import re
import uuid as _uuid
from dataclasses import dataclass
from pathlib import Path

from kafkalog.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidPartitionDirError,
    InvalidTopicError,
)
from kafkalog.limits import INT_MAX, LONG_MAX

# --- a path attribute kept as a string --------------------------------------------------------------------------


class LazyPath:
    """A path attribute stored as a string (``str_attr``) and made a ``Path`` (cached in ``obj_attr``) only when
    read: a loader opening thousands of segments needs only the strings, and building the Path objects up front
    showed up in startup profiles. Assigning a ``Path`` keeps it; any other path-like is stored as its string."""

    __slots__ = ("_str_attr", "_obj_attr")

    def __init__(self, str_attr: str, obj_attr: str) -> None:
        self._str_attr = str_attr
        self._obj_attr = obj_attr

    def __get__(self, instance: object, owner: type | None = None) -> Path:
        if instance is None:
            return self  # type: ignore[return-value]  # the descriptor itself, read on the class
        p = getattr(instance, self._obj_attr)
        if p is None:
            p = Path(getattr(instance, self._str_attr))
            setattr(instance, self._obj_attr, p)
        return p

    def __set__(self, instance: object, value: str | os.PathLike[str]) -> None:
        if isinstance(value, Path):
            setattr(instance, self._obj_attr, value)
            setattr(instance, self._str_attr, str(value))
        else:
            setattr(instance, self._obj_attr, None)
            setattr(instance, self._str_attr, os.fspath(value))


# --- segment file names -----------------------------------------------------------------------------------------

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
#: Temporary suffixes appended after one of the above (``00000000000000000042.log.deleted``).
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

FILE_SUFFIXES: tuple[str, ...] = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
TEMP_SUFFIXES: tuple[str, ...] = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)

#: Kafka pads base offsets to 20 digits: the width of Long.MAX_VALUE, so names sort like offsets.
OFFSET_DIGITS = 20
MAX_OFFSET = LONG_MAX
#: A partition as Kafka's ``TopicPartition`` names it: (topic, partition number).
TopicPartition = tuple[str, int]

_SEGMENT_FILE_RE = re.compile(
    r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)(\.deleted|\.cleaned|\.swap)?$"
)


def offset_to_name(offset: int) -> str:
    """The 20-digit zero-padded form of a base offset (Kafka's ``LogFileUtils.filenamePrefixFromOffset``)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidArgumentError(f"base offset must be an int in [0, 2^63-1], got {offset!r}")
    return f"{offset:020d}"


def file_name(dir: str | os.PathLike[str], offset: int, suffix: str) -> Path:
    """``dir / <20-digit offset><suffix>``; ``suffix`` may be a combination such as ``.log.deleted``."""
    if not isinstance(suffix, str) or not suffix.startswith(".") or "/" in suffix or "\0" in suffix:
        raise InvalidArgumentError(f"bad file suffix {suffix!r}")
    return Path(dir) / (offset_to_name(offset) + suffix)


@dataclass(frozen=True, slots=True)
class SegmentFileName:
    """A parsed segment file name: base offset, main suffix (``.log``...) and optional temporary suffix."""

    offset: int
    suffix: str
    temp_suffix: str = ""

    @property
    def name(self) -> str:
        return offset_to_name(self.offset) + self.suffix + self.temp_suffix


def parse_segment_file_name(name: str) -> SegmentFileName | None:
    """Parse ``00000000000000000042.index.swap``-style names; None for anything else (e.g. ``.lock``)."""
    m = _SEGMENT_FILE_RE.fullmatch(name)
    if m is None:
        return None
    offset = int(m.group(1))
    if offset > MAX_OFFSET:
        return None
    return SegmentFileName(offset, m.group(2), m.group(3) or "")


def offset_from_file_name(name: str | os.PathLike[str]) -> int:
    """The base offset in a segment file name (Kafka reads the part before the first dot).

    Raises InvalidArgumentError (a ValueError) for a name that is not a segment file name, so a stray file is
    never taken for offset 0.
    """
    base = os.path.basename(os.fspath(name))
    parsed = parse_segment_file_name(base)
    if parsed is None:
        raise InvalidArgumentError(f"not a segment file name: {base!r}")
    return parsed.offset


# --- topic names ------------------------------------------------------------------------------------------------

MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_invalid_reason(name: object) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None when it is valid."""
    if not isinstance(name, str):
        return f"topic name must be a str, got {type(name).__name__}"
    if name == "":
        return "the empty string is not allowed"
    if name == ".":
        return "'.' is not allowed"
    if name == "..":
        return "'..' is not allowed"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"the length of {name[:40]!r}... is longer than the max allowed length {MAX_TOPIC_LENGTH}"
    # re's $ would accept a trailing newline: check with fullmatch semantics.
    if not _LEGAL_TOPIC_RE.fullmatch(name):
        return f"{name!r} contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_valid_topic(name: object) -> bool:
    return topic_invalid_reason(name) is None


def validate_topic(name: object) -> str:
    """Kafka's ``Topic.validate``: raise InvalidTopicError, else return the name unchanged."""
    reason = topic_invalid_reason(name)
    if reason is not None:
        raise InvalidTopicError(f"Topic name is invalid: {reason}")
    return name  # type: ignore[return-value]


# --- partition directories --------------------------------------------------------------------------------------

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
_DIR_KINDS = {DELETE_DIR_SUFFIX: "delete", FUTURE_DIR_SUFFIX: "future", STRAY_DIR_SUFFIX: "stray"}
_MAX_DIR_NAME = 255
_SUFFIXED_DIR_RE = re.compile(r"^(?P<tp>.+)\.(?P<uuid>[0-9a-fA-F]{32})(?P<suffix>-delete|-future|-stray)$")
_PARTITION_RE = re.compile(r"^(0|[1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class TopicPartitionDir:
    """A parsed partition dir name. ``kind`` is "" for a live log, else "delete", "future" or "stray"."""

    topic: str
    partition: int
    kind: str = ""
    uuid: str | None = None

    @property
    def name(self) -> str:
        base = partition_dir_name(self.topic, self.partition)
        if not self.kind:
            return base
        return f"{base}.{self.uuid}-{self.kind}"


def _check_partition(partition: object) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT_MAX:
        raise InvalidPartitionDirError(f"partition must be an int in [0, 2^31-1], got {partition!r}")
    return partition


def parse_partition_dir(name: str | os.PathLike[str]) -> TopicPartitionDir:
    """Parse ``<topic>-<partition>`` or ``<topic>-<partition>.<32 hex>-delete|-future|-stray``.

    Same split as Kafka's ``parseTopicPartitionName`` (the last ``-`` before the partition), but stricter: the
    topic must be a valid topic name, the partition a canonical non-negative int32 and the unique id 32 hex
    digits, so that the parsed name always maps back to the same directory. A ``-delete``/``-stray`` dir may
    carry a topic Kafka truncated to keep the name within 255 characters; that prefix is returned as is.
    """
    base = os.path.basename(os.fspath(name)) if not isinstance(name, str) else name
    if not isinstance(base, str) or not base or "/" in base or "\0" in base or len(base) > _MAX_DIR_NAME:
        raise InvalidPartitionDirError(f"{name!r} is not a partition directory name")
    kind = ""
    uid: str | None = None
    tp = base
    if base.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        m = _SUFFIXED_DIR_RE.fullmatch(base)
        if m is not None:
            tp, uid, kind = m.group("tp"), m.group("uuid").lower(), _DIR_KINDS[m.group("suffix")]
        # else: a plain "<topic>-<partition>" whose topic happens to end like "...-delete" cannot be: the
        # partition must follow the last '-', so it fails below with a clear message.
    index = tp.rfind("-")
    if index <= 0 or index == len(tp) - 1:
        raise InvalidPartitionDirError(
            f"{base!r} is not in the form of topic-partition or topic-partition.uniqueId-delete|-future|-stray"
        )
    topic, part = tp[:index], tp[index + 1 :]
    if not _PARTITION_RE.fullmatch(part) or int(part) > INT_MAX:
        raise InvalidPartitionDirError(f"{base!r}: partition {part!r} is not a non-negative 32-bit integer")
    reason = topic_invalid_reason(topic)
    if reason is not None:
        raise InvalidPartitionDirError(f"{base!r}: topic name is invalid: {reason}")
    return TopicPartitionDir(topic, int(part), kind, uid)


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>`` (Kafka's ``logDirName``), validating both parts."""
    validate_topic(topic)
    return f"{topic}-{_check_partition(partition)}"


def _unique_id() -> str:
    # Kafka: java.util.UUID.randomUUID().toString() without dashes (32 lowercase hex digits).
    return _uuid.uuid4().hex


def future_dir_name(topic: str, partition: int, *, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-future``: a replica being moved into this log dir (KIP-113)."""
    return f"{partition_dir_name(topic, partition)}.{_check_unique_id(unique_id)}{FUTURE_DIR_SUFFIX}"


def delete_dir_name(topic: str, partition: int, *, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-delete``; the topic is cut so the name stays within 255 chars, as Kafka does."""
    return _capped_dir_name(topic, partition, DELETE_DIR_SUFFIX, unique_id)


def stray_dir_name(topic: str, partition: int, *, unique_id: str | None = None) -> str:
    """``<topic>-<partition>.<uuid>-stray`` (KRaft: a replica not assigned to this broker), capped like -delete."""
    return _capped_dir_name(topic, partition, STRAY_DIR_SUFFIX, unique_id)


def _capped_dir_name(topic: str, partition: int, suffix: str, unique_id: str | None) -> str:
    validate_topic(topic)
    full_suffix = f"-{_check_partition(partition)}.{_check_unique_id(unique_id)}{suffix}"
    return topic[: min(len(topic), _MAX_DIR_NAME - len(full_suffix))] + full_suffix


def _check_unique_id(unique_id: str | None) -> str:
    if unique_id is None:
        return _unique_id()
    if not isinstance(unique_id, str) or not re.fullmatch(r"[0-9a-f]{32}", unique_id):
        raise InvalidPartitionDirError(f"unique id must be 32 lowercase hex digits, got {unique_id!r}")
    return unique_id


# --- Kafka UUIDs (topic ids, directory ids) -----------------------------------------------------------------------


def uuid_to_base64url(value: bytes | int | _uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: 16 big-endian bytes as base64url without padding (22 characters)."""
    if isinstance(value, _uuid.UUID):
        raw = value.bytes
    elif isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < (1 << 128):
            raise InvalidArgumentError(f"uuid int out of range [0, 2^128): {value}")
        raw = value.to_bytes(16, "big")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise InvalidArgumentTypeError(f"cannot make a uuid from {type(value).__name__}")
    if len(raw) != 16:
        raise InvalidArgumentError(f"a uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]{22}(==)?$")


def base64url_to_uuid_bytes(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of a base64url id; InvalidArgumentError for anything else.

    Stricter than Java's decoder in one way: the 22nd character must not carry stray low bits, so every
    accepted string is the canonical spelling of its bytes and re-encodes to itself.
    """
    if not isinstance(text, str) or not _B64URL_RE.fullmatch(text):
        raise InvalidArgumentError(f"not a base64url-encoded 16-byte uuid: {text!r}")
    raw = base64.urlsafe_b64decode(text[:22] + "==")
    if len(raw) != 16 or uuid_to_base64url(raw) != text[:22]:
        raise InvalidArgumentError(f"not a canonical base64url-encoded 16-byte uuid: {text!r}")
    return raw


def _reserved(n: int) -> str:
    return uuid_to_base64url(n.to_bytes(16, "big"))


ZERO_UUID = _reserved(0)
ONE_UUID = _reserved(1)
METADATA_TOPIC_ID = ONE_UUID
#: Kafka's ``Uuid.RESERVED``: never returned by ``Uuid.randomUuid``.
RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})

# DirectoryId.java (KIP-858), as Kafka 4.0's records carry them (golden/metadata METADATA.json
# "specialDirectoryIds"): the zero id is MIGRATING, so a PartitionRecord v0 replica without a directory reads as
# one placed before directories were tracked.
MIGRATING_DIRECTORY_ID = _reserved(0)
UNASSIGNED_DIRECTORY_ID = _reserved(1)
LOST_DIRECTORY_ID = _reserved(2)
#: DirectoryId.random() avoids the first 100 ids (0..99), reserved for future special meanings.
DIRECTORY_ID_RESERVED_BELOW = 100


def random_uuid_base64() -> str:
    """Kafka's ``Uuid.randomUuid``: a version-4 UUID, never ZERO/ONE, never one whose text starts with '-'."""
    while True:
        text = uuid_to_base64url(_uuid.uuid4().bytes)
        if text not in RESERVED_UUIDS and not text.startswith("-"):
            return text


def is_reserved_directory_id(directory_id: str) -> bool:
    """True for ids ``DirectoryId.random`` never returns: the first 100 (UNASSIGNED, LOST, MIGRATING, ...)."""
    return int.from_bytes(base64url_to_uuid_bytes(directory_id), "big") < DIRECTORY_ID_RESERVED_BELOW


def random_directory_id() -> str:
    """Kafka's ``DirectoryId.random``: a random uuid outside the 100 reserved ids."""
    while True:
        text = random_uuid_base64()
        if not is_reserved_directory_id(text):
            return text


# --- what a file in a log dir is --------------------------------------------------------------------------------

#: Names of the offset checkpoint files of a log dir (Kafka's ``LogManager`` constants).
OFFSET_CHECKPOINT_FILES: tuple[str, ...] = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_SUFFIX_KINDS = ((".log", "log"), (".index", "index"), (".timeindex", "timeindex"), (".txnindex", "txnindex"),
                 (".snapshot", "snapshot"), (".checkpoint", "kraft-snapshot"))  # fmt: skip
_NAME_KINDS = {
    **{name: "offset-checkpoint" for name in OFFSET_CHECKPOINT_FILES},
    "leader-epoch-checkpoint": "leader-epoch-checkpoint",
    "partition.metadata": "partition-metadata",
    "meta.properties": "meta-properties",
    ".kafka_cleanshutdown": "clean-shutdown",
}


def file_kind(name: str) -> tuple[str, str]:
    """(kind, name without a temporary suffix) of a file in a log or partition dir.

    Kinds: ``log``, ``index``, ``timeindex``, ``txnindex``, ``snapshot``, ``kraft-snapshot`` (``.checkpoint``; by
    suffix, as Kafka's tools go by the suffix alone), ``offset-checkpoint``, ``leader-epoch-checkpoint``, ``partition-metadata``, ``meta-properties``,
    ``clean-shutdown`` and ``unknown``. ``.deleted``/``.cleaned``/``.swap`` are looked through.
    """
    base = name
    for temp in TEMP_SUFFIXES:
        if base.endswith(temp):
            base = base[: -len(temp)]
            break
    for suffix, kind in _SUFFIX_KINDS:
        if base.endswith(suffix):
            return kind, base
    return _NAME_KINDS.get(base, "unknown"), base


_TIERED_STEM = re.compile(r"^(\d{20})-[A-Za-z0-9_-]{22}$")


def base_offset_prefix(name: str) -> int:
    """The base offset a segment file name starts with, read as Kafka's tools read it (the digits before the
    first dot; a tiered-storage object's ``<20 digits>-<segment id>`` gives its digits); InvalidArgumentError (a
    ValueError) when that part is not a number or not a long (a base offset is one: Kafka's ``toLong`` refuses a
    larger one)."""
    prefix = name.split(".")[0]
    tiered = _TIERED_STEM.match(prefix)
    if tiered:
        prefix = tiered[1]
    try:
        offset = int(prefix)
    except ValueError:
        raise InvalidArgumentError(f"{name}: a segment file name must start with its base offset") from None
    if not 0 <= offset <= LONG_MAX:
        raise InvalidArgumentError(f"{name}: base offset {prefix} is not in [0, 2^63-1]")
    return offset

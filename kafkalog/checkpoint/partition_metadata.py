"""Kafka's ``PartitionMetadataFile`` (``partition.metadata``): the topic id a partition dir belongs to.

Exact bytes: ``version: 0\\ntopic_id: <22-char base64url uuid>`` with no final newline. The id lets a broker
tell a partition of a deleted-and-recreated topic from the current one, so an unreadable file is an error,
never "no topic id".
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from kafkalog.checkpoint._format import INT32_MAX, parse_java_int, split_lines
from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError
from kafkalog.io.file_access import read_file
from kafkalog.names import ZERO_UUID, base64url_to_uuid_bytes

PARTITION_METADATA_FILENAME = "partition.metadata"
PARTITION_METADATA_VERSION = 0
# Kafka splits each line on ":\s+" once.
_KEY_SEP_RE = re.compile(r":[ \t\n\x0b\f\r]+")


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    version: int
    topic_id: str


def _field(line: str | None, key: str, path: object) -> str:
    if line is None:
        raise CorruptCheckpointError(f"truncated partition metadata: missing the {key!r} line", path=path)
    parts = _KEY_SEP_RE.split(line, maxsplit=1)
    if len(parts) != 2 or parts[0] != key:
        raise CorruptCheckpointError(
            f"malformed line in partition metadata file (expected {key!r}): {line!r}", path=path
        )
    return parts[1]


def parse_partition_metadata(data: bytes, *, path: object = None) -> PartitionMetadata:
    """Parse ``partition.metadata`` bytes. Versions above 0 are accepted (Kafka reads them for downgrades)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptCheckpointError("partition metadata is not UTF-8 text", path=path) from None
    lines = split_lines(text)
    version_text = _field(lines[0] if lines else None, "version", path)
    version = parse_java_int(version_text, 0, INT32_MAX, "version", path, lines[0])
    topic_id = _field(lines[1] if len(lines) > 1 else None, "topic_id", path)
    try:
        base64url_to_uuid_bytes(topic_id)
    except ValueError as e:
        raise CorruptCheckpointError(f"malformed topic id: {e}", path=path) from None
    if topic_id == ZERO_UUID:
        raise CorruptCheckpointError("invalid topic id (the zero uuid) in partition metadata file", path=path)
    if any(line.strip() for line in lines[2:]):
        raise CorruptCheckpointError(f"unexpected content after the topic_id line: {lines[2:]!r}", path=path)
    return PartitionMetadata(version, topic_id[:22])


def read_partition_metadata_file(path: str | os.PathLike[str]) -> PartitionMetadata:
    data = read_file(path)
    return parse_partition_metadata(data, path=path)


def read_partition_metadata(path: str | os.PathLike[str]) -> str:
    """The topic id (base64url) stored in ``path``; CorruptCheckpointError if malformed."""
    return read_partition_metadata_file(path).topic_id


def format_partition_metadata(topic_id: str) -> bytes:
    """The exact bytes Kafka's ``PartitionMetadata.encode`` writes; InvalidArgumentError for a bad topic id."""
    base64url_to_uuid_bytes(topic_id)  # InvalidArgumentError for a malformed id
    if topic_id[:22] == ZERO_UUID:
        raise InvalidArgumentError("the zero uuid is not a topic id")
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id[:22]}".encode("ascii")


def write_partition_metadata(path: str | os.PathLike[str], topic_id: str, *, sync: bool = True) -> None:
    atomic_write(path, format_partition_metadata(topic_id), sync=sync)

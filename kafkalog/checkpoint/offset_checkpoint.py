"""Kafka's ``OffsetCheckpointFile``: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``.

Format: ``0`` / entry count / ``<topic> <partition> <offset>`` per line. Kafka writes entries in the iteration
order of a Java HashMap, which we cannot reproduce in general; kafkalog writes them sorted by (topic,
partition), which is also the order in Kafka-written golden files of this repo (small maps of distinct topics).
Readers must not depend on the order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from kafkalog.checkpoint._format import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    format_checkpoint,
    parse_checkpoint_entries,
    parse_java_int,
)
from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError
from kafkalog.names import topic_invalid_reason, validate_topic

OFFSET_CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartitionKey = tuple[str, int]


def effective_log_start_offset(checkpointed: int | None, first_segment_base: int | None) -> int | None:
    """A partition's log start offset as Kafka's LogLoader sets it at load: its ``log-start-offset-checkpoint``
    entry (0 when absent), but never below the first segment's base offset. The one rule the loader, ``dirs
    describe`` and ``verify`` apply, so they name the same offset (None: no segment and no entry)."""
    if first_segment_base is None:
        return checkpointed
    return max(checkpointed or 0, first_segment_base)


def parse_offset_checkpoint(data: bytes, *, path: object = None) -> dict[TopicPartitionKey, int]:
    """Parse offset-checkpoint bytes; a repeated partition keeps its last offset (Kafka fills a map)."""
    result: dict[TopicPartitionKey, int] = {}
    for topic, part, offset in parse_checkpoint_entries(data, OFFSET_CHECKPOINT_VERSION, 3, path=path):
        line = f"{topic} {part} {offset}"
        reason = topic_invalid_reason(topic)
        if reason is not None:
            # Also the guard against a crafted checkpoint naming '../x': its topics become directory names.
            raise CorruptCheckpointError(f"malformed line (invalid topic: {reason}): {line!r}", path=path)
        partition = parse_java_int(part, 0, INT32_MAX, "partition", path, line)
        result[(topic, partition)] = parse_java_int(offset, INT64_MIN, INT64_MAX, "offset", path, line)
    return result


def read_offset_checkpoint(path: str | os.PathLike[str]) -> dict[TopicPartitionKey, int]:
    """Read an offset checkpoint; CorruptCheckpointError for malformed content, OSError for I/O trouble."""
    with open(path, "rb") as f:
        data = f.read()
    return parse_offset_checkpoint(data, path=path)


def read_log_dir_checkpoints(
    log_dir: str | os.PathLike[str],
    names: Iterable[str] = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT),
) -> dict[str, dict[TopicPartitionKey, int]]:
    """The offset checkpoints ``names`` of ``log_dir``, by file name; a missing or malformed one counts as empty,
    as a broker reads them at startup. Other ``OSError``s propagate."""
    out: dict[str, dict[TopicPartitionKey, int]] = {}
    for name in names:
        try:
            out[name] = read_offset_checkpoint(os.path.join(log_dir, name))
        except (FileNotFoundError, CorruptCheckpointError):
            out[name] = {}
    return out


def format_offset_checkpoint(
    offsets: Mapping[TopicPartitionKey, int] | Iterable[tuple[str, int, int]], *, sort: bool = True
) -> bytes:
    """The exact bytes Kafka writes for these entries (in sorted order unless ``sort=False``).

    InvalidTopicError for a bad topic name, InvalidArgumentError for a partition or offset out of range.
    """
    items = list(offsets.items()) if isinstance(offsets, Mapping) else [((t, p), o) for t, p, o in offsets]
    if sort:
        items.sort(key=lambda kv: kv[0])
    lines = []
    for (topic, partition), offset in items:
        validate_topic(topic)
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT32_MAX:
            raise InvalidArgumentError(f"partition must be an int in [0, 2^31-1], got {partition!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or not INT64_MIN <= offset <= INT64_MAX:
            raise InvalidArgumentError(f"offset must be a 64-bit int, got {offset!r}")
        lines.append(f"{topic} {partition} {offset}")
    return format_checkpoint(OFFSET_CHECKPOINT_VERSION, lines)


def write_offset_checkpoint(
    path: str | os.PathLike[str],
    offsets: Mapping[TopicPartitionKey, int] | Iterable[tuple[str, int, int]],
    *,
    sort: bool = True,
    sync: bool = True,
) -> None:
    """Atomically replace ``path`` with these offsets (see :func:`format_offset_checkpoint`)."""
    atomic_write(path, format_offset_checkpoint(offsets, sort=sort), sync=sync)

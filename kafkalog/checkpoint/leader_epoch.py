"""Kafka's ``LeaderEpochCheckpointFile`` (``leader-epoch-checkpoint`` in each partition dir).

Format: ``0`` / entry count / ``<epoch> <startOffset>`` per line, in the order given (the cache keeps them by
epoch). A malformed file raises :class:`CorruptCheckpointError`; Kafka refuses to load such a partition
(``KafkaStorageException``), and whether to refuse or rebuild is the loader's decision.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalog.checkpoint._format import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    format_checkpoint,
    parse_checkpoint_entries,
    parse_java_int,
)
from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import InvalidArgumentError
from kafkalog.io.file_access import read_file

LEADER_EPOCH_CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT_FILENAME = "leader-epoch-checkpoint"


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    """A leader epoch and the first offset written in it (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


def parse_leader_epoch_checkpoint(data: bytes, *, path: object = None) -> list[EpochEntry]:
    entries = []
    for epoch, offset in parse_checkpoint_entries(data, LEADER_EPOCH_CHECKPOINT_VERSION, 2, path=path):
        line = f"{epoch} {offset}"
        entries.append(
            EpochEntry(
                parse_java_int(epoch, INT32_MIN, INT32_MAX, "epoch", path, line),
                parse_java_int(offset, INT64_MIN, INT64_MAX, "start offset", path, line),
            )
        )
    return entries


def read_leader_epoch_checkpoint(path: str | os.PathLike[str]) -> list[EpochEntry]:
    """Read the entries in file order; CorruptCheckpointError for malformed content."""
    data = read_file(path)
    return parse_leader_epoch_checkpoint(data, path=path)


def format_leader_epoch_checkpoint(entries: Iterable[EpochEntry | tuple[int, int]]) -> bytes:
    """The bytes Kafka writes for these entries; InvalidArgumentError for an epoch or offset out of range."""
    lines = []
    for entry in entries:
        epoch, offset = (entry.epoch, entry.start_offset) if isinstance(entry, EpochEntry) else entry
        for value, lo, hi, what in ((epoch, INT32_MIN, INT32_MAX, "epoch"), (offset, INT64_MIN, INT64_MAX, "offset")):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidArgumentError(f"{what} out of range: {value!r}")
        lines.append(f"{epoch} {offset}")
    return format_checkpoint(LEADER_EPOCH_CHECKPOINT_VERSION, lines)


def write_leader_epoch_checkpoint(
    path: str | os.PathLike[str], entries: Iterable[EpochEntry | tuple[int, int]], *, sync: bool = True
) -> None:
    """Atomically replace ``path`` with these entries, in the order given."""
    atomic_write(path, format_leader_epoch_checkpoint(entries), sync=sync)

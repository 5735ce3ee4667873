"""A log dir's ``cleaner-offset-checkpoint``: each compacted partition's first dirty offset, read at the start of
a pass and advanced to where the pass ended (written atomically through ``kafkalog.checkpoint``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from kafkalog.checkpoint.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    TopicPartitionKey,
    read_offset_checkpoint,
    write_offset_checkpoint,
)

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "read_cleaner_checkpoint", "update_cleaner_checkpoint"]


def read_cleaner_checkpoint(log_dir: str | os.PathLike[str]) -> dict[TopicPartitionKey, int]:
    """The dir's checkpoint; empty when the file is absent (a malformed one raises ``CorruptCheckpointError``)."""
    try:
        return read_offset_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT))
    except FileNotFoundError:
        return {}


def update_cleaner_checkpoint(log_dir: str | os.PathLike[str], updates: Mapping[TopicPartitionKey, int], *,
                              keep: Iterable[TopicPartitionKey] | None = None,
                              remove: Iterable[TopicPartitionKey] = ()) -> dict[TopicPartitionKey, int]:
    """Kafka's ``updateCheckpoints``: the current entries (only those of ``keep`` when given: the partitions the
    dir holds), minus ``remove``, plus ``updates``; written atomically. Returns what was written."""
    current = read_cleaner_checkpoint(log_dir)
    if keep is not None:
        kept = set(keep)
        current = {tp: off for tp, off in current.items() if tp in kept}
    for tp in remove:
        current.pop(tp, None)
    current.update(updates)
    write_offset_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), current)
    return current

"""The files a metadata or internal-topic partition dir is replayed from: KRaft snapshots
(``<end offset:20 digits>-<epoch:10 digits>.checkpoint`` in ``__cluster_metadata-0``) and log segments.

A snapshot is a run of record batches (the format of a segment) whose offsets start at 0: a control batch with the
``SnapshotHeader`` first, the image's records, and a ``SnapshotFooter`` last. Its name holds the snapshot id: the
log offset it covers up to (exclusive) and the epoch of that offset. ``bootstrap.checkpoint`` has no id.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from ..names import parse_segment_file_name

__all__ = ["SNAPSHOT_SUFFIX", "BOOTSTRAP_FILE", "SnapshotId", "parse_snapshot_name", "list_snapshots", "list_segments"]

SNAPSHOT_SUFFIX = ".checkpoint"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int


def parse_snapshot_name(name: str) -> SnapshotId | None:
    """The id in a snapshot file name, or None for another name (``.part``, ``.deleted``, bootstrap)."""
    m = _NAME.match(os.path.basename(name))
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def list_snapshots(partition_dir: str | os.PathLike) -> list[tuple[SnapshotId, str]]:
    """The complete snapshots of a metadata partition dir, oldest first."""
    found = []
    for name in os.listdir(partition_dir):
        sid = parse_snapshot_name(name)
        if sid is not None:
            found.append((sid, os.path.join(os.fspath(partition_dir), name)))
    return sorted(found)


def list_segments(partition_dir: str | os.PathLike) -> list[tuple[int, str]]:
    """(base offset, path) of each live ``.log`` segment, in offset order (``.deleted``/``.cleaned``/``.swap``
    files are not part of the log)."""
    found = []
    for name in os.listdir(partition_dir):
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed.suffix == ".log" and not parsed.temp_suffix:
            found.append((parsed.offset, os.path.join(os.fspath(partition_dir), name)))
    return sorted(found)

"""Checkpoint and metadata files: a partition dir's (leader epochs, ``partition.metadata``, producer snapshots),
a log dir's (``meta.properties``, offset checkpoints against the partition dirs present) and loose ones.

A file that does not parse is corruption, not "absent": Kafka refuses or rebuilds it at load, and an operator
wants to know before that. Shared by :func:`kafkalog.verify.verify_partition` (so the Spark job checks the same
files) and ``kafkalog verify``.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from kafkalog.metadata.kraft_snapshot import count_kraft_snapshot

from ..checkpoint.leader_epoch import read_leader_epoch_checkpoint
from ..checkpoint.meta_properties import read_meta_properties
from ..checkpoint.offset_checkpoint import read_offset_checkpoint
from ..checkpoint.partition_metadata import read_partition_metadata
from ..errors import KafkaLogError
from ..log.producer_snapshot import read_producer_snapshot
from ..names import OFFSET_CHECKPOINT_FILES, file_kind
from .findings import Finding, describe_error, error_finding

__all__ = [
    "PartitionFiles",
    "check_file",
    "check_log_dir",
    "check_partition_files",
    "gap_not_from_compaction",
    "is_log_dir",
    "listdir_or_empty",
    "read_checkpoint_offsets",
]


@dataclass
class PartitionFiles:
    """What the metadata files of one partition dir hold and what is wrong with them.

    ``status`` is ``ok``, ``corrupt`` or ``error`` (a file that could not be read); with several bad files the
    last one checked decides. ``leader_epochs`` and ``topic_id`` are None when the file is absent or bad.
    """

    status: str = "ok"
    problems: list[str] = field(default_factory=list)
    leader_epochs: list[dict[str, int]] | None = None
    topic_id: str | None = None

    def _failed(self, name: str, exc: BaseException) -> None:
        status, message = describe_error(exc)
        self.status = "corrupt" if status == "corrupt" else "error"
        self.problems.append(f"{name}: {message}")

    def _corrupt(self, problem: str) -> None:
        self.status = "corrupt"
        self.problems.append(problem)


def check_partition_files(partition_dir: str, log_end_offset: int | None) -> PartitionFiles:
    """Parse the partition dir's metadata files and check the leader epochs: epochs and start offsets increase,
    and no epoch starts beyond ``log_end_offset`` (when known). A dir that is not local has no files to check."""
    out = PartitionFiles()
    epoch_path = os.path.join(partition_dir, "leader-epoch-checkpoint")
    if os.path.exists(epoch_path):
        try:
            entries = read_leader_epoch_checkpoint(epoch_path)
        except (KafkaLogError, OSError) as exc:
            out._failed("leader-epoch-checkpoint", exc)
        else:
            out.leader_epochs = [{"epoch": e.epoch, "startOffset": e.start_offset} for e in entries]
            for a, b in zip(entries, entries[1:], strict=False):
                if b.epoch <= a.epoch or b.start_offset < a.start_offset:
                    out._corrupt(f"leader-epoch-checkpoint: entry {b} does not follow {a}")
            if entries and log_end_offset is not None and entries[-1].start_offset > log_end_offset:
                out._corrupt(
                    f"leader-epoch-checkpoint: epoch {entries[-1].epoch} starts at {entries[-1].start_offset},"
                    f" beyond the log end offset {log_end_offset}"
                )
    meta_path = os.path.join(partition_dir, "partition.metadata")
    if os.path.exists(meta_path):
        try:
            out.topic_id = read_partition_metadata(meta_path)
        except (KafkaLogError, OSError) as exc:
            out._failed("partition.metadata", exc)
    for name in sorted(listdir_or_empty(partition_dir)):
        if name.endswith(".snapshot"):
            try:
                read_producer_snapshot(os.path.join(partition_dir, name))
            except (KafkaLogError, OSError) as exc:
                # Kafka drops a bad snapshot and rebuilds producer state from the log: damage, but recoverable.
                out._failed(name, exc)
    return out


def read_checkpoint_offsets(
    partition_dir: str, topic: str, partition: int
) -> tuple[int | None, int | None, int | None]:
    """(recovery point, log start offset, high watermark) of one partition from the offset checkpoints of the log
    dir above ``partition_dir``; None where a file or entry is absent or the file does not parse."""
    logdir = os.path.dirname(os.path.normpath(partition_dir))
    out: list[int | None] = []
    for name in OFFSET_CHECKPOINT_FILES[:3]:
        path = os.path.join(logdir, name)
        value = None
        try:
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode):
                value = _parsed_checkpoint(path, st.st_mtime_ns, st.st_size, st.st_ino).get((topic, partition))
        except (KafkaLogError, OSError):
            value = None
        out.append(value)
    return out[0], out[1], out[2]


def gap_not_from_compaction(partition_dir: str, topic: str, partition: int,
                            gaps: list[tuple[int, int]]) -> str | None:
    """Why the offset ``gaps`` between segments cannot be compaction's (None: they may be). Only a partition the
    log dir's ``cleaner-offset-checkpoint`` has no entry for (never compacted here) is judged: a producer snapshot
    inside a gap (Kafka snapshots at every roll, named by the new segment's base offset) marks a segment that went
    missing, and so does any gap in a dir beside a ``recovery-point-offset-checkpoint`` (a real log dir; internal
    ``__`` topics aside)."""
    if not gaps:
        return None
    logdir = os.path.dirname(os.path.normpath(partition_dir))
    cleaner = os.path.join(logdir, "cleaner-offset-checkpoint")
    try:
        st = os.stat(cleaner)
        if (topic, partition) in _parsed_checkpoint(cleaner, st.st_mtime_ns, st.st_size, st.st_ino):
            return None
    except FileNotFoundError:
        pass
    except (KafkaLogError, OSError):
        return None  # cannot tell: the checkpoint's own problem is reported with the log dir
    orphans = []
    for name in listdir_or_empty(partition_dir):
        if name.endswith(".snapshot") and name[:20].isdigit():
            offset = int(name[:20])
            if any(lo <= offset <= hi for lo, hi in gaps):
                orphans.append(offset)
    never = "no cleaner-offset-checkpoint entry (never compacted here)"
    if orphans:
        at = ", ".join(map(str, sorted(orphans)))
        return f"{never} and producer snapshot(s) at {at} inside the gap: a segment is missing"
    if topic.startswith("__") or not os.path.isfile(os.path.join(logdir, OFFSET_CHECKPOINT_FILES[0])):
        return None
    return f"{never} in a log dir: a segment is missing"


@functools.lru_cache(maxsize=16)
def _parsed_checkpoint(path: str, mtime_ns: int, size: int, inode: int) -> dict[tuple[str, int], int]:
    """One offset checkpoint, parsed once per version of the file (keyed by its stat): a log dir's checkpoints
    name every partition in it, and re-reading them for each of its partition dirs made a check of a log dir
    quadratic in its partitions. A parse error is not cached."""
    return read_offset_checkpoint(path)


def is_log_dir(path: str, names: Collection[str]) -> bool:
    """Whether a dir holding ``names`` is a Kafka log dir (it has ``meta.properties`` or an offset checkpoint)."""
    return "meta.properties" in names or any(n in names for n in OFFSET_CHECKPOINT_FILES)


def check_log_dir(log_dir: str, partition_dirs: Collection[str]) -> Finding:
    """``meta.properties`` and the offset checkpoints of a log dir; each checkpoint lists the partitions it names
    that are not among ``partition_dirs`` (the dirs found under ``log_dir``)."""
    problems: list[str] = []
    status = "ok"
    data: dict[str, Any] = {}
    meta = os.path.join(log_dir, "meta.properties")
    if os.path.exists(meta):
        try:
            m = read_meta_properties(meta)
            data.update(clusterId=m.cluster_id, nodeId=m.node_id, directoryId=m.directory_id)
        except (KafkaLogError, OSError) as exc:
            verdict, message = describe_error(exc)
            status = "corrupt" if verdict == "corrupt" else "error"
            problems.append(f"meta.properties: {message}")
    present = {os.path.basename(p) for p in partition_dirs if os.path.dirname(p) == log_dir}
    for name in OFFSET_CHECKPOINT_FILES:
        path = os.path.join(log_dir, name)
        if not os.path.exists(path):
            continue
        try:
            offsets = read_offset_checkpoint(path)
        except (KafkaLogError, OSError) as exc:
            verdict, message = describe_error(exc)
            status = "corrupt" if verdict == "corrupt" else "error"
            problems.append(f"{name}: {message}")
            continue
        absent = sorted(f"{t}-{p}" for t, p in offsets if f"{t}-{p}" not in present)
        data[name] = {"entries": len(offsets), "partitionsNotInDir": absent}
        negative = sorted(f"{t}-{p} {o}" for (t, p), o in offsets.items() if o < 0)
        if negative:  # Kafka never writes one; its load would take it as is
            status = "corrupt" if status == "ok" else status
            problems.append(f"{name}: negative offset (Kafka never writes one): {', '.join(negative)}")
    return Finding("logdir", log_dir, status, f"{len(present)} partition dirs", problems, data)


def _count_one(read: Callable[[str], Any]) -> Callable[[str], int]:
    def count(path: str) -> int:
        read(path)
        return 1

    return count


def _count_entries(read: Callable[[str], Any]) -> Callable[[str], int]:
    return lambda path: len(read(path))


#: how a loose file of each kind is checked: parse it, count its entries.
_LOOSE_FILE_READERS: dict[str, Callable[[str], int]] = {
    "offset-checkpoint": _count_entries(read_offset_checkpoint),
    "leader-epoch-checkpoint": _count_entries(read_leader_epoch_checkpoint),
    "partition-metadata": _count_one(read_partition_metadata),
    "meta-properties": _count_one(read_meta_properties),
    "snapshot": _count_entries(read_producer_snapshot),
    "kraft-snapshot": count_kraft_snapshot,
}


def check_file(path: str) -> Finding:
    """A loose checkpoint, metadata or snapshot file (not inside a checked dir): it must parse."""
    kind, _ = file_kind(os.path.basename(path))
    read = _LOOSE_FILE_READERS.get(kind)
    if read is None:
        return Finding("file", path, "error", "", ["not a segment, checkpoint or metadata file"])
    try:
        n = read(path)
    except Exception as exc:  # noqa: BLE001 - describe_error decides what it is
        return error_finding("file", path, exc)
    return Finding("file", path, "ok", f"{kind}, {n} entries")


def listdir_or_empty(path: str) -> list[str]:
    """The names in a dir; none when it cannot be listed (a vanished or unreadable dir has no files to check)."""
    try:
        return os.listdir(path)
    except OSError:
        return []

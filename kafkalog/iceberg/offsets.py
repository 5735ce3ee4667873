"""Where a sync resumes, and what it reads: the table's ``kafkalog.next-offsets`` against the archive.

Every snapshot a sync commits carries, in its summary, the next offset of every topic-partition the table holds
(``kafkalog.next-offsets``, JSON ``{"topic-partition": offset}``, the whole map, not only the partitions that
changed). The rows and the offsets are in the same snapshot, so they cannot disagree: a sync killed before its
commit leaves both at the previous snapshot. A snapshot another writer made (a compaction, an expiry) has no such
property; the resume point is then that of the newest ancestor that has one.

A partition is read from its resume offset (the segment holding it found by name, the byte position by the checked
``.index``: a seek, not a scan) up to its new next offset: the last stable offset under ``read_committed``
(:mod:`kafkalog.log.stable_offset`: an open transaction holds back what follows it until a later sync), the log
end under ``read_uncommitted``. The rows of offsets below the resume point are never decoded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import InvalidArgumentError
from kafkalog.log.stable_offset import PartitionTail, partition_tail

__all__ = ["NEXT_OFFSETS", "SKIPPED", "PartitionPlan", "plan_partitions", "table_next_offsets"]

#: the snapshot summary property holding the resume point
NEXT_OFFSETS = "kafkalog.next-offsets"
#: the snapshot summary property listing what ``--on-corrupt skip`` read past
SKIPPED = "kafkalog.skipped"


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def table_next_offsets(table: Any) -> dict[str, int]:
    """The resume point the table holds: the newest snapshot (on the main branch) that has the property."""
    metadata = table.metadata
    snap = table.current_snapshot()
    while snap is not None:
        raw = snap.summary.get(NEXT_OFFSETS) if snap.summary is not None else None
        if raw is not None:
            try:
                data = json.loads(raw)
                return {str(k): int(v) for k, v in data.items()}
            except (ValueError, TypeError, AttributeError):
                raise InvalidArgumentError(f"snapshot {snap.snapshot_id} has a malformed {NEXT_OFFSETS}: "
                                           f"{raw[:80]!r}") from None  # fmt: skip
        snap = metadata.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {}


@dataclass
class PartitionPlan:
    """One topic-partition of the archive: its segments, where this sync starts and where it stops."""

    topic: str
    partition: int
    items: list[Any]  # SegmentItems, offset order
    start: int  # the first offset wanted (the table's next offset, or the first segment's base)
    stop: int  # the new next offset: offsets in [start, stop) are read
    tail: PartitionTail | None = None
    aborted: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return tp_key(self.topic, self.partition)

    @property
    def read_bytes(self) -> int:
        """Bytes of the segments holding offsets in [start, stop) (what a read touches, at most)."""
        total = 0
        for i, item in enumerate(self.items):
            nxt = self.items[i + 1].base_offset if i + 1 < len(self.items) else None
            if (nxt is None or nxt > self.start) and item.base_offset < self.stop:
                total += max(item.size_bytes, 0)
        return total


def group_partitions(items: Iterable[Any]) -> dict[tuple[str, int], list[Any]]:
    """Live segments by topic-partition; one partition found in two dirs is refused (which one is the log?)."""
    by_tp: dict[tuple[str, int], list[Any]] = {}
    dirs: dict[tuple[str, int], str] = {}
    for item in items:
        if item.dir_state != "live":
            continue
        tp = (item.topic, item.partition)
        if dirs.setdefault(tp, item.partition_dir) != item.partition_dir:
            raise InvalidArgumentError(f"{tp_key(*tp)} is in two dirs, {dirs[tp]} and {item.partition_dir}: "
                                       "give the roots of one copy of each partition")  # fmt: skip
        by_tp.setdefault(tp, []).append(item)
    return by_tp


def plan_partitions(items: Iterable[Any], resume: dict[str, int], isolation: str, *,
                    options: dict[str, str] | None = None, rsm: Any = None) -> list[PartitionPlan]:  # fmt: skip
    """What each partition of the archive adds to the table (partitions with nothing new are left out)."""
    plans: list[PartitionPlan] = []
    for (topic, partition), segs in sorted(group_partitions(items).items()):
        segs = [s for s in segs if s.size_bytes > 0] or segs
        first = segs[0].base_offset
        start = max(resume.get(tp_key(topic, partition), first), first)
        tail = partition_tail(segs, start, options=options, rsm=rsm)
        if tail.log_end is None:
            continue
        stop = tail.log_end if isolation == "read_uncommitted" else tail.last_stable
        if stop <= start:
            continue
        plans.append(PartitionPlan(topic, partition, segs, start, stop, tail))
    return plans

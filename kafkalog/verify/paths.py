"""Verify whatever paths an operator names: segment files, index files, partition dirs, log dirs, whole trees,
loose checkpoint files. :func:`plan_paths` finds what to check; :func:`run_plan` yields one :class:`Finding` per
segment, partition dir, log dir and loose file, in that order, and keeps going past every problem.
"""

from __future__ import annotations

import dataclasses
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalog.archive.discovery import SegmentItem, discover_segments, nothing_found

from ..errors import InvalidPartitionDirError, KafkaLogError
from ..names import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, parse_partition_dir
from .findings import Finding, error_finding
from .metadata import check_file, check_log_dir, is_log_dir, listdir_or_empty
from .partition import partition_finding
from .segment import SegmentReport, segment_finding, verify_segment
from .startup import startup_problems

__all__ = ["VerifyPlan", "plan_paths", "run_plan"]

#: a segment's sibling files: naming one checks its segment.
_SEGMENT_SIBLINGS = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)


@dataclass
class VerifyPlan:
    """What lies under the paths: segments (in partition, base-offset order), partition dirs, log dirs, loose files,
    and a finding for each path that could not be looked at."""

    segments: list[SegmentItem] = field(default_factory=list)
    partition_dirs: set[str] = field(default_factory=set)
    log_dirs: set[str] = field(default_factory=set)
    files: list[str] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)
    #: storage options for the segments behind URLs (checked over the fetched bytes)
    options: dict[str, Any] | None = None
    #: a remote segment's partition dir -> the local dir holding copies of its small files (metadata,
    #: checkpoints; :func:`kafkalog.verify.remote.remote_plan`), where its partition is checked
    stand_ins: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(max(i.size_bytes, 0) for i in self.segments)

    @property
    def empty(self) -> bool:
        """Nothing to check was found (a summary would have nothing to say)."""
        return not (self.segments or self.partition_dirs or self.log_dirs or self.files)


def plan_paths(paths: Sequence[str]) -> VerifyPlan:
    """Segments, partition dirs, log dirs and loose metadata files under ``paths`` (each one once).

    Nothing found is never a pass: a path that does not exist or cannot be read, a dir below it that cannot be
    listed (or a partition dir that is a dangling symlink or a loop), and a path holding nothing Kafka wrote each
    become an error finding naming the path (:func:`kafkalog.archive.discovery.nothing_found`), with the OS's reason."""
    plan = VerifyPlan()
    seen: set[str] = set()
    failed: set[str] = set()

    def unreadable(exc: OSError) -> None:
        where = os.fsdecode(exc.filename) if exc.filename is not None else ""
        if where not in failed:
            failed.add(where)
            plan.errors.append(error_finding(_kind_of(where), where, exc))

    for raw in paths:
        before = (len(plan.segments), len(plan.partition_dirs), len(plan.log_dirs), len(plan.files), len(failed))
        try:
            _plan_one(plan, raw, seen, unreadable)
        except (KafkaLogError, OSError) as exc:
            plan.errors.append(error_finding(_kind_of(raw), raw, exc))
            continue
        after = (len(plan.segments), len(plan.partition_dirs), len(plan.log_dirs), len(plan.files), len(failed))
        if after == before:
            plan.errors.append(error_finding(_kind_of(raw), raw, nothing_found(raw)))
    plan.segments.sort(key=lambda s: (s.partition_dir, s.base_offset))
    return plan


def _kind_of(path: str) -> str:
    """The finding kind for a path that could not be checked: a partition dir by its name, else a dir or file."""
    try:
        parse_partition_dir(os.path.basename(os.path.normpath(path)))
        return "partition"
    except InvalidPartitionDirError:
        pass
    return "dir" if os.path.isdir(path) else "file"


def _plan_one(plan: VerifyPlan, raw: str, seen: set[str], on_error: Callable[[OSError], None]) -> None:
    """Add what lies under one operator-given path to ``plan``; raises for a path that cannot be looked at."""
    os.lstat(raw)  # a missing path: the OS's reason
    path = os.path.realpath(raw)
    target = path
    if os.path.isfile(path):
        stem, suffix = os.path.splitext(path)
        if suffix in _SEGMENT_SIBLINGS:
            target = stem + LOG_SUFFIX
            if not os.path.exists(target):
                plan.files.append(path)
                return
        elif suffix != LOG_SUFFIX:
            plan.files.append(path)
            return
    found = discover_segments(target, on_error=on_error)
    for item in found:
        if item.path not in seen:
            seen.add(item.path)
            plan.segments.append(item)
        plan.partition_dirs.add(item.partition_dir)
    if os.path.isdir(path):
        for dirpath, dirnames, filenames in os.walk(path):  # unreadable dirs: reported by the discovery above
            dirnames.sort()
            if is_log_dir(dirpath, filenames):
                plan.log_dirs.add(dirpath)
            if "leader-epoch-checkpoint" in filenames or "partition.metadata" in filenames:
                plan.partition_dirs.add(dirpath)
    for pdir in {i.partition_dir for i in found}:
        parent = os.path.dirname(pdir)
        if os.path.isdir(path) and is_log_dir(parent, listdir_or_empty(parent)) and parent.startswith(path):
            plan.log_dirs.add(parent)


def _opened_ahead(plan: VerifyPlan, rsm: Any) -> Iterator[tuple[SegmentItem, tuple[Any, Any] | None]]:
    """The plan's segments, each Aiven one with its opened segment (or the error opening it), opened ahead
    (:func:`kafkalog.archive.tiered.open_ahead`, given the storage options) so its round trips (the manifest, the
    `.log`'s open and first bytes) overlap the previous one's check."""
    from kafkalog.archive.tiered import AivenSegment, is_aiven_item, open_ahead

    if not any(is_aiven_item(i) for i in plan.segments):
        yield from ((i, None) for i in plan.segments)
        return

    def opener(item: SegmentItem) -> Any:
        if not is_aiven_item(item):
            return None
        return AivenSegment.open_item(item, rsm=rsm, options=plan.options)

    for item, seg, error in open_ahead(plan.segments, opener, options=plan.options):
        yield item, (seg, error) if is_aiven_item(item) else None


def run_plan(
    plan: VerifyPlan,
    *,
    index_check: bool = True,
    on_segment: Callable[[int], None] | None = None,
    rsm: Any = None,
) -> Iterator[Finding]:
    """Check everything in ``plan``: each segment (``on_segment(size)`` after it, for progress), then each partition
    dir from the reports of all its segments (one that could not be read makes its partition ERROR), then each log
    dir (with what Kafka's startup would refuse or mark stray in it: :mod:`.startup`), then the loose files.
    ``rsm``: the :class:`kafkalog.archive.tiered.RsmConfig` that tiered-storage objects were
    written with (see ``verify_segment``)."""
    by_partition: dict[str, list[SegmentReport]] = defaultdict(list)
    for item, opened in _opened_ahead(plan, rsm):
        rep = verify_segment(item, index_check=index_check, rsm=rsm, options=plan.options, opened=opened)
        here = plan.stand_ins.get(item.partition_dir)
        if here is None:
            by_partition[item.partition_dir].append(rep)
        else:  # the partition's checks read its metadata files from their copies
            moved = dataclasses.replace(rep.item, path=os.path.join(here, os.path.basename(item.path)),
                                        partition_dir=here)  # fmt: skip
            by_partition[here].append(dataclasses.replace(rep, item=moved))
        yield segment_finding(rep)
        if on_segment is not None:
            on_segment(max(item.size_bytes, 0))
    for pdir in sorted(plan.partition_dirs):
        yield partition_finding(pdir, by_partition.get(pdir, []))
    refusals = startup_problems(plan.log_dirs)
    for ldir in sorted(plan.log_dirs):
        finding = check_log_dir(ldir, plan.partition_dirs)
        if refusals.get(ldir):
            finding.problems.extend(refusals[ldir])
            if finding.status == "ok":
                finding.status = "corrupt"
            finding.data["startupRefusals"] = refusals[ldir]
        yield finding
    for path in plan.files:
        yield check_file(path)

"""The loader's plan (dry-run) mode: what loading a partition dir would do, decided without writing anything.

``plan_recovery`` walks the steps of ``LogLoader.load`` (see ``loader.py``) with the same inputs and the same
decisions (``classify_leftovers``, the same "needs recovery at open" test, ``LogSegment.valid_prefix`` for the bytes
a segment's recovery keeps, the same segments recovered from the recovery point on, the same later segments
deleted) but only reads: no index rebuilt, nothing truncated, renamed or deleted. Tests hold it to the real loader
on randomly damaged Kafka-written dirs (``tests/log/test_recovery_plan.py``).

With ``look_everywhere`` it also reads the segments recovery would *not* read (every segment after a clean
shutdown; those below the recovery point otherwise) and lists the ones holding bytes that are not valid batches or
index files failing their strict check, so a caller can say "Kafka would serve this corruption as is; recover with --full or --salvage".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata
from kafkalog.errors import CorruptCheckpointError, CorruptIndexError
from kafkalog.log.config import LogConfig
from kafkalog.log.epoch_cache import CHECKPOINT_FILE
from kafkalog.log.index_check import check_segment, is_corruption
from kafkalog.log.loader import classify_leftovers, offset_prefix
from kafkalog.names import INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_to_name
from kafkalog.segment.log_segment import LogSegment

__all__ = ["EPOCH_CHECKPOINT_REBUILT", "RecoveryPlan", "SegmentCut", "SegmentDrop", "UnseenCorruption", "plan_recovery"]

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: The plan's action for a malformed ``leader-epoch-checkpoint`` (Kafka refuses to load; ``Log.open`` rebuilds it).
EPOCH_CHECKPOINT_REBUILT = "rebuild malformed checkpoint from the batches (Kafka refuses to load)"


@dataclass(frozen=True)
class SegmentCut:
    """A segment recovery truncates: cut at ``position``, ``bytes`` removed, the readable offsets lost with them
    (None when the removed bytes hold no readable batch header, e.g. a torn tail)."""

    segment: str
    position: int
    bytes: int
    first_offset_lost: int | None
    last_offset_lost: int | None


@dataclass(frozen=True)
class SegmentDrop:
    """A whole segment recovery deletes, with the offsets of its readable batches (None for an empty one)."""

    segment: str
    bytes: int
    first_offset: int | None
    last_offset: int | None


@dataclass(frozen=True)
class UnseenCorruption:
    """A segment recovery would not read whose bytes from ``position`` on are not valid batches, or (``index``
    set, ``position`` None) whose index files fail their strict check: Kafka's load does not check the offset and
    time indexes of segments it does not recover, and serves lookups from them as they are."""

    segment: str
    position: int | None
    bytes: int
    index: str | None = None


@dataclass
class RecoveryPlan:
    """What loading the dir would do. ``log_end_before`` is the log end the files hold now (the last readable
    batch), ``log_end_after`` the one the load ends with; the offsets in between are what recovery loses."""

    dir: Path
    clean_shutdown: bool
    recovery_point: int
    log_start_offset: int
    log_end_before: int
    log_end_after: int
    actions: list[tuple[str, str]] = field(default_factory=list)  # (what, file name), as LogLoader.actions
    truncations: list[SegmentCut] = field(default_factory=list)
    deleted: list[SegmentDrop] = field(default_factory=list)
    unseen_corruption: list[UnseenCorruption] = field(default_factory=list)
    #: The largest batch timestamp the loaded log keeps (None when it keeps none): the partition's own clock.
    last_timestamp: int | None = None

    @property
    def loses_data(self) -> bool:
        """True when recovery would truncate or delete anything (the dry run's warning)."""
        return bool(self.truncations or self.deleted)

    @property
    def lost_ranges(self) -> list[tuple[int, int]]:
        """Offset ranges (inclusive) no longer in the log afterwards: everything past the new log end."""
        if self.log_end_after < self.log_end_before:
            return [(self.log_end_after, self.log_end_before - 1)]
        return []

    @property
    def offsets_lost(self) -> int:
        """How many offsets the lost ranges cover."""
        return sum(last - first + 1 for first, last in self.lost_ranges)


class _Seg:
    """One segment as the plan sees it: its file, and the valid prefix once computed."""

    __slots__ = ("seg", "name", "size", "prefix", "lasts", "starts", "max_ts")

    def __init__(self, seg: LogSegment, name: str) -> None:
        self.seg = seg
        self.name = name
        self.size = seg.size
        self.prefix: int | None = None
        starts, lasts, max_ts, _v2 = seg.batch_table()  # shallow scan: whole batches, CRCs not checked
        self.starts = starts.tolist()
        self.lasts = lasts.tolist()
        self.max_ts = max_ts.tolist()

    def valid_prefix(self) -> int:
        if self.prefix is None:
            self.prefix = self.seg.valid_prefix(self.size)
        return self.prefix

    def next_offset_within(self, end: int) -> int:
        """The offset after the last readable batch starting before ``end`` (the base offset when none)."""
        last = None
        for start, off in zip(self.starts, self.lasts, strict=True):
            if start >= end:
                break
            last = off
        return self.seg.base_offset if last is None else last + 1

    def max_timestamp_before(self, end: int) -> int | None:
        """The largest max timestamp of the batches starting before ``end`` (None when none has one)."""
        ts = [t for start, t in zip(self.starts, self.max_ts, strict=True) if start < end and t >= 0]
        return max(ts) if ts else None

    def last_from(self, position: int) -> int | None:
        """The largest readable offset among the batches starting at or after ``position`` (None when none)."""
        lasts = [off for start, off in zip(self.starts, self.lasts, strict=True) if start >= position]
        return max(lasts) if lasts else None


def plan_recovery(
    dir: str | os.PathLike,
    config: LogConfig | None = None,
    *,
    clean_shutdown: bool,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    look_everywhere: bool = False,
) -> RecoveryPlan:
    """What ``Log.open(dir, config, clean_shutdown=..., recovery_point=..., log_start_offset=...)`` would do to the
    files, without writing. ``look_everywhere`` also reads the segments recovery would skip (``unseen_corruption``:
    bytes that are not valid batches, index files failing their strict check). A malformed ``partition.metadata``
    raises the ``CorruptCheckpointError`` the load raises, before anything else is read."""
    d = Path(dir)
    config = config or LogConfig()
    names = sorted(e.name for e in os.scandir(d) if e.is_file())
    if "partition.metadata" in names:
        read_partition_metadata(d / "partition.metadata")  # raises as the load does (Kafka: the log dir offline)
    doomed, swaps = classify_leftovers(names)
    actions: list[tuple[str, str]] = list(doomed)
    if CHECKPOINT_FILE in names and _malformed_epoch_checkpoint(d / CHECKPOINT_FILE):
        # Kafka refuses to load the partition; Log.open rebuilds the file from the batches' leader epochs.
        actions.append((EPOCH_CHECKPOINT_REBUILT, CHECKPOINT_FILE))
    gone = {name for _why, name in doomed}
    names = [n for n in names if n not in gone]

    # Interrupted cleaner swaps: the .swap segments replace every file in their offset range.
    swap_bases = {}
    for name in swaps:
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and offset_prefix(name) is not None:
            swap_bases[offset_prefix(name)] = name
    if swap_bases:
        lo = min(swap_bases)
        hi = max(_open(d, b, config, SWAP_SUFFIX).read_next_offset() for b in swap_bases)
        replaced = [n for n in names if not n.endswith(SWAP_SUFFIX) and (o := offset_prefix(n)) is not None
                    and lo <= o < hi]
        actions.extend(("replaced by swap", n) for n in replaced)
        names = [n for n in names if n not in set(replaced)]
        actions.extend(("swap completed", n[: -len(SWAP_SUFFIX)]) for n in names if n.endswith(SWAP_SUFFIX))

    present = set(names)
    segs: dict[int, _Seg] = {}
    truncations: list[SegmentCut] = []
    recovered: set[int] = set()
    load_truncation: int | None = None
    for name in names:
        plain = name[: -len(SWAP_SUFFIX)] if name.endswith(SWAP_SUFFIX) else name
        off = offset_prefix(plain)
        if off is None:
            continue
        stem = offset_to_name(off)
        has = {s: stem + s in present or stem + s + SWAP_SUFFIX in present for s in (LOG_SUFFIX, *_INDEX_SUFFIXES)}
        if plain.endswith(_INDEX_SUFFIXES) and not has[LOG_SUFFIX]:
            actions.append(("orphan index", name))
        elif plain == stem + LOG_SUFFIX:
            suffix = SWAP_SUFFIX if name.endswith(SWAP_SUFFIX) else ""
            seg = _Seg(_open(d, off, config, suffix), plain)
            segs[off] = seg
            why = None
            if not has[INDEX_SUFFIX]:
                why = "recover: missing offset index"
            elif has[TXN_INDEX_SUFFIX]:
                try:
                    seg.seg.txn_index.sanity_check()
                except CorruptIndexError:
                    why = "recover: corrupt index"
            if why is not None:
                actions.append((why, plain))
                recovered.add(off)
                cut = _cut(seg)
                if cut is not None:
                    truncations.append(cut)
                    if load_truncation is None:
                        load_truncation = off

    bases = sorted(segs)
    log_end_before = _log_end(segs, bases)
    deleted: list[SegmentDrop] = []
    alive = list(bases)
    if not clean_shutdown and load_truncation is not None:
        later = [b for b in alive if b > load_truncation]
        deleted.extend(_drop(segs[b]) for b in later)
        alive = [b for b in alive if b <= load_truncation]
    examined: set[int] = set(recovered)
    if not clean_shutdown:
        floor = max([b for b in alive if b <= recovery_point], default=alive[0] if alive else 0)
        unflushed = [b for b in alive if b >= floor]
        for i, b in enumerate(unflushed):
            examined.add(b)
            if b in recovered:
                continue  # already cut to its valid prefix at open: recovering it again removes nothing
            cut = _cut(segs[b])
            if cut is not None:
                truncations.append(cut)
                actions.append(("truncated", segs[b].name))
                doomed_bases = unflushed[i + 1 :]
                deleted.extend(_drop(segs[x]) for x in doomed_bases)
                alive = [x for x in alive if x not in doomed_bases]
                break
    for drop in deleted:
        actions.append(("deleted segment", drop.segment))

    if alive:
        last = segs[alive[-1]]
        if alive[-1] in examined:  # rebuilt from its batches: its end is that of its valid prefix
            log_end_after = last.next_offset_within(last.valid_prefix())
        else:
            log_end_after = last.seg.read_next_offset()
    else:
        log_end_after = log_start_offset
    if alive and log_end_after < log_start_offset:
        deleted.extend(_drop(segs[b]) for b in alive)
        actions.extend(("deleted segment", segs[b].name) for b in alive)
        log_end_after = log_start_offset
        alive = []

    # Batches the load keeps: a recovered segment's valid prefix, every batch of one it does not read.
    kept_ts = [t for b in alive if (t := segs[b].max_timestamp_before(
        segs[b].valid_prefix() if b in examined else segs[b].size)) is not None]  # fmt: skip
    unseen: list[UnseenCorruption] = []
    if look_everywhere:
        for b in bases:
            if b in examined:
                continue
            seg = segs[b]
            prefix = seg.valid_prefix()
            if prefix < seg.size:
                unseen.append(UnseenCorruption(seg.name, prefix, seg.size - prefix))
                continue
            try:
                check_segment(seg.seg)
            except Exception as exc:  # noqa: BLE001 - is_corruption decides; anything else is the caller's
                if not is_corruption(exc):
                    raise
                unseen.append(UnseenCorruption(seg.name, None, 0, f"{type(exc).__name__}: {exc}"))
    for seg in segs.values():
        seg.seg.close_handlers()
    return RecoveryPlan(
        d, clean_shutdown, recovery_point, log_start_offset, max(log_end_before, log_end_after), log_end_after,
        actions, truncations, deleted, unseen, max(kept_ts) if kept_ts else None,
    )


def _malformed_epoch_checkpoint(path: Path) -> bool:
    try:
        read_leader_epoch_checkpoint(path)
    except CorruptCheckpointError:
        return True
    return False


def _open(d: Path, base: int, config: LogConfig, suffix: str = "") -> LogSegment:
    """A segment over existing files, opened for reading only: a plan works on a read-only mount too."""
    return LogSegment(d, base, index_interval_bytes=config.index_interval_bytes,
                      max_index_size=config.segment_index_bytes, file_suffix=suffix, read_only=True)


def _cut(seg: _Seg) -> SegmentCut | None:
    prefix = seg.valid_prefix()
    if prefix >= seg.size:
        return None
    last = seg.last_from(prefix)
    first = seg.next_offset_within(prefix) if last is not None else None
    return SegmentCut(seg.name, prefix, seg.size - prefix, first, last)


def _drop(seg: _Seg) -> SegmentDrop:
    last = seg.last_from(0)
    return SegmentDrop(seg.name, seg.size, None if last is None else seg.seg.base_offset, last)


def _log_end(segs: dict[int, _Seg], bases: list[int]) -> int:
    """The log end the files hold: after the last readable batch of the last segment holding one."""
    for b in reversed(bases):
        if segs[b].lasts:
            return max(segs[b].lasts) + 1
    return bases[-1] if bases else 0

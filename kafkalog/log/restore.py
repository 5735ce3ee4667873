"""Partition dirs rebuilt from a tiered-storage bucket at their original offsets (``kafkalog tiered restore``).

Every backup tool re-produces records, so offsets change and consumer groups need translating; the remote segments
a broker copied are Kafka's own bytes, so a partition can come back exactly: each segment's ``.log``, ``.index``,
``.timeindex`` and ``.txnindex`` under its base offset, each segment's producer snapshot under the next segment's
base offset (where the broker took it), the last segment's leader-epoch checkpoint (the whole lineage up to it) and
``partition.metadata`` with the bucket's topic id. Kafka's loader then opens the dir with the first remote
segment's base offset as the log start and the last one's end as the log end; with no recovery-point checkpoint
it recovers (re-checks) every restored segment.

Crash safety: a partition is written into ``<topic>-<partition>.<uuid>-delete`` inside the target log dir (a name
a broker that finds it deletes), fsynced, then renamed to ``<topic>-<partition>`` and the log dir fsynced. An
existing partition dir is never touched. Read back after the write: every restored ``.log`` must hold CRC-valid
batches from its base offset to the end offset the metadata states.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import RemoteObject, SegmentItem, list_remote_objects
from kafkalog.archive.tiered.aiven import AivenSegment, materialize, open_ahead

from ..checkpoint.atomic import fsync_dir
from ..checkpoint.partition_metadata import format_partition_metadata
from ..errors import InvalidArgumentError, KafkaLogError, NothingToCheckError
from ..names import offset_to_name
from ..records import read_batches

__all__ = ["RestoredPartition", "RestorePlan", "plan_restore", "restore"]

_LOCAL_SUFFIXES = {"log": ".log", "index": ".index", "timeindex": ".timeindex", "txnindex": ".txnindex"}
#: where a segment's producer snapshot waits for its name (the next segment's base offset): not ``.snapshot``,
#: whose name at this base offset the previous segment's snapshot already has
_SNAPSHOT_STAGED = ".remote-snapshot"


@dataclass
class RestoredPartition:
    """One partition's plan (and, after :func:`restore`, what was written)."""

    topic: str
    partition: int
    topic_id: str
    target: str
    segments: list[tuple[int, str]]  # (base offset, segment id), in offset order
    log_start_offset: int
    log_end_offset: int | None  # the next offset; None where no metadata says and nothing was read yet
    bytes: int
    layout: str
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"partition": f"{self.topic}-{self.partition}", "topic_id": self.topic_id, "target": self.target,
                "segments": len(self.segments), "base_offsets": [b for b, _ in self.segments],
                "log_start_offset": self.log_start_offset, "log_end_offset": self.log_end_offset,
                "bytes": self.bytes, "layout": self.layout, "files": self.files}


@dataclass
class RestorePlan:
    """What a restore writes (``dry_run``: would write)."""

    to: str
    partitions: list[RestoredPartition]
    dry_run: bool = True
    objects: dict[tuple[str, int], list[RemoteObject]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"to": self.to, "dry_run": self.dry_run, "partitions": [p.to_dict() for p in self.partitions]}


def plan_restore(bucket: str | os.PathLike, to: str | os.PathLike, *, partitions: Iterable[str] = (),
                 segments: Mapping[str, tuple[int, int]] | None = None, topic_id: str | None = None,
                 options: Mapping[str, str] | None = None) -> RestorePlan:
    """Which segments of ``bucket`` make each partition. ``segments``: the readable remote segments by segment id
    (start, end offset), as ``__remote_log_metadata`` says (others in the bucket are ignored); without it every
    segment in the bucket is taken and two with one base offset are refused. ``partitions``: ``topic-N`` names to
    restore (default: all). A partition dir already in ``to`` is an error."""
    objects, _other = list_remote_objects(bucket, options)
    wanted = set(partitions)
    groups: dict[tuple[str, int], list[RemoteObject]] = defaultdict(list)
    for o in objects:
        if wanted and f"{o.topic}-{o.partition}" not in wanted:
            continue
        if segments is not None and o.segment_id not in segments:
            continue
        groups[(o.topic, o.partition)].append(o)
    missing = wanted - {f"{t}-{p}" for t, p in groups}
    if missing:
        raise NothingToCheckError(f"no remote segment of {', '.join(sorted(missing))} here", path=os.fspath(bucket))
    if not groups:
        raise NothingToCheckError("no remote segment objects here", path=os.fspath(bucket))
    root = os.fspath(to)
    plan = RestorePlan(root, [], objects=dict(groups))
    for (topic, part), objs in sorted(groups.items()):
        plan.partitions.append(_plan_partition(root, topic, part, objs, segments, topic_id))
    return plan


def _plan_partition(root: str, topic: str, part: int, objs: list[RemoteObject],
                    segments: Mapping[str, tuple[int, int]] | None, topic_id: str | None) -> RestoredPartition:
    name = f"{topic}-{part}"
    target = os.path.join(root, name)
    if os.path.lexists(target):
        raise InvalidArgumentError(f"{target}: a partition dir is already there; restore writes only new dirs")
    ids = {o.topic_id for o in objs}
    if len(ids) > 1:
        raise InvalidArgumentError(f"{name}: objects of {len(ids)} topic ids ({', '.join(sorted(ids))}): restore "
                                   "one with --remote-log-metadata")
    by_segment: dict[str, dict[str, RemoteObject]] = defaultdict(dict)
    for o in objs:
        by_segment[o.segment_id][o.suffix] = o
    order = sorted(by_segment, key=lambda s: next(iter(by_segment[s].values())).base_offset)
    bases = [next(iter(by_segment[s].values())).base_offset for s in order]
    for sid in order:
        if "log" not in by_segment[sid]:
            raise InvalidArgumentError(f"{name}: segment {sid} has no .log object: cannot restore it")
    for (b1, s1), (b2, s2) in zip(zip(bases, order, strict=False), zip(bases[1:], order[1:], strict=False), strict=False):
        if b1 == b2:
            raise InvalidArgumentError(f"{name}: segments {s1} and {s2} both start at {b1}: restore with "
                                       "--remote-log-metadata, which says which one is live")
        if segments is not None and segments[s1][1] + 1 != b2:
            raise InvalidArgumentError(f"{name}: offsets {segments[s1][1] + 1}-{b2 - 1} are in no remote segment: "
                                       "a restore would not be the partition the broker had")
    end = segments[order[-1]][1] + 1 if segments is not None else None
    layout = next(iter(objs)).layout
    size = sum(max(o.size, 0) for o in objs)
    return RestoredPartition(topic, part, topic_id or ids.pop(), target, list(zip(bases, order, strict=True)),
                             bases[0], end, size, layout)


def restore(plan: RestorePlan, *, rsm: Any = None, options: Mapping[str, str] | None = None) -> RestorePlan:
    """Write every partition of ``plan`` (see the module's docstring); returns the plan with the files written.
    The caller holds the log dir's lock. A failure leaves no ``<topic>-<partition>`` dir behind."""
    os.makedirs(plan.to, exist_ok=True)
    plan.dry_run = False
    for p in plan.partitions:
        staging = os.path.join(plan.to, f"{p.topic}-{p.partition}.{uuid.uuid4().hex}-delete")
        os.mkdir(staging)
        try:
            _write_partition(p, plan.objects[(p.topic, p.partition)], staging, rsm, options)
            _check_written(p, staging)
            for name in os.listdir(staging):
                _fsync(os.path.join(staging, name))
            fsync_dir(staging)
            os.rename(staging, p.target)
            fsync_dir(plan.to)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return plan


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_partition(p: RestoredPartition, objs: list[RemoteObject], staging: str, rsm: Any,
                     options: Mapping[str, str] | None) -> None:
    by_segment: dict[str, dict[str, RemoteObject]] = defaultdict(dict)
    for o in objs:
        by_segment[o.segment_id][o.suffix] = o
    bases = [b for b, _ in p.segments]
    aiven = p.layout == "tiered-aiven"
    with contextlib.closing(_open_aiven([by_segment[sid]["log"] for _, sid in p.segments] if aiven else [],
                                       rsm, options)) as opened:  # fmt: skip
        for i, (base, sid) in enumerate(p.segments):
            stem = os.path.join(staging, offset_to_name(base))
            have = by_segment[sid]
            if aiven:
                item, seg, error = next(opened)
                if error is not None:
                    raise error
                _materialize_aiven(item, seg, stem)
            else:
                for suffix, local in _LOCAL_SUFFIXES.items():
                    if suffix in have:
                        storage.fetch(have[suffix].path, stem + local, options=options)
                for suffix, local in (("snapshot", _SNAPSHOT_STAGED), ("leader_epoch_checkpoint", ".epochs")):
                    if suffix in have:
                        storage.fetch(have[suffix].path, stem + local, options=options)
            next_base = bases[i + 1] if i + 1 < len(bases) else p.log_end_offset
            if next_base is not None and os.path.exists(stem + _SNAPSHOT_STAGED):
                os.replace(stem + _SNAPSHOT_STAGED, os.path.join(staging, offset_to_name(next_base) + ".snapshot"))
            # else: the last segment's snapshot moves to the log end once the read-back (_check_written) found it
            epochs = stem + ".epochs"
            if os.path.exists(epochs):
                if i + 1 == len(p.segments):
                    os.replace(epochs, os.path.join(staging, "leader-epoch-checkpoint"))
                else:
                    os.unlink(epochs)
    with open(os.path.join(staging, "partition.metadata"), "wb") as f:
        f.write(format_partition_metadata(p.topic_id))
    p.files = sorted(os.listdir(staging))


def _open_aiven(logs: list[RemoteObject], rsm: Any, options: Mapping[str, str] | None
                ) -> Iterator[tuple[SegmentItem, AivenSegment | None, BaseException | None]]:  # fmt: skip
    """The Aiven segments of ``logs`` opened :data:`~kafkalog.archive.tiered.aiven.OPEN_AHEAD` ahead of the one
    being written (:func:`~kafkalog.archive.tiered.open_ahead`: manifest, key unwrap and first chunks fetched
    while the previous segment is restored), each with its size from the listing (no HEAD)."""
    items = [SegmentItem(log.path, storage.dirname(log.path), log.topic, log.partition, log.base_offset, log.size,
                         layout="tiered-aiven") for log in logs]  # fmt: skip

    def opener(item: SegmentItem) -> AivenSegment:
        return AivenSegment.open_item(item, rsm=rsm, options=options)

    return open_ahead(items, opener, options=options or {})


def _materialize_aiven(item: SegmentItem, seg: AivenSegment, stem: str) -> None:
    """An Aiven segment's original bytes and indexes, decrypted and decompressed, under ``stem``."""
    scratch = stem + ".aiven"
    out = materialize(item, scratch, segment=seg)
    src = out.path[: -len(".log")]
    for local in (".log", ".index", ".timeindex", ".txnindex"):
        if os.path.exists(src + local):
            os.replace(src + local, stem + local)
    if os.path.exists(src + ".snapshot"):
        os.replace(src + ".snapshot", stem + _SNAPSHOT_STAGED)
    if os.path.exists(src + ".leader_epoch_checkpoint"):
        os.replace(src + ".leader_epoch_checkpoint", stem + ".epochs")
    shutil.rmtree(scratch)


def _check_written(p: RestoredPartition, staging: str) -> None:
    """Every restored ``.log``, read once: CRC-valid batches from its base offset, each segment ending where the
    next begins and the last at the log end offset; where no metadata gave the log end, the last batch sets it
    (and the last segment's producer snapshot is named by it)."""
    found_end = p.log_end_offset is None
    bounds = [b for b, _ in p.segments] + [p.log_end_offset]
    for (base, sid), nxt in zip(p.segments, bounds[1:], strict=True):
        path = os.path.join(staging, offset_to_name(base) + ".log")
        reader = read_batches(path)
        first = last = None
        for batch in reader:
            if not batch.is_valid():
                raise KafkaLogError(f"{p.topic}-{p.partition}: segment {sid} restored with a bad CRC at offset "
                                    f"{batch.base_offset}")
            first = batch.base_offset if first is None else first
            last = batch.last_offset
        if reader.error is not None:
            raise KafkaLogError(f"{p.topic}-{p.partition}: segment {sid} restored unreadable: {reader.error}")
        if nxt is None and last is not None:  # the last segment, no metadata: it ends the log
            nxt = p.log_end_offset = last + 1
        if first is None or first < base or last is None or last + 1 > nxt:
            raise KafkaLogError(f"{p.topic}-{p.partition}: segment {sid} holds offsets {first}-{last}, not within "
                                f"{base}-{'' if nxt is None else nxt - 1}")
    stem = os.path.join(staging, offset_to_name(p.segments[-1][0]))
    if found_end and os.path.exists(stem + _SNAPSHOT_STAGED):
        os.replace(stem + _SNAPSHOT_STAGED, os.path.join(staging, offset_to_name(p.log_end_offset) + ".snapshot"))
        p.files = sorted(os.listdir(staging))

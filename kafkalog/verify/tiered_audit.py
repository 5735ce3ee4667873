"""A tiered-storage bucket checked against the broker's ``__remote_log_metadata`` (KIP-405), read-only.

What a broker believes is in remote storage is the replayed metadata (:mod:`kafkalog.metadata.remote_log`); what
is there is the bucket's listing. Per topic-partition the audit reports:

* ``missing``/``size``: a ``COPY_SEGMENT_FINISHED`` segment whose objects are absent or not the size the metadata
  (LocalTieredStorage: the ``.log`` is the segment) or the ``.rsm-manifest`` (Aiven: chunked, transformed) states;
* ``orphan``: objects no metadata names (a copy whose metadata was never written), with their bytes;
* ``unfinished-copy``: ``COPY_SEGMENT_STARTED`` with no finish (a broker died mid-copy: its objects are orphans);
* ``unfinished-delete``/``undeleted``: ``DELETE_SEGMENT_STARTED`` without a finish, or ``DELETE_SEGMENT_FINISHED``
  segments whose objects remain (storage paid for, never read again);
* ``gap``/``overlap``: offsets between the readable remote segments, and against the local log start offset when a
  log dir is given (offsets neither remote nor local are lost to consumers);
* ``epochs``: leader-epoch lineage (each segment's epochs start at its start offset, epochs never go back);
* ``metadata``: records that could not be read, and transitions Kafka refuses.
Any of these makes the partition ``corrupt`` (exit 1).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import RemoteObject, list_remote_objects
from kafkalog.archive.tiered.aiven import read_manifest

from ..checkpoint.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    effective_log_start_offset,
    read_log_dir_checkpoints,
)
from ..checkpoint.partition_metadata import read_partition_metadata
from ..errors import CorruptTieredObjectError, KafkaLogError
from ..metadata.remote_log import (
    COPY_FINISHED,
    COPY_STARTED,
    DELETE_FINISHED,
    DELETE_STARTED,
    RemoteLogMetadata,
    RemotePartition,
    RemoteSegment,
    read_remote_log_metadata,
)
from ..names import file_kind, parse_partition_dir
from .findings import Finding

__all__ = ["AuditReport", "audit_bucket", "LOCAL_TIERED_OBJECTS", "AIVEN_OBJECTS"]

#: the objects LocalTieredStorage writes for every segment (``.txnindex`` only where the segment had one)
LOCAL_TIERED_OBJECTS = ("log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint")
#: the objects Aiven's RemoteStorageManager writes for every segment
AIVEN_OBJECTS = ("log", "indexes", "rsm-manifest")


@dataclass
class AuditReport:
    """One finding per topic-partition (``kind`` ``remote-partition``), plus what was listed and replayed."""

    findings: list[Finding] = field(default_factory=list)
    objects: int = 0
    object_bytes: int = 0
    metadata_records: int = 0
    orphan_bytes: int = 0

    @property
    def exit_code(self) -> int:
        return max((f.exit_code for f in self.findings), default=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects": self.objects, "object_bytes": self.object_bytes, "metadata_records": self.metadata_records,
            "orphan_bytes": self.orphan_bytes,
            "partitions": [{"partition": f.path, "status": f.status, "summary": f.summary, "problems": f.problems,
                            **f.data} for f in self.findings],
        }


def audit_bucket(bucket: str | os.PathLike, metadata_dirs: Iterable[str | os.PathLike], *,
                 log_dir: str | os.PathLike | None = None, options: Mapping[str, str] | None = None) -> AuditReport:
    """Audit ``bucket`` (a local dir or a URL) against the ``__remote_log_metadata`` dirs; nothing is written.
    Objects are matched to the metadata by topic id, partition and segment id, so Aiven's ``key.prefix`` needs no
    setting. I/O errors propagate (the CLI says exit 2); findings are the report's."""
    meta = read_remote_log_metadata(metadata_dirs)
    objects, _other = list_remote_objects(bucket, options)
    report = AuditReport(objects=len(objects), object_bytes=sum(max(o.size, 0) for o in objects),
                         metadata_records=meta.records)
    by_partition: dict[tuple[str, int], list[RemoteObject]] = defaultdict(list)
    for o in objects:
        by_partition[(o.topic_id, o.partition)].append(o)
    local = _local_log_starts(log_dir) if log_dir is not None else None
    for key in sorted(set(meta.partitions) | set(by_partition), key=lambda k: (_name(meta, by_partition, k), k)):
        part = meta.partitions.get(key)
        finding = _audit_partition(part, by_partition.get(key, []), local, options, key,
                                   _name(meta, by_partition, key))
        report.orphan_bytes += finding.data.get("orphan_bytes", 0)
        report.findings.append(finding)
    if meta.problems:
        report.findings.append(Finding("remote-partition", "__remote_log_metadata", "corrupt",
                                       f"{len(meta.problems)} metadata record(s) could not be read",
                                       [f"metadata: {p}" for p in meta.problems]))
    return report


def _name(meta: RemoteLogMetadata, by_partition: Mapping[tuple[str, int], list[RemoteObject]],
          key: tuple[str, int]) -> str:
    part = meta.partitions.get(key)
    if part is not None:
        return part.name
    o = by_partition[key][0]
    return f"{o.topic}-{o.partition}"


def _local_log_starts(log_dir: str | os.PathLike) -> dict[tuple[str, int], tuple[str, int | None]]:
    """(topic, partition) -> (topic id or "", log start offset) of each partition dir of a local log dir."""
    root = os.fspath(log_dir)
    starts = read_log_dir_checkpoints(root, (LOG_START_OFFSET_CHECKPOINT,))[LOG_START_OFFSET_CHECKPOINT]
    out: dict[tuple[str, int], tuple[str, int | None]] = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            continue
        try:
            tp = parse_partition_dir(name)
        except KafkaLogError:
            continue
        bases = [int(n[:20]) for n in os.listdir(path) if file_kind(n) == ("log", n) and n[:20].isdigit()]
        try:
            topic_id = read_partition_metadata(os.path.join(path, "partition.metadata"))
        except (FileNotFoundError, KafkaLogError):
            topic_id = ""
        key = (tp.topic, tp.partition)
        out[key] = (topic_id, effective_log_start_offset(starts.get(key), min(bases, default=None)))
    return out


def _audit_partition(part: RemotePartition | None, objects: list[RemoteObject], local: dict | None,
                     options: Mapping[str, str] | None, key: tuple[str, int], name: str) -> Finding:
    problems: list[str] = []
    by_segment: dict[str, list[RemoteObject]] = defaultdict(list)
    for o in objects:
        by_segment[o.segment_id].append(o)
    segments = part.segments if part is not None else {}
    orphan_bytes = 0
    for sid in sorted(set(by_segment) - set(segments)):
        objs = by_segment[sid]
        size = sum(max(o.size, 0) for o in objs)
        orphan_bytes += size
        problems.append(f"orphan: segment {sid} at offset {objs[0].base_offset}: {len(objs)} object(s), {size} "
                        "bytes no metadata names")
    for seg in sorted(segments.values(), key=lambda s: (s.start_offset, s.segment_id)):
        objs = by_segment.get(seg.segment_id, [])
        size = sum(max(o.size, 0) for o in objs)
        if seg.state == COPY_FINISHED:
            problems.extend(_check_objects(seg, objs, options))
        elif seg.state == COPY_STARTED:
            orphan_bytes += size
            problems.append(f"unfinished-copy: segment {seg.segment_id} (offsets {seg.start_offset}-"
                            f"{seg.end_offset}) was never finished: {len(objs)} object(s), {size} bytes")
        elif seg.state == DELETE_STARTED:
            problems.append(f"unfinished-delete: segment {seg.segment_id} (offsets {seg.start_offset}-"
                            f"{seg.end_offset}): delete started, never finished; {len(objs)} object(s) left")
        elif seg.state == DELETE_FINISHED and objs:
            orphan_bytes += size
            problems.append(f"undeleted: segment {seg.segment_id} (offsets {seg.start_offset}-{seg.end_offset}) "
                            f"is deleted in the metadata but {len(objs)} object(s), {size} bytes remain")
    live = part.live() if part is not None else []
    problems.extend(_offset_problems(live))
    problems.extend(_epoch_problems(live))
    if part is not None:
        problems.extend(f"metadata: {p}" for p in part.problems)
        if part.delete_states and part.delete_states[-1] == "DELETE_PARTITION_FINISHED" and objects:
            problems.append(f"undeleted: the partition is deleted in the metadata but {len(objects)} object(s) "
                            "remain")
    elif objects:
        problems.insert(0, f"orphan: no metadata names this partition (topic id {key[0]})")
    data: dict[str, Any] = {"topic_id": key[0], "segments": len(live), "objects": len(objects),
                            "orphan_bytes": orphan_bytes}
    if live:
        data["remote_start_offset"] = live[0].start_offset
        data["remote_end_offset"] = max(s.end_offset for s in live)
    if local is not None and part is not None:
        problems.extend(_local_problems(part, live, local, data))
    status = "corrupt" if problems else "ok"
    summary = (f"{len(problems)} problem(s)" if problems else
               f"{len(live)} remote segment(s)" + (f", offsets {data['remote_start_offset']}-"
                                                   f"{data['remote_end_offset']}" if live else ""))
    return Finding("remote-partition", name, status, summary, problems, data)


def _check_objects(seg: RemoteSegment, objs: list[RemoteObject], options: Mapping[str, str] | None) -> list[str]:
    have = {o.suffix: o for o in objs}
    aiven = any(o.layout == "tiered-aiven" for o in objs) or "rsm-manifest" in have
    required = AIVEN_OBJECTS if aiven else LOCAL_TIERED_OBJECTS
    where = f"segment {seg.segment_id} (offsets {seg.start_offset}-{seg.end_offset})"
    out = [f"missing: {where}: no .{s} object" for s in required if s not in have]
    for o in objs:
        if o.base_offset != seg.start_offset:
            out.append(f"metadata: {where}: object {storage.basename(o.path)} is named for offset {o.base_offset}")
    log = have.get("log")
    if log is None:
        return out
    if not aiven:
        if log.size != seg.size_bytes:
            out.append(f"size: {where}: .log is {log.size} bytes, the metadata says {seg.size_bytes}")
        return out
    manifest = have.get("rsm-manifest")
    if manifest is None:
        return out
    try:
        m = read_manifest(manifest.path, options)
    except CorruptTieredObjectError as exc:
        return [*out, f"missing: {where}: .rsm-manifest unreadable: {exc}"]
    ci = m.chunk_index
    if ci.original_file_size != seg.size_bytes:
        out.append(f"size: {where}: the manifest's segment is {ci.original_file_size} bytes, the metadata says "
                   f"{seg.size_bytes}")
    if ci.transformed_total != log.size:
        out.append(f"size: {where}: .log is {log.size} bytes, the manifest's chunks add up to {ci.transformed_total}")
    idx = have.get("indexes")
    if idx is not None and idx.size != m.indexes_total:
        out.append(f"size: {where}: .indexes is {idx.size} bytes, the manifest says {m.indexes_total}")
    return out


def _offset_problems(live: list[RemoteSegment]) -> list[str]:
    out = []
    for prev, seg in zip(live, live[1:], strict=False):
        if seg.start_offset > prev.end_offset + 1:
            out.append(f"gap: offsets {prev.end_offset + 1}-{seg.start_offset - 1} are in no remote segment "
                       f"(between {prev.segment_id} and {seg.segment_id})")
        elif seg.start_offset <= prev.end_offset:
            out.append(f"overlap: segment {seg.segment_id} starts at {seg.start_offset}, inside {prev.segment_id} "
                       f"(offsets {prev.start_offset}-{prev.end_offset})")
    return out


def _epoch_problems(live: list[RemoteSegment]) -> list[str]:
    out = []
    last_epoch = -1
    for seg in live:
        epochs = seg.leader_epochs
        where = f"segment {seg.segment_id} (offsets {seg.start_offset}-{seg.end_offset})"
        if not epochs:
            out.append(f"epochs: {where} lists no leader epoch")
            continue
        if epochs[0][1] != seg.start_offset:
            out.append(f"epochs: {where}: its first epoch {epochs[0][0]} starts at {epochs[0][1]}, not at the "
                       "segment's start")
        for (e1, o1), (e2, o2) in zip(epochs, epochs[1:], strict=False):
            if not (e2 > e1 and seg.start_offset <= o1 < o2 <= seg.end_offset):
                out.append(f"epochs: {where}: epoch {e2} at {o2} does not follow epoch {e1} at {o1}")
        if epochs[0][0] < last_epoch:
            out.append(f"epochs: {where} starts in epoch {epochs[0][0]}, below the previous segment's {last_epoch}")
        last_epoch = max(last_epoch, epochs[-1][0])
    return out


def _local_problems(part: RemotePartition, live: list[RemoteSegment], local: dict, data: dict) -> list[str]:
    entry = local.get((part.topic, part.partition))
    if entry is None:
        return []
    topic_id, start = entry
    data["local_log_start_offset"] = start
    out = []
    if topic_id and topic_id != part.topic_id:
        out.append(f"metadata: the local partition dir's topic id is {topic_id}, the remote one {part.topic_id}")
        return out
    if live and start is not None:
        end = max(s.end_offset for s in live)
        if start > end + 1:
            out.append(f"gap: offsets {end + 1}-{start - 1} are neither in remote storage (which ends at {end}) "
                       f"nor in the local log (which starts at {start})")
    return out

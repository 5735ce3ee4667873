"""``__remote_log_metadata`` replayed: every remote segment a broker copied (or began to), and its state.

``TopicBasedRemoteLogMetadataManager`` appends, per remote segment, a ``RemoteLogSegmentMetadataRecord`` (state
``COPY_SEGMENT_STARTED``) and then ``RemoteLogSegmentMetadataUpdateRecord``s (``COPY_SEGMENT_FINISHED``,
``DELETE_SEGMENT_STARTED``, ``DELETE_SEGMENT_FINISHED``); a partition's deletion is a
``RemotePartitionDeleteMetadataRecord``. Replaying them in offset order gives what a broker's
``RemoteLogMetadataCache`` holds, plus what the cache forgets (finished deletes, unfinished copies), which is what
an audit of the bucket needs. Transitions Kafka refuses (``RemoteLogSegmentState.isValidTransition``) and updates
of segments never announced are kept as ``problems``, not applied.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import KafkaLogError, MessageDecodeError, NothingToCheckError
from ..names import file_kind
from ..records import read_batches
from .decode import read_framed
from .remote_log_records import PARTITION_DELETE_STATES, REMOTE_LOG_RECORDS, REMOTE_LOG_TYPE_NAMES, SEGMENT_STATES

__all__ = ["RemoteLogEvent", "RemoteSegment", "RemotePartition", "RemoteLogMetadata", "decode_remote_log_record",
           "read_remote_log_metadata"]

COPY_STARTED, COPY_FINISHED, DELETE_STARTED, DELETE_FINISHED = (SEGMENT_STATES[i] for i in range(4))
_NEXT_STATES = {  # RemoteLogSegmentState.isValidTransition
    COPY_STARTED: {COPY_FINISHED, DELETE_STARTED},
    COPY_FINISHED: {DELETE_STARTED},
    DELETE_STARTED: {DELETE_FINISHED},
    DELETE_FINISHED: set(),
}


@dataclass(frozen=True, slots=True)
class RemoteLogEvent:
    """One decoded record: ``type_name`` as kafka-dump-log.sh's decoder names it, ``data`` with JSON field names."""

    api_key: int
    version: int
    data: dict[str, Any]

    @property
    def type_name(self) -> str:
        return REMOTE_LOG_TYPE_NAMES[self.api_key]


def decode_remote_log_record(value: bytes | bytearray | memoryview | None) -> RemoteLogEvent:
    """A ``__remote_log_metadata`` record value (``RemoteLogMetadataSerde``'s framing)."""
    return RemoteLogEvent(*read_framed(value, REMOTE_LOG_RECORDS, "remote log metadata"))


@dataclass
class RemoteSegment:
    """A remote segment as the metadata tells it: offsets, size, epochs, and every state it went through."""

    topic: str
    topic_id: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    size_bytes: int
    max_timestamp_ms: int
    leader_epochs: list[tuple[int, int]]  # (epoch, start offset), as the record lists them
    txn_index_empty: bool
    states: list[str] = field(default_factory=list)
    #: where each event of this segment sits in ``__remote_log_metadata`` (partition dir name, offset)
    events: list[tuple[str, int]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.states[-1]


@dataclass
class RemotePartition:
    """One user topic-partition's remote segments (by segment id) and partition-deletion states."""

    topic: str
    topic_id: str
    partition: int
    segments: dict[str, RemoteSegment] = field(default_factory=dict)
    delete_states: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def live(self) -> list[RemoteSegment]:
        """Segments a reader is served from (``COPY_SEGMENT_FINISHED``), by start offset."""
        return sorted((s for s in self.segments.values() if s.state == COPY_FINISHED),
                      key=lambda s: (s.start_offset, s.end_offset))


@dataclass
class RemoteLogMetadata:
    """Every topic-partition of the replayed metadata, by (topic id, partition)."""

    partitions: dict[tuple[str, int], RemotePartition] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # records that could not be read
    records: int = 0
    dirs: list[str] = field(default_factory=list)


def _metadata_dirs(paths: Iterable[str | os.PathLike]) -> list[str]:
    """``__remote_log_metadata-N`` dirs: the paths themselves, or those inside a given log dir."""
    dirs: list[str] = []
    for p in map(os.fspath, paths):
        base = os.path.basename(os.path.normpath(p))
        if base.startswith("__remote_log_metadata-"):
            dirs.append(p)
            continue
        inside = sorted(os.path.join(p, n) for n in os.listdir(p) if n.startswith("__remote_log_metadata-"))
        if not inside:
            raise NothingToCheckError("no __remote_log_metadata-N partition dir here", path=p)
        dirs.extend(inside)
    return dirs


def _events(pdir: str) -> Iterator[tuple[int, RemoteLogEvent | KafkaLogError]]:
    logs = sorted(n for n in os.listdir(pdir) if file_kind(n) == ("log", n))
    for name in logs:
        reader = read_batches(os.path.join(pdir, name))
        for batch in reader:
            if batch.is_control:
                continue
            for rec in batch.records():
                try:
                    yield rec.offset, decode_remote_log_record(rec.value)
                except MessageDecodeError as exc:
                    yield rec.offset, exc
        if reader.error is not None:
            yield -1, KafkaLogError(f"{name}: {reader.error}")


def read_remote_log_metadata(paths: Iterable[str | os.PathLike]) -> RemoteLogMetadata:
    """Replay ``__remote_log_metadata`` partition dirs (or log dirs holding them). I/O errors propagate; records
    that cannot be read are ``problems``; no metadata partition at all is ``NothingToCheckError``."""
    meta = RemoteLogMetadata(dirs=_metadata_dirs(paths))
    for pdir in meta.dirs:
        where = os.path.basename(os.path.normpath(pdir))
        for offset, event in _events(pdir):
            if isinstance(event, KafkaLogError):
                meta.problems.append(f"{where} offset {offset}: {event}")
                continue
            meta.records += 1
            _apply(meta, event, (where, offset))
    return meta


def _partition(meta: RemoteLogMetadata, tip: dict[str, Any]) -> RemotePartition:
    key = (tip["id"], tip["partition"])
    part = meta.partitions.get(key)
    if part is None:
        part = meta.partitions[key] = RemotePartition(tip["name"], tip["id"], tip["partition"])
    return part


def _apply(meta: RemoteLogMetadata, event: RemoteLogEvent, where: tuple[str, int]) -> None:
    d = event.data
    at = f"{where[0]} offset {where[1]}"
    if event.api_key == 2:
        part = _partition(meta, d["topicIdPartition"])
        part.delete_states.append(PARTITION_DELETE_STATES.get(d["remotePartitionDeleteState"], "UNKNOWN"))
        return
    sid = d["remoteLogSegmentId"]
    part = _partition(meta, sid["topicIdPartition"])
    state = SEGMENT_STATES.get(d["remoteLogSegmentState"])
    if state is None:
        part.problems.append(f"{at}: segment {sid['id']}: unknown state id {d['remoteLogSegmentState']}")
        return
    seg = part.segments.get(sid["id"])
    if event.api_key == 0:
        if seg is not None:
            part.problems.append(f"{at}: segment {sid['id']} announced again (first at {seg.events[0][0]} offset "
                                 f"{seg.events[0][1]})")
            return
        if state != COPY_STARTED:
            part.problems.append(f"{at}: segment {sid['id']} announced in state {state}, not {COPY_STARTED}")
        epochs = [(e["leaderEpoch"], e["offset"]) for e in d["segmentLeaderEpochs"]]
        part.segments[sid["id"]] = RemoteSegment(
            part.topic, part.topic_id, part.partition, sid["id"], d["startOffset"], d["endOffset"],
            d["segmentSizeInBytes"], d["maxTimestampMs"], epochs, bool(d.get("txnIndexEmpty", False)),
            [state], [where])
        return
    if seg is None:
        part.problems.append(f"{at}: update to {state} of segment {sid['id']}, which no metadata record announced")
        return
    if state not in _NEXT_STATES[seg.state]:
        part.problems.append(f"{at}: segment {sid['id']} cannot go from {seg.state} to {state} (Kafka refuses it)")
        return
    seg.states.append(state)
    seg.events.append(where)

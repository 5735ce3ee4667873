"""The cluster metadata image a broker builds from ``__cluster_metadata-0``: the latest snapshot, then the log after it.

Replay follows Kafka's ``MetadataDelta``: topics by name and id, partitions with replicas, ISR, leader and (KIP-858)
the log directory of each replica, brokers with their registered log dirs and fencing, finalized features and
configs. A ``PartitionRecord`` v0 has no directories: each replica is ``MIGRATING`` as Kafka assumes. Records of a
metadata transaction (``BeginTransactionRecord`` .. ``EndTransactionRecord``) apply together, and not at all when
it is aborted. What cannot be read is listed in ``problems``; replay stops at the first unreadable batch, as a
broker's log recovery would cut the log there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidRecordError, KafkaLogError, MessageDecodeError, NothingToCheckError
from ..names import LOST_DIRECTORY_ID, MIGRATING_DIRECTORY_ID, UNASSIGNED_DIRECTORY_ID
from ..records import read_batches
from ..records.control import ControlRecordType, parse_control_type
from .decode import MetadataRecord, decode_control_record, decode_metadata_record
from .snapshot import SnapshotId, list_segments, list_snapshots

__all__ = [
    "UNASSIGNED",
    "LOST",
    "MIGRATING",
    "PartitionImage",
    "TopicImage",
    "BrokerImage",
    "MetadataImage",
    "read_metadata_log",
    "replay",
]

#: KIP-858's reserved directory ids (Kafka's DirectoryId)
MIGRATING = MIGRATING_DIRECTORY_ID
UNASSIGNED = UNASSIGNED_DIRECTORY_ID
LOST = LOST_DIRECTORY_ID
SPECIAL_DIRECTORIES = {MIGRATING: "MIGRATING", UNASSIGNED: "UNASSIGNED", LOST: "LOST"}


@dataclass
class PartitionImage:
    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: list[str]
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    eligible_leader_replicas: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0

    def directory_of(self, broker_id: int) -> str | None:
        """The directory id the controller recorded for ``broker_id``'s replica (None: not a replica)."""
        try:
            return self.directories[self.replicas.index(broker_id)]
        except (ValueError, IndexError):
            return None


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


@dataclass
class BrokerImage:
    broker_id: int
    epoch: int
    incarnation_id: str
    log_dirs: list[str]
    fenced: bool
    in_controlled_shutdown: bool = False
    rack: str | None = None
    endpoints: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MetadataImage:
    """Topics by name, brokers by id, finalized features, configs ``{(resource type, name): {key: value}}``."""

    topics: dict[str, TopicImage] = field(default_factory=dict)
    brokers: dict[int, BrokerImage] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    next_producer_id: int | None = None
    kraft_version: int | None = None
    voters: list[dict[str, Any]] = field(default_factory=list)
    #: the snapshot the image started from, and the offset after the last record applied
    snapshot: SnapshotId | None = None
    end_offset: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def topics_by_id(self) -> dict[str, TopicImage]:
        return {t.topic_id: t for t in self.topics.values()}


_LENGTHS = "The lengths for replicas and directories do not match"


def _partition(data: dict[str, Any], version: int) -> PartitionImage:
    """``new PartitionRegistration(PartitionRecord)``: no or empty directories mean MIGRATING for every replica;
    a directory list of another length than the replicas is refused (``InvalidReplicaDirectoriesException``)."""
    replicas = list(data["replicas"])
    directories = list(data.get("directories") or []) if version >= 1 else []
    if directories and len(directories) != len(replicas):
        raise InvalidRecordError(f"{_LENGTHS}: {len(replicas)} replicas, {len(directories)} directories")
    if not directories:
        directories = [MIGRATING] * len(replicas)
    return PartitionImage(
        data["partitionId"], replicas, list(data["isr"]), data["leader"], data["leaderEpoch"],
        data["partitionEpoch"], directories, list(data["removingReplicas"] or []),
        list(data["addingReplicas"] or []), list(data.get("eligibleLeaderReplicas") or []),
        list(data.get("lastKnownElr") or []), data.get("leaderRecoveryState", 0),
    )


def _change_partition(p: PartitionImage, d: dict[str, Any]) -> None:
    """PartitionRegistration.merge: only the fields the record sets change. An empty ``directories`` list counts as
    absent (new replicas then keep their broker's directory, UNASSIGNED for a new broker); directories whose count
    differs from the replicas' refuse the whole record (Kafka throws), leaving the partition as it was."""
    replicas = p.replicas if d.get("replicas") is None else list(d["replicas"])
    if d.get("directories"):
        if d.get("replicas") is not None and len(d["replicas"]) != len(d["directories"]):
            raise InvalidRecordError(f"{_LENGTHS}: {len(replicas)} replicas, {len(d['directories'])} directories")
        directories = list(d["directories"])
    elif d.get("replicas") is not None:
        old = dict(zip(p.replicas, p.directories, strict=False))
        directories = [old.get(b, UNASSIGNED) for b in replicas]
    else:
        directories = p.directories
    if not directories:  # defaultToMigrating(newDirectories, replicas.length): Kafka passes the old count
        directories = [MIGRATING] * len(p.replicas)
    if directories and len(directories) != len(replicas):
        raise InvalidRecordError(f"{_LENGTHS}: {len(replicas)} replicas, {len(directories)} directories")
    p.replicas, p.directories = replicas, directories
    if d.get("isr") is not None:
        p.isr = list(d["isr"])
    if d.get("leader", -2) != -2:
        p.leader = d["leader"]
        p.leader_epoch += 1
    for key, attr in (("removingReplicas", "removing_replicas"), ("addingReplicas", "adding_replicas"),
                      ("eligibleLeaderReplicas", "eligible_leader_replicas"), ("lastKnownElr", "last_known_elr")):
        if d.get(key) is not None:
            setattr(p, attr, list(d[key]))
    if d.get("leaderRecoveryState", -1) != -1:
        p.leader_recovery_state = d["leaderRecoveryState"]
    p.partition_epoch += 1


def _apply(image: MetadataImage, record: MetadataRecord) -> None:
    d, name = record.data, record.type_name
    if name == "TOPIC_RECORD":
        image.topics[d["name"]] = TopicImage(d["name"], d["topicId"])
    elif name in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
        topic = image.topics_by_id.get(d["topicId"])
        if topic is None:
            image.problems.append(f"{name} for unknown topic id {d['topicId']}")
        elif name == "PARTITION_RECORD":
            topic.partitions[d["partitionId"]] = _partition(d, record.version)
        elif d["partitionId"] not in topic.partitions:
            image.problems.append(f"{name} for unknown partition {topic.name}-{d['partitionId']}")
        else:
            _change_partition(topic.partitions[d["partitionId"]], d)
    elif name == "REMOVE_TOPIC_RECORD":
        topic = image.topics_by_id.get(d["topicId"])
        if topic is not None:
            del image.topics[topic.name]
            image.configs.pop((2, topic.name), None)
    elif name == "REGISTER_BROKER_RECORD":
        image.brokers[d["brokerId"]] = BrokerImage(
            d["brokerId"], d["brokerEpoch"], d["incarnationId"], sorted(d.get("logDirs") or []), d["fenced"],
            d.get("inControlledShutdown", False), d["rack"], list(d["endPoints"]),
        )
    elif name == "UNREGISTER_BROKER_RECORD":
        image.brokers.pop(d["brokerId"], None)
    elif name in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
        broker = image.brokers.get(d["id"])
        if broker is not None:
            broker.fenced = name == "FENCE_BROKER_RECORD"
    elif name == "BROKER_REGISTRATION_CHANGE_RECORD":
        broker = image.brokers.get(d["brokerId"])
        if broker is None:
            image.problems.append(f"{name} for unregistered broker {d['brokerId']}")
            return
        if d.get("fenced", 0) != 0:
            broker.fenced = d["fenced"] > 0
        if d.get("inControlledShutdown", 0) == 1:
            broker.in_controlled_shutdown = True
        if d.get("logDirs"):
            broker.log_dirs = sorted(d["logDirs"])
    elif name == "FEATURE_LEVEL_RECORD":
        if d["featureLevel"] == 0:
            image.features.pop(d["name"], None)
        else:
            image.features[d["name"]] = d["featureLevel"]
    elif name == "CONFIG_RECORD":
        configs = image.configs.setdefault((d["resourceType"], d["resourceName"]), {})
        if d["value"] is None:
            configs.pop(d["name"], None)
        else:
            configs[d["name"]] = d["value"]
    elif name == "PRODUCER_IDS_RECORD":
        image.next_producer_id = d["nextProducerId"]


def replay(image: MetadataImage, path: str, start_offset: int = 0) -> bool:
    """Apply the records of one segment or snapshot file at offsets >= ``start_offset``; False when an unreadable
    batch ended the file early (the rest of the log is not applied)."""
    reader = read_batches(path, populate=False)
    pending: list[MetadataRecord] | None = None  # an open metadata transaction
    for batch in reader:
        if batch.last_offset < start_offset:
            continue
        if not batch.is_valid():
            image.problems.append(f"{path}: batch at position {batch.position} fails its CRC check")
            return False
        try:
            records = batch.records()
        except KafkaLogError as exc:
            image.problems.append(f"{path}: batch at position {batch.position}: {exc}")
            return False
        for rec in records:
            if rec.offset < start_offset:
                continue
            try:
                if batch.is_control:
                    ctype = parse_control_type(rec.key)
                    if ctype in (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS):
                        body = decode_control_record(ctype, rec.value).data
                        if ctype == ControlRecordType.KRAFT_VERSION:
                            image.kraft_version = body["kRaftVersion"]
                        else:
                            image.voters = body["voters"]
                else:
                    record = decode_metadata_record(rec.value)
                    if record.type_name == "BEGIN_TRANSACTION_RECORD":
                        pending = []
                    elif record.type_name in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"):
                        committed = record.type_name == "END_TRANSACTION_RECORD"
                        for r in (pending or []) if committed else []:
                            _apply(image, r)
                        pending = None
                    elif pending is not None:
                        pending.append(record)
                    else:
                        _apply(image, record)
            except (InvalidRecordError, MessageDecodeError) as exc:
                image.problems.append(f"{path}: record at offset {rec.offset}: {exc}")
            image.end_offset = max(image.end_offset, rec.offset + 1)
    if reader.invalid_bytes:
        image.problems.append(f"{path}: {reader.invalid_bytes} unreadable bytes at position {reader.valid_bytes}")
        return False
    return True


def read_metadata_log(partition_dir: str | os.PathLike) -> MetadataImage:
    """The image of a ``__cluster_metadata-0`` dir: the latest snapshot that checks out, then every segment's
    records from the snapshot's end offset on. I/O errors propagate; unreadable content is in ``problems``; a dir
    with neither snapshots nor segments is ``NothingToCheckError`` (an empty image would read as "no brokers")."""
    from kafkalog.metadata.kraft_snapshot import check_kraft_snapshot

    root = os.fspath(partition_dir)
    image = MetadataImage()
    snapshots, segments = list_snapshots(root), list_segments(root)
    if not snapshots and not segments:
        raise NothingToCheckError("no metadata log segments or snapshots here (not a __cluster_metadata-0 dir?)",
                                  path=root)
    for sid, path in reversed(snapshots):
        check = check_kraft_snapshot(path)
        if check.ok:
            replay(image, path)
            image.snapshot = sid
            image.end_offset = sid.end_offset
            break
        image.problems.extend(f"{path}: {p} (snapshot skipped)" for p in check.problems)
    start = image.end_offset
    for i, (base, path) in enumerate(segments):
        next_base = segments[i + 1][0] if i + 1 < len(segments) else None
        if next_base is not None and next_base <= start:
            continue  # the snapshot covers this whole segment
        if base > image.end_offset:
            image.problems.append(f"{path}: offsets {image.end_offset} to {base - 1} are neither in a snapshot nor "
                                  "in the log (replay stops here)")
            break
        if not replay(image, path, start):
            break
    return image

"""KIP-858 checked against the controller's own records: a broker's log dirs versus the metadata image.

The image (:func:`~kafkalog.metadata.image.read_metadata_log`) says, per partition, which directory id each replica
is assigned to, and which directory ids each broker registered (``RegisterBrokerRecord``/
``BrokerRegistrationChangeRecord`` ``LogDirs``). :func:`check_broker_dirs` turns that into the expected assignment of
one broker and reuses :func:`kafkalog.manager.assignments.compare_assignments` for the per-replica differences
(another dir than assigned, UNASSIGNED/LOST/MIGRATING, missing replicas), decides stray logs as Kafka's
``LogManager.isStrayKraftReplica`` does (by the topic id in ``partition.metadata``: none, one the image does not
hold, or a partition whose replicas leave this broker out; KRaft renames such a dir ``-stray``), and adds what only
the registration can tell: a replica assigned to a directory the broker did not register, and a log dir whose
``directory.id`` the registration does not list.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..checkpoint.partition_metadata import PARTITION_METADATA_FILENAME, read_partition_metadata
from ..errors import InvalidArgumentError, KafkaLogError
from ..manager.assignments import DirState, MismatchKind, compare_assignments, describe_id
from ..names import TopicPartition, partition_dir_name
from .image import SPECIAL_DIRECTORIES, MetadataImage

__all__ = ["ReplicaAssignment", "DirFinding", "BrokerDirsReport", "check_broker_dirs", "STRAY", "UNREGISTERED_DIR"]

#: a replica on disk the metadata does not give this broker (KRaft renames its dir ``<tp>.<uuid>-stray``)
STRAY = "stray"
#: a replica assigned to a directory id the broker did not register
UNREGISTERED_DIR = "assigned_to_unregistered_dir"


@dataclass(frozen=True)
class ReplicaAssignment:
    """One replica of this broker: the assigned directory (metadata) and where it is on disk (None: nowhere)."""

    topic: str
    partition: int
    assigned_dir_id: str | None
    actual_dir_id: str | None
    log_dir: str | None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "assignedDirectoryId": self.assigned_dir_id,
                "assigned": describe_id(self.assigned_dir_id), "actualDirectoryId": self.actual_dir_id,
                "logDir": self.log_dir}


@dataclass(frozen=True)
class DirFinding:
    """A log dir whose ``directory.id`` the broker's registration does not hold (or that has none)."""

    log_dir: str
    directory_id: str | None
    detail: str
    kind: str = "directory_not_registered"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "logDir": self.log_dir, "directoryId": self.directory_id, "detail": self.detail}


@dataclass
class BrokerDirsReport:
    broker_id: int
    registered_dirs: list[str]
    fenced: bool
    dirs: list[DirState]
    replicas: list[ReplicaAssignment] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    dir_findings: list[DirFinding] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.mismatches and not self.dir_findings

    def to_json(self, *, include_all: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerId": self.broker_id,
            "registeredLogDirs": self.registered_dirs,
            "fenced": self.fenced,
            "logDirs": [{"logDir": d.path, "directoryId": d.directory_id, "online": d.online,
                         "registered": d.directory_id in self.registered_dirs} for d in self.dirs],
            "mismatches": self.mismatches,
            "dirMismatches": [f.to_json() for f in self.dir_findings],
        }
        if include_all:
            out["replicas"] = [r.to_json() for r in self.replicas]
        return out


def _local_topic_id(d: DirState, tp: TopicPartition) -> tuple[str | None, str]:
    """(topic id in the replica's ``partition.metadata``, why there is none)."""
    path = os.path.join(d.path, partition_dir_name(*tp), PARTITION_METADATA_FILENAME)
    try:
        return read_partition_metadata(path), ""
    except FileNotFoundError:
        return None, "no partition.metadata"
    except (OSError, KafkaLogError) as exc:
        return None, f"unreadable partition.metadata ({exc})"


def stray_reason(by_id: dict[str, Any], broker_id: int, topic_id: str | None, partition_id: int,
                 why: str = "no partition.metadata") -> str | None:
    """Why Kafka's ``LogManager.isStrayKraftReplica`` calls a log stray (None: it does not): no topic id
    (``why``), a topic id or partition the image (its ``topics_by_id``) does not hold, or a partition whose
    replicas leave ``broker_id`` out."""
    topic = by_id.get(topic_id) if topic_id is not None else None
    partition = topic.partitions.get(partition_id) if topic is not None else None
    if topic_id is None:
        return f"{why}: Kafka treats the log as stray"
    if topic is None:
        return f"topic id {topic_id} is not in the metadata (deleted or re-created topic)"
    if partition is None:
        return f"topic {topic.name} ({topic_id}) has no partition {partition_id}"
    if broker_id not in partition.replicas:
        return f"the replicas {partition.replicas} do not include broker {broker_id}"
    return None


def _strays(states: list[DirState], image: MetadataImage, broker_id: int) -> list[dict[str, Any]]:
    """Kafka's ``LogManager.isStrayKraftReplica`` for each current replica: no topic id, a topic id or partition
    the image does not hold, or a partition whose replicas do not include this broker."""
    by_id = image.topics_by_id
    out = []
    for d in states:
        if not d.online:
            continue
        for tp in sorted(d.current):
            topic_id, why = _local_topic_id(d, tp)
            detail = stray_reason(by_id, broker_id, topic_id, tp[1], why)
            if detail is None:
                continue
            out.append({"kind": STRAY, "topic": tp[0], "partition": tp[1], "expectedDirectoryId": None,
                        "actualDirectoryId": d.directory_id, "detail": f"live in {d.path}; {detail}"})
    return out


def check_broker_dirs(dirs: Iterable[DirState], image: MetadataImage, broker_id: int) -> BrokerDirsReport:
    """Every KIP-858 difference between ``dirs`` (a broker's log dirs as found on disk) and what the controller
    recorded for ``broker_id``; InvalidArgumentError when the metadata has no registration for that broker."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        known = ", ".join(str(b) for b in sorted(image.brokers)) or "none"
        raise InvalidArgumentError(f"broker {broker_id} is not registered in the metadata log (registered: {known})")
    states = list(dirs)
    registered = list(broker.log_dirs)
    expected: dict[TopicPartition, str] = {}
    for topic in image.topics.values():
        for p in topic.partitions.values():
            dir_id = p.directory_of(broker_id)
            if dir_id is not None:
                expected[(topic.name, p.partition_id)] = dir_id
    report = BrokerDirsReport(broker_id, registered, broker.fenced, states)

    where: dict[TopicPartition, DirState] = {}
    for d in states:
        for tp in d.current:
            where.setdefault(tp, d)
    for tp in sorted(set(expected) | set(where)):
        d = where.get(tp)
        report.replicas.append(ReplicaAssignment(tp[0], tp[1], expected.get(tp),
                                                 d.directory_id if d else None, d.path if d else None))

    # Kafka decides stray logs by topic id (below), not by name as compare_assignments' NOT_ASSIGNED does
    found = [m.to_json() for m in compare_assignments(states, expected) if m.kind != MismatchKind.NOT_ASSIGNED]
    found += _strays(states, image, broker_id)
    for tp, dir_id in sorted(expected.items()):
        if dir_id in SPECIAL_DIRECTORIES or dir_id in registered:
            continue
        d = where.get(tp)
        found.append({
            "kind": UNREGISTERED_DIR, "topic": tp[0], "partition": tp[1], "expectedDirectoryId": dir_id,
            "actualDirectoryId": d.directory_id if d else None,
            "detail": f"assigned to directory {dir_id}, which broker {broker_id} did not register",
        })
    found.sort(key=lambda m: (m["topic"], m["partition"], m["kind"]))
    report.mismatches = found

    for d in states:
        if d.directory_id is None:
            report.dir_findings.append(DirFinding(d.path, None, "no directory.id in meta.properties"))
        elif d.directory_id not in registered:
            report.dir_findings.append(DirFinding(
                d.path, d.directory_id, f"directory.id {d.directory_id} is not in broker {broker_id}'s registration"
            ))
    return report

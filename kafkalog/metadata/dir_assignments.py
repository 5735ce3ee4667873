"""KIP-858 checked against the controller's own records: a broker's log dirs versus the metadata image.

The image (:func:`~kafkalog.metadata.image.read_metadata_log`) says, per partition, which directory id each replica
is assigned to, and which directory ids each broker registered (``RegisterBrokerRecord``/
``BrokerRegistrationChangeRecord`` ``LogDirs``). :func:`check_broker_dirs` turns that into the expected assignment of
one broker and reuses :func:`kafkalog.manager.assignments.compare_assignments` for the per-replica differences
(another dir than assigned, UNASSIGNED/LOST/MIGRATING, a replica the metadata does not give this broker: what
KRaft renames ``-stray``), and adds what only the registration can tell: a replica assigned to a directory the
broker did not register, and a log dir whose ``directory.id`` the registration does not list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError
from ..manager.assignments import AssignmentMismatch, DirState, MismatchKind, compare_assignments, describe_id
from ..names import TopicPartition
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


def _mismatch_json(m: AssignmentMismatch) -> dict[str, Any]:
    out = m.to_json()
    if m.kind == MismatchKind.NOT_ASSIGNED:
        out["kind"] = STRAY
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

    found = [_mismatch_json(m) for m in compare_assignments(states, expected)]
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

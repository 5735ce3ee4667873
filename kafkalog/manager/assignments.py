"""KIP-858 directory assignments: where each replica lives versus where the cluster metadata says it lives.

In KRaft with JBOD every replica is assigned to a log directory id (``directory.id`` in the dir's
``meta.properties``); the controller holds that map and the broker reports moves and failures against it. A
library user repairing a broker's disks needs the same comparison offline: :func:`compare_assignments` is a pure
function over "what is on disk" (:class:`DirState`) and "what the metadata says" (``expected``), used by
``LogManager.check_assignments`` and by ``kafkalog dirs assignments``.

Reserved ids (``DirectoryId.java``): ``UNASSIGNED`` (a new replica not placed yet: the broker picks a dir and reports
it), ``LOST`` (an unspecified offline dir: the replica is offline), ``MIGRATING`` (ZooKeeper migration: placed
somewhere the controller does not know yet; the broker reports its dir).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import InvalidArgumentError
from kafkalog.manager.registry import LogRegistry
from kafkalog.names import (
    LOST_DIRECTORY_ID,
    MIGRATING_DIRECTORY_ID,
    UNASSIGNED_DIRECTORY_ID,
    TopicPartition,
    base64url_to_uuid_bytes,
    parse_partition_dir,
)

__all__ = [
    "AssignmentMismatch",
    "DirState",
    "MismatchKind",
    "compare_assignments",
    "dir_states_of",
    "parse_expected",
]


_RESERVED_NAMES = {
    UNASSIGNED_DIRECTORY_ID: "UNASSIGNED",
    LOST_DIRECTORY_ID: "LOST",
    MIGRATING_DIRECTORY_ID: "MIGRATING",
}


class MismatchKind(str, enum.Enum):
    """One difference between the local replicas and the metadata's directory assignments, in KIP-858's terms."""

    #: The replica is live in another of this broker's dirs than the one assigned (the broker should report it).
    OTHER_DIR = "found_in_other_dir"
    #: Assigned to one of this broker's dirs that is offline, or to LOST: the replica is offline.
    OFFLINE_DIR = "assigned_to_offline_dir"
    #: Assigned to a dir id this broker does not have: wait for the reassignment (do not create it here).
    UNKNOWN_DIR = "assigned_to_unknown_dir"
    #: A ``-future`` replica exists (a KIP-113 move in progress or interrupted).
    FUTURE_PENDING = "future_replica_pending"
    #: Assigned to a live dir of this broker (or UNASSIGNED/MIGRATING) but no replica exists anywhere.
    MISSING = "missing_replica"
    #: A live replica the metadata does not assign to this broker at all (a stray candidate).
    NOT_ASSIGNED = "not_assigned"
    #: The metadata holds UNASSIGNED or MIGRATING while the replica lives in a known dir: the broker must report it.
    ASSIGNMENT_PENDING = "assignment_pending"


@dataclass(frozen=True)
class AssignmentMismatch:
    """A typed difference; ``expected_dir_id`` / ``actual_dir_id`` are base64url directory ids (or None)."""

    kind: MismatchKind
    topic: str
    partition: int
    expected_dir_id: str | None
    actual_dir_id: str | None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "topic": self.topic,
            "partition": self.partition,
            "expectedDirectoryId": self.expected_dir_id,
            "actualDirectoryId": self.actual_dir_id,
            "detail": self.detail,
        }


@dataclass
class DirState:
    """What one log dir holds: its id, whether it is online, its current and future replicas."""

    path: str
    directory_id: str | None
    online: bool
    current: set[TopicPartition] = field(default_factory=set)
    future: set[TopicPartition] = field(default_factory=set)


def describe_id(directory_id: str | None) -> str:
    """``UNASSIGNED`` / ``LOST`` / ``MIGRATING`` for reserved ids, the id itself otherwise."""
    if directory_id is None:
        return "none"
    return _RESERVED_NAMES.get(directory_id, directory_id)


def compare_assignments(dirs: Iterable[DirState], expected: Mapping[TopicPartition, str]) -> list[AssignmentMismatch]:
    """Every difference between ``dirs`` and ``expected`` (sorted by topic, partition); empty means consistent.

    Per expected replica, in this order: a future replica → FUTURE_PENDING (and nothing else when the expected dir is
    the future's or the current's: the move explains the state); expected UNASSIGNED/MIGRATING → ASSIGNMENT_PENDING
    if the replica lives somewhere, else MISSING (or OFFLINE_DIR when an offline dir held it); expected LOST or one
    of our offline dirs → OFFLINE_DIR unless a live copy exists elsewhere (OTHER_DIR); an id none of our dirs has →
    UNKNOWN_DIR; one of our live dirs → OTHER_DIR if the replica lives in another dir, MISSING if nowhere.
    Live replicas absent from ``expected`` → NOT_ASSIGNED.
    """
    states = list(dirs)
    by_id = {d.directory_id: d for d in states if d.directory_id is not None}
    current: dict[TopicPartition, DirState] = {}
    future: dict[TopicPartition, DirState] = {}
    offline_held: dict[TopicPartition, DirState] = {}
    for d in states:
        if d.online:
            for tp in d.current:
                current[tp] = d
            for tp in d.future:
                future[tp] = d
        else:
            for tp in d.current:
                offline_held[tp] = d

    out: list[AssignmentMismatch] = []

    def add(kind: MismatchKind, tp: TopicPartition, exp: str | None, act: str | None, detail: str) -> None:
        out.append(AssignmentMismatch(kind, tp[0], tp[1], exp, act, detail))

    for tp, exp in expected.items():
        cur = current.get(tp)
        act = cur.directory_id if cur is not None else None
        fut = future.get(tp)
        if fut is not None:
            add(MismatchKind.FUTURE_PENDING, tp, exp, act,
                f"future replica in {fut.path} ({describe_id(fut.directory_id)}) while the current replica is in "
                f"{cur.path if cur is not None else 'no live dir'}")
            if exp in (fut.directory_id, act):
                continue
        if exp in (UNASSIGNED_DIRECTORY_ID, MIGRATING_DIRECTORY_ID):
            if cur is not None:
                add(MismatchKind.ASSIGNMENT_PENDING, tp, exp, act,
                    f"metadata holds {describe_id(exp)}; the replica lives in {cur.path}: report that directory")
            elif tp in offline_held:
                held = offline_held[tp]
                add(MismatchKind.OFFLINE_DIR, tp, exp, held.directory_id,
                    f"the replica is in offline dir {held.path}: replica offline")
            else:
                add(MismatchKind.MISSING, tp, exp, None,
                    f"metadata holds {describe_id(exp)} and no dir has the replica")
            continue
        target = by_id.get(exp)
        if exp == LOST_DIRECTORY_ID or (target is not None and not target.online):
            if cur is not None:
                add(MismatchKind.OTHER_DIR, tp, exp, act,
                    f"assigned to {'LOST' if target is None else 'offline dir ' + target.path} but live in {cur.path}")
            else:
                where = "a lost dir" if target is None else f"offline dir {target.path}"
                add(MismatchKind.OFFLINE_DIR, tp, exp, None, f"assigned to {where}: replica offline")
            continue
        if target is None:
            add(MismatchKind.UNKNOWN_DIR, tp, exp, act,
                f"assigned to directory {exp}, unknown to this broker: wait for reassignment"
                + (f" (a replica lives in {cur.path})" if cur is not None else ""))
            continue
        if cur is None:
            if tp in offline_held:
                held = offline_held[tp]
                add(MismatchKind.OTHER_DIR, tp, exp, held.directory_id,
                    f"assigned to {target.path} but found only in offline dir {held.path}")
            else:
                add(MismatchKind.MISSING, tp, exp, None, f"assigned to {target.path} but no dir has the replica")
        elif cur is not target:
            add(MismatchKind.OTHER_DIR, tp, exp, act, f"assigned to {target.path} but found in {cur.path}")
    for tp, d in current.items():
        if tp not in expected:
            add(MismatchKind.NOT_ASSIGNED, tp, None, d.directory_id,
                f"live in {d.path} but not assigned to this broker")
    out.sort(key=lambda m: (m.topic, m.partition, m.kind.value))
    return out


def dir_states_of(registry: LogRegistry, offline: Mapping[str, Iterable[TopicPartition]]) -> list[DirState]:
    """The :class:`DirState` of each dir of a registry; ``offline`` (``LogManager.offline_partitions()``) adds the
    partitions each offline dir held."""
    states = [DirState(d.path, d.directory_id, d.online) for d in registry.dirs.values()]
    by_path = {s.path: s for s in states}
    with registry.lock:
        for e in registry.current.values():
            by_path[e.dir.path].current.add(e.key)
        for e in registry.future.values():
            by_path[e.dir.path].future.add(e.key)
    for path, parts in offline.items():
        by_path[path].current.update(parts)
    return states


def parse_expected(doc: Any) -> dict[TopicPartition, str]:
    """An expected-assignment document: ``{"topic-partition": "dirId", ...}``, or a list of
    ``{"topic": ..., "partition": ..., "directoryId": ...}`` (optionally under a ``"partitions"`` key).

    Raises InvalidArgumentError (a ValueError) for a malformed document or directory id, and
    InvalidPartitionDirError (a ValueError) for a key that is not a ``<topic>-<partition>`` name."""
    if isinstance(doc, dict) and "partitions" in doc and isinstance(doc["partitions"], list):
        doc = doc["partitions"]
    out: dict[TopicPartition, str] = {}
    if isinstance(doc, dict):
        items = []
        for name, dir_id in doc.items():
            tp = parse_partition_dir(name)
            if tp.kind:
                raise InvalidArgumentError(f"{name!r} is not a topic-partition")
            items.append(((tp.topic, tp.partition), dir_id))
    elif isinstance(doc, list):
        items = []
        for entry in doc:
            if not isinstance(entry, dict) or not {"topic", "partition", "directoryId"} <= entry.keys():
                raise InvalidArgumentError(f"expected entries need topic, partition and directoryId: {entry!r}")
            part = entry["partition"]
            if isinstance(part, bool) or not isinstance(part, int) or part < 0:
                raise InvalidArgumentError(f"bad partition in {entry!r}")
            items.append(((str(entry["topic"]), part), entry["directoryId"]))
    else:
        raise InvalidArgumentError("the expected assignments must be a JSON object or list")
    for tp, dir_id in items:
        if not isinstance(dir_id, str):
            raise InvalidArgumentError(f"directory id of {tp[0]}-{tp[1]} must be a string, got {dir_id!r}")
        base64url_to_uuid_bytes(dir_id)  # InvalidArgumentError for a malformed id
        out[tp] = dir_id
    return out

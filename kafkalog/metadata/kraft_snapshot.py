"""A KRaft snapshot (``<offset>-<epoch>.checkpoint``) checked as the raft layer reads one: every batch CRC valid,
offsets from 0 with no gap, a ``SnapshotHeader`` control record first, a ``SnapshotFooter`` control record last,
no bytes after the last batch, and every control record and metadata record readable with its schema.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kafkalog.errors import CorruptKraftSnapshotError, InvalidRecordError, KafkaLogError, MessageDecodeError
from kafkalog.metadata.decode import decode_control_record, decode_metadata_record
from kafkalog.metadata.snapshot import BOOTSTRAP_FILE, SnapshotId, parse_snapshot_name
from kafkalog.records import read_batches
from kafkalog.records.control import ControlRecordType, parse_control_type

__all__ = ["SnapshotCheck", "check_kraft_snapshot", "count_kraft_snapshot"]


@dataclass
class SnapshotCheck:
    """What a snapshot holds (``records``: metadata records, ``batches``) and every rule it breaks."""

    path: str
    snapshot_id: SnapshotId | None
    batches: int = 0
    records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_kraft_snapshot(path: str) -> SnapshotCheck:
    """Check one snapshot file; I/O errors propagate (the caller names the path), bad content is a problem."""
    name = os.path.basename(path)
    check = SnapshotCheck(path, parse_snapshot_name(name))
    if check.snapshot_id is None and name != BOOTSTRAP_FILE:
        check.problems.append(f"{name} is not named <20-digit offset>-<10-digit epoch>.checkpoint")
    reader = read_batches(path, populate=False)
    expected = 0
    first: ControlRecordType | None = None
    last: ControlRecordType | None = None
    for batch in reader:
        check.batches += 1
        if not batch.is_valid():
            check.problems.append(f"batch at position {batch.position} fails its CRC check")
            continue
        try:
            records = batch.records()
        except KafkaLogError as exc:
            check.problems.append(f"batch at position {batch.position}: {exc}")
            continue
        for record in records:
            if record.offset != expected:
                check.problems.append(f"offset {record.offset} where {expected} was expected")
            expected = record.offset + 1
            kind: ControlRecordType | None = None
            try:
                if batch.is_control:
                    kind = parse_control_type(record.key)
                    decode_control_record(kind, record.value)
                else:
                    decode_metadata_record(record.value)
                    check.records += 1
            except (InvalidRecordError, MessageDecodeError) as exc:
                check.problems.append(f"record at offset {record.offset}: {exc}")
            if first is None:
                first = kind if kind is not None else ControlRecordType.UNKNOWN
            last = kind
    if reader.invalid_bytes:
        check.problems.append(f"{reader.invalid_bytes} bytes after the last batch at position {reader.valid_bytes}")
    if check.batches == 0:
        check.problems.append("no record batches")
        return check
    if first != ControlRecordType.SNAPSHOT_HEADER:
        check.problems.append("the first record is not a SnapshotHeader control record")
    if last != ControlRecordType.SNAPSHOT_FOOTER:
        check.problems.append("the last record is not a SnapshotFooter control record")
    return check


def count_kraft_snapshot(path: str) -> int:
    """The metadata records of a sound snapshot; CorruptKraftSnapshotError listing every problem otherwise."""
    check = check_kraft_snapshot(path)
    if check.problems:
        raise CorruptKraftSnapshotError(f"{path}: " + "; ".join(check.problems))
    return check.records

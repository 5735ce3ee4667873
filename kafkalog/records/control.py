"""Control records (Kafka's ControlRecordType / EndTransactionMarker) carried by control batches (attribute bit 5).

Key: i16 version (0) + i16 type. Value for ABORT/COMMIT: i16 version + i32 coordinator epoch; later marker
versions append fields, which readers skip (as Kafka's flexible-version readers do).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ..errors import InvalidRecordError

__all__ = ["ControlRecordType", "EndTransactionMarker", "parse_control_type"]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Kafka's control record types; ABORT and COMMIT end a transaction."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


def parse_control_type(key: bytes | None) -> ControlRecordType:
    """Type of a control record from its key; UNKNOWN for a type this version does not know (as Kafka)."""
    if key is None or len(key) < 4:
        raise InvalidRecordError(f"control record key must be at least 4 bytes, got {None if key is None else len(key)}")
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid negative control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A transaction commit/abort marker. ``control_type`` is ABORT or COMMIT."""

    control_type: ControlRecordType
    coordinator_epoch: int
    version: int = 0

    @property
    def is_commit(self) -> bool:
        """True for a COMMIT marker, False for an ABORT."""
        return self.control_type == ControlRecordType.COMMIT

    def key_bytes(self) -> bytes:
        """The marker's record key: version 0 and the control type, as Kafka writes it."""
        return _KEY.pack(0, int(self.control_type))

    def value_bytes(self) -> bytes:
        """The marker's record value: version and coordinator epoch, as Kafka writes it."""
        return _VALUE.pack(self.version, self.coordinator_epoch)

    @classmethod
    def from_key_value(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """Decode; raises InvalidRecordError when the record is not a well-formed ABORT/COMMIT marker."""
        ctype = parse_control_type(key)
        if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidRecordError(f"control record of type {ctype.name} is not an end-transaction marker")
        if value is None or len(value) < _VALUE.size:
            raise InvalidRecordError("end-transaction marker value is too short")
        version, epoch = _VALUE.unpack_from(value, 0)
        if version < 0:
            raise InvalidRecordError(f"invalid negative end-transaction marker version {version}")
        return cls(ctype, epoch, version)

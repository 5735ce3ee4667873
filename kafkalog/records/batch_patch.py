"""In-place rewrites of a magic 2 batch's header fields, as the broker does on append (Kafka's
``DefaultRecordBatch.setLastOffset`` / ``setPartitionLeaderEpoch`` / ``setMaxTimestamp``): the leader assigns
offsets and its epoch, and LogAppendTime stamps the max timestamp, without re-encoding the batch."""

from __future__ import annotations

import struct

from crc32c import crc32c

from .batch import _CRC, _TIMESTAMP_TYPE_MASK, ATTRIBUTES_OFFSET, CRC_OFFSET
from .record import TimestampType

__all__ = ["set_base_offset", "set_max_timestamp", "set_partition_leader_epoch"]


#: byte positions inside a v2 batch of the fields the broker rewrites in place
BASE_OFFSET_OFFSET = 0
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Write the base offset of the v2 batch at ``position``; the CRC does not cover it (nothing else changes)."""
    _LONG.pack_into(buf, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Write the partition leader epoch of the v2 batch at ``position``; outside the CRC, as in Kafka."""
    _INT.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview, position: int, size: int, timestamp_type: TimestampType, max_timestamp: int
) -> None:
    """Set the timestamp type bit and the max timestamp of the ``size``-byte v2 batch at ``position`` and
    recompute its CRC (both fields are covered by it); a batch that already says so is left untouched."""
    attributes = _SHORT.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0]
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        new_attributes = attributes | _TIMESTAMP_TYPE_MASK
    else:
        new_attributes = attributes & ~_TIMESTAMP_TYPE_MASK
    if new_attributes == attributes and _LONG.unpack_from(buf, position + MAX_TIMESTAMP_OFFSET)[0] == max_timestamp:
        return
    _SHORT.pack_into(buf, position + ATTRIBUTES_OFFSET, new_attributes)
    _LONG.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _CRC.pack_into(buf, position + CRC_OFFSET, crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size]))

"""The record value type shared by every format version, and the timestamp type enum."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Record", "TimestampType"]


class TimestampType(enum.IntEnum):
    """Kafka's TimestampType; magic 0 messages have NO_TIMESTAMP_TYPE."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (``CreateTime``, ``LogAppendTime``, ``NoTimestampType``)."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {
    TimestampType.NO_TIMESTAMP_TYPE: "NoTimestampType",
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a reader sees it: absolute offset, effective timestamp (-1 where the format has none).

    ``sequence`` is the producer sequence (base sequence + offset delta for idempotent batches, else -1).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | list[tuple[str, bytes | None]] = ()
    sequence: int = -1

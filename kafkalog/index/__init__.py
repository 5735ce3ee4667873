"""Kafka's segment indexes: ``.index`` (offset -> position), ``.timeindex`` (timestamp -> offset) and
``.txnindex`` (aborted transactions), read and written byte for byte as Kafka does."""

from kafkalog.index.base import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from kafkalog.index.offset_index import OffsetIndex, OffsetPosition
from kafkalog.index.time_index import TimeIndex, TimestampOffset

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE",
    "AbstractIndex",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]

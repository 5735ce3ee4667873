"""Kafka's record formats: magic 2 batches, legacy magic 0/1 messages, codecs, varints, control records."""

from .batch import RecordBatch, build_batch, build_end_txn_marker_batch
from .compression import CompressionType, compress, decompress
from .control import ControlRecordType, EndTransactionMarker
from .reader import BatchReader, read_batches
from .record import Record, TimestampType

__all__ = [
    "BatchReader",
    "CompressionType",
    "ControlRecordType",
    "EndTransactionMarker",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker_batch",
    "compress",
    "decompress",
    "read_batches",
]

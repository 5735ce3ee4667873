"""Kafka's record formats: magic 2 batches, legacy magic 0/1 messages, codecs, varints, control records."""

from .batch import RecordBatch, build_batch, build_end_txn_marker_batch
from .columns import RecordColumnReader, RecordColumns, iter_record_columns, read_record_columns
from .compression import CompressionType, compress, decompress
from .control import ControlRecordType, EndTransactionMarker
from .legacy import LegacyBatch, LegacyMessage, build_legacy_batch
from .reader import BatchReader, read_batches
from .record import Record, TimestampType
from .scan import ScanResult, scan_batches

__all__ = [
    "BatchReader",
    "CompressionType",
    "ControlRecordType",
    "EndTransactionMarker",
    "LegacyBatch",
    "LegacyMessage",
    "Record",
    "RecordBatch",
    "RecordColumnReader",
    "RecordColumns",
    "ScanResult",
    "TimestampType",
    "build_batch",
    "build_end_txn_marker_batch",
    "build_legacy_batch",
    "compress",
    "decompress",
    "iter_record_columns",
    "read_batches",
    "read_record_columns",
    "scan_batches",
]

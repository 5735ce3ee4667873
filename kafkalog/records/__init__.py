"""Kafka's record formats: magic 2 batches, legacy magic 0/1 messages, codecs, varints, control records.

Names load on first access (:mod:`kafkalog._lazy`): ``from kafkalog.records import read_batches`` imports
no numpy (only the columnar reader and ``scan_batches`` need it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from .batch import RecordBatch, build_batch, build_end_txn_marker_batch
    from .columns import RecordColumnReader, RecordColumns, iter_record_columns, read_record_columns
    from .compression import CompressionType, compress, decompress
    from .control import ControlRecordType, EndTransactionMarker
    from .legacy import LegacyBatch, LegacyMessage, build_legacy_batch
    from .native import release_column_memory
    from .reader import BatchReader, read_batches
    from .record import Record, TimestampType
    from .scan import ScanResult, scan_batches

_EXPORTS = {  # module -> the names it defines
    "kafkalog.records.reader": ("BatchReader", "read_batches"),
    "kafkalog.records.compression": ("CompressionType", "compress", "decompress"),
    "kafkalog.records.control": ("ControlRecordType", "EndTransactionMarker"),
    "kafkalog.records.legacy": ("LegacyBatch", "LegacyMessage", "build_legacy_batch"),
    "kafkalog.records.record": ("Record", "TimestampType"),
    "kafkalog.records.batch": ("RecordBatch", "build_batch", "build_end_txn_marker_batch"),
    "kafkalog.records.columns": ("RecordColumnReader", "RecordColumns", "iter_record_columns", "read_record_columns"),
    "kafkalog.records.scan": ("ScanResult", "scan_batches"),
    "kafkalog.records.native": ("release_column_memory",),
}

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
    "release_column_memory",
    "scan_batches",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

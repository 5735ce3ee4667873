"""kafkalog: Apache Kafka's on-disk partition logs, read and written byte for byte as Kafka does.

The public surface (``../shared/api.md``) is importable from here. Storage classes are resolved on first use so
that ``import kafkalog`` stays cheap for tools that only parse records.
"""

from __future__ import annotations

import importlib
from typing import Any

from kafkalog.records import (
    CompressionType,
    Record,
    RecordBatch,
    RecordColumns,
    TimestampType,
    build_batch,
    iter_record_columns,
    read_batches,
    read_record_columns,
)

__version__ = "0.1.0"

_LAZY = {
    "LegacyBatch": "kafkalog.records",
    "EndTransactionMarker": "kafkalog.records",
    "ControlRecordType": "kafkalog.records",
    "OffsetIndex": "kafkalog.index",
    "TimeIndex": "kafkalog.index",
    "TransactionIndex": "kafkalog.index",
    "AbortedTxn": "kafkalog.index",
    "LogSegment": "kafkalog.segment",
    "LogConfig": "kafkalog.log.config",
    "Log": "kafkalog.log.log",
    "LogAppendInfo": "kafkalog.log.log",
    "TimestampAndOffset": "kafkalog.segment",
    "LogManager": "kafkalog.manager.log_manager",
    "LogDirOfflineEvent": "kafkalog.manager.log_manager",
    "verify_log_file": "kafkalog.verify",
    "errors": "kafkalog.errors",
}

__all__ = [
    "CompressionType",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "TimestampType",
    "build_batch",
    "iter_record_columns",
    "read_batches",
    "read_record_columns",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if name == "errors" else getattr(mod, name)
    globals()[name] = value
    return value

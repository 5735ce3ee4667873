"""kafkalog: Apache Kafka's on-disk partition logs, read and written byte for byte as Kafka does.

The public surface is ``__all__`` below, importable from here, each name with a docstring (``help(kafkalog.Log)``);
the ``kafkalog`` command (also ``python -m kafkalog``) is the operator's side, and ``kafkalog doctor`` says which
compiled parts this install runs. Every name loads on first access (PEP 562, :mod:`kafkalog._lazy`): importing any
``kafkalog.*`` module runs this file, and the CLI's ``--help`` or a tool that only parses records should not pay for
numpy, the index, the log or the manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports, moved_modules

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from kafkalog import errors
    from kafkalog.index import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex
    from kafkalog.log.config import LogConfig
    from kafkalog.log.log import Log, LogAppendInfo
    from kafkalog.log.recovery_plan import RecoveryPlan, plan_recovery
    from kafkalog.log.salvage import SalvageReport, salvage_partition
    from kafkalog.manager.log_manager import LogDirOfflineEvent, LogManager
    from kafkalog.records import (
        CompressionType,
        ControlRecordType,
        EndTransactionMarker,
        LegacyBatch,
        Record,
        RecordBatch,
        RecordColumns,
        TimestampType,
        build_batch,
        iter_record_columns,
        read_batches,
        read_record_columns,
    )
    from kafkalog.segment.log_segment import LogSegment, TimestampAndOffset
    from kafkalog.verify import verify_log_file

__version__ = "0.1.0"

_EXPORTS = {  # module -> the names it defines
    "kafkalog.records": (
        "CompressionType", "Record", "RecordBatch", "RecordColumns", "TimestampType", "build_batch",
        "iter_record_columns", "read_batches", "read_record_columns", "LegacyBatch", "EndTransactionMarker",
        "ControlRecordType",
    ),
    "kafkalog.index": ("OffsetIndex", "TimeIndex", "TransactionIndex", "AbortedTxn"),
    "kafkalog.segment": ("LogSegment", "TimestampAndOffset"),
    "kafkalog.log.config": ("LogConfig",),
    "kafkalog.log.log": ("Log", "LogAppendInfo"),
    "kafkalog.manager.log_manager": ("LogManager", "LogDirOfflineEvent"),
    "kafkalog.log.salvage": ("salvage_partition", "SalvageReport"),
    "kafkalog.log.recovery_plan": ("plan_recovery", "RecoveryPlan"),
    "kafkalog.verify": ("verify_log_file",),
    "kafkalog.errors": ("errors",),
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
    "LegacyBatch",
    "EndTransactionMarker",
    "ControlRecordType",
    "OffsetIndex",
    "TimeIndex",
    "TransactionIndex",
    "AbortedTxn",
    "LogSegment",
    "LogConfig",
    "Log",
    "LogAppendInfo",
    "TimestampAndOffset",
    "LogManager",
    "LogDirOfflineEvent",
    "salvage_partition",
    "SalvageReport",
    "plan_recovery",
    "RecoveryPlan",
    "verify_log_file",
    "errors",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
# documented module paths that moved into kafkalog.archive (CHANGELOG): the same modules under both
moved_modules({"kafkalog.storage": "kafkalog.archive.storage", "kafkalog.tiered": "kafkalog.archive.tiered"})

"""Kafka's segment indexes: ``.index`` (offset -> position), ``.timeindex`` (timestamp -> offset) and
``.txnindex`` (aborted transactions), read and written byte for byte as Kafka does."""

from kafkalog.index.base import DEFAULT_MAX_INDEX_SIZE, AbstractIndex
from kafkalog.index.offset_index import OffsetIndex, OffsetPosition
from kafkalog.index.time_index import TimeIndex, TimestampOffset
from kafkalog.index.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE",
    "AbortedTxn",
    "AbstractIndex",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
]

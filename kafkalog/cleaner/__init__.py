"""Kafka's log cleaner (log compaction) for kafkalog logs: the dirty range, the offset map, the batch filter,
segment grouping and the ``.cleaned``/``.swap`` replacement, byte for byte as Apache Kafka 4.0 cleans. The log
layer does not know this package; it works on a ``Log`` through its public surface and its segment map."""

from __future__ import annotations

from .batch_filter import CleanerStats
from .checkpoint import read_cleaner_checkpoint, update_cleaner_checkpoint
from .cleaner import Cleaner, PassResult
from .config import CleanerConfig
from .dirty_range import LogToClean, cleanable_offsets, log_to_clean
from .offset_map import OffsetMap
from .run import CleanReport, clean_partition

__all__ = [
    "CleanReport", "Cleaner", "CleanerConfig", "CleanerStats", "LogToClean", "OffsetMap", "PassResult",
    "clean_partition", "cleanable_offsets", "log_to_clean", "read_cleaner_checkpoint", "update_cleaner_checkpoint",
]

"""Kafka's log cleaner (log compaction) for kafkalog logs: the dirty range, the offset map, the batch filter,
segment grouping and the ``.cleaned``/``.swap`` replacement, byte for byte as Apache Kafka 4.0 cleans. The log
layer does not know this package; it works on a ``Log`` through its public surface and its segment map.

Names load on first access (:mod:`kafkalog._lazy`): ``kafkalog.cleaner.config`` or ``.checkpoint`` import alone
without the segment and index layers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from kafkalog.cleaner.batch_filter import CleanerStats
    from kafkalog.cleaner.checkpoint import read_cleaner_checkpoint, update_cleaner_checkpoint
    from kafkalog.cleaner.cleaner import Cleaner, PassResult
    from kafkalog.cleaner.config import CleanerConfig
    from kafkalog.cleaner.dirty_range import LogToClean, cleanable_offsets, dirty_ratio_from_sizes, log_to_clean
    from kafkalog.cleaner.offset_map import OffsetMap
    from kafkalog.cleaner.run import CleanReport, clean_partition

_EXPORTS = {  # module -> the names it defines
    "kafkalog.cleaner.batch_filter": ("CleanerStats",),
    "kafkalog.cleaner.checkpoint": ("read_cleaner_checkpoint", "update_cleaner_checkpoint"),
    "kafkalog.cleaner.cleaner": ("Cleaner", "PassResult"),
    "kafkalog.cleaner.config": ("CleanerConfig",),
    "kafkalog.cleaner.dirty_range": ("LogToClean", "cleanable_offsets", "dirty_ratio_from_sizes", "log_to_clean"),
    "kafkalog.cleaner.offset_map": ("OffsetMap",),
    "kafkalog.cleaner.run": ("CleanReport", "clean_partition"),
}

__all__ = [
    "CleanReport", "Cleaner", "CleanerConfig", "CleanerStats", "LogToClean", "OffsetMap", "PassResult",
    "clean_partition", "cleanable_offsets", "dirty_ratio_from_sizes", "log_to_clean", "read_cleaner_checkpoint",
    "update_cleaner_checkpoint",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

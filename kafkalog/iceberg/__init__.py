"""Kafka history as Apache Iceberg tables: ``sync(roots, table, ...)`` appends what the table lacks, in one
snapshot per sync, resumable from the table itself (docs/iceberg.md).

Names load on first access (:mod:`kafkalog._lazy`): importing the package loads neither pyiceberg nor pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from .offsets import NEXT_OFFSETS, table_next_offsets
    from .orphans import clean_orphans
    from .syncer import SyncResult, sync

_EXPORTS = {  # module -> the names it defines
    "kafkalog.iceberg.syncer": ("SyncResult", "sync"),
    "kafkalog.iceberg.offsets": ("NEXT_OFFSETS", "table_next_offsets"),
    "kafkalog.iceberg.orphans": ("clean_orphans",),
}

__all__ = ["NEXT_OFFSETS", "SyncResult", "clean_orphans", "sync", "table_next_offsets"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

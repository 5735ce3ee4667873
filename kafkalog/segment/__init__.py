"""One segment of a partition: a ``.log`` with its offset, time and transaction indexes (Kafka's ``LogSegment``).

:mod:`~kafkalog.segment.log_segment` (``LogSegment``: appends, checks, recovery), :mod:`~kafkalog.segment.log_file`
(the lazily opened ``.log``), :mod:`~kafkalog.segment.reads` (Kafka's reads and offset/timestamp lookups),
:mod:`~kafkalog.segment.lifecycle` (truncation, flush, close, delete, renames) and :mod:`~kafkalog.segment.recovery`
(the recovery engines). Names load on first access,
so importing one module of the package runs no numpy or index code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:
    from kafkalog.segment.log_segment import LogSegment
    from kafkalog.segment.reads import TimestampAndOffset

_EXPORTS = {
    "kafkalog.segment.log_segment": ("LogSegment",),
    "kafkalog.segment.reads": ("TimestampAndOffset",),
}
__all__ = ["LogSegment", "TimestampAndOffset"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

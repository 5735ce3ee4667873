"""The check a segment passes before its indexes answer (KIP-263: done lazily, on first use).

One definition for both users: a ``Log`` checks an inactive segment the first time a read, a timestamp lookup or
an offset lookup needs its indexes, and the ``LogManager``'s background ``SanityChecker`` checks pending segments
ahead of reads. A segment failing it is rebuilt from its ``.log`` (``Log.recover_segments``).
"""

from __future__ import annotations

from kafkalog.errors import InvalidArgumentError, InvalidArgumentTypeError, KafkaLogError, KafkaStorageError

__all__ = ["check_segment", "is_corruption"]


def is_corruption(exc: BaseException) -> bool:
    """True for errors meaning "this segment's files are inconsistent" rather than "the disk failed".

    A missing offset index (``FileNotFoundError``) is Kafka's "needs recovery" signal, not a disk error.
    """
    if isinstance(exc, FileNotFoundError):
        return True
    return isinstance(exc, KafkaLogError) and not isinstance(
        exc, (KafkaStorageError, InvalidArgumentError, InvalidArgumentTypeError)
    )


def check_segment(seg: object) -> None:
    """The full check of one segment: Kafka's index rules, kafkalog's strict index-vs-log checks, and no bytes
    after the last whole batch (a clean shutdown marker does not prove the tail was written completely)."""
    seg.sanity_check(strict=True, whole_batches=True)  # type: ignore[attr-defined]

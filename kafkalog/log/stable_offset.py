"""The last stable offset of an archived partition: where a read_committed consumer stops.

Kafka's broker keeps, per producer, the first offset of its ongoing transaction (``ProducerStateManager``'s
``ongoingTxns``); the partition's first unstable offset is the smallest of them, and the last stable offset (LSO)
is that offset, or the log end when no transaction is open. A read_committed fetch returns nothing at or past it
(``UnifiedLog.read`` with ``FetchIsolation.TXN_COMMITTED``): one open transaction holds back every record after
its first, committed or not, until its marker is written.

An archive has no producer state in memory, so this module replays the batch headers: a transactional data batch
opens its producer's transaction (when none is open), that producer's control batch (a COMMIT or ABORT marker)
closes it. Only headers are read (records are not decoded), from the segment holding ``start`` on, the seek made
with the checked ``.index`` (:func:`kafkalog.log.index_check.checked_range`), so the cost is that of the tail
read, not of the partition.

``start`` must not lie inside a transaction that is still open, or that transaction's first offset is not seen;
offsets a previous read stopped at (an earlier LSO, or the log start) satisfy that: a transaction open then began
at or after it. Used by the in-process and Spark Iceberg sync (:mod:`kafkalog.iceberg`) and meant for the
DataSource's read_committed too: one rule for every read_committed reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.tiered import is_aiven_item
from kafkalog.log.index_check import checked_range
from kafkalog.log.timestamp_offsets import _walk, indexes_on_disk
from kafkalog.records.scan import scan_batches

__all__ = ["OpenTransactions", "PartitionTail", "first_unstable_offset", "last_stable_offset", "partition_tail"]

_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_NO_PRODUCER = -1


class OpenTransactions:
    """Producer id -> first offset of its open transaction, fed batch headers in log order; ``log_end``: the
    offset after the last batch fed (None before the first)."""

    def __init__(self, first: dict[int, int] | None = None) -> None:
        self.first: dict[int, int] = dict(first or {})
        self.log_end: int | None = None

    def feed(self, base_offset: int, attributes: int, producer_id: int, last_offset: int | None = None) -> None:
        if last_offset is not None and (self.log_end is None or last_offset + 1 > self.log_end):
            self.log_end = last_offset + 1
        if not attributes & _TRANSACTIONAL or producer_id == _NO_PRODUCER:
            return
        if attributes & _CONTROL:
            self.first.pop(producer_id, None)
        else:
            self.first.setdefault(producer_id, base_offset)

    def first_unstable(self) -> int | None:
        """The first offset of the earliest open transaction; None when none is open."""
        return min(self.first.values()) if self.first else None


@dataclass(frozen=True)
class PartitionTail:
    """What the headers from a start offset on say: the first offset of the earliest open transaction (None:
    none open), the log end (None: no batch at or after the start), and the LSO (Kafka's rule: the first unstable
    offset, else the log end; the start when there was no batch)."""

    first_unstable: int | None
    log_end: int | None
    start: int

    @property
    def last_stable(self) -> int:
        end = self.start if self.log_end is None else self.log_end
        return end if self.first_unstable is None else min(self.first_unstable, end)


def partition_tail(items: Sequence[Any], start: int = 0, *, options: dict[str, str] | None = None,
                   rsm: Any = None, open_at_start: dict[int, int] | None = None) -> PartitionTail:  # fmt: skip
    """Replay the batch headers of one partition's segments ``items`` (:class:`kafkalog.archive.discovery.SegmentItem`,
    in offset order) from ``start``: open transactions and the log end. ``open_at_start``: the transactions
    already open at ``start`` (a producer snapshot's ``currentTxnFirstOffset``s taken there). A damaged batch ends
    the replay of its segment (the decode that follows reports it)."""
    txns = OpenTransactions(open_at_start)
    for i, item in enumerate(items):
        nxt = items[i + 1].base_offset if i + 1 < len(items) else None
        if nxt is not None and nxt <= start:
            continue
        _replay(item, start, txns, options, rsm)
    return PartitionTail(txns.first_unstable(), txns.log_end, start)


def first_unstable_offset(items: Sequence[Any], start: int = 0, *, options: dict[str, str] | None = None,
                          rsm: Any = None) -> int | None:  # fmt: skip
    """The first offset of the earliest transaction still open at the end of the partition; None when every
    transaction is closed (:func:`partition_tail`)."""
    return partition_tail(items, start, options=options, rsm=rsm).first_unstable


def last_stable_offset(items: Sequence[Any], log_end: int, start: int = 0, *,
                       options: dict[str, str] | None = None, rsm: Any = None) -> int:  # fmt: skip
    """Kafka's LSO of the partition: its first unstable offset, else ``log_end``."""
    first = first_unstable_offset(items, start, options=options, rsm=rsm)
    return log_end if first is None else min(first, log_end)


def _replay(item: Any, start: int, txns: OpenTransactions, options: dict[str, str] | None, rsm: Any) -> None:
    """Feed ``txns`` the headers of the batches of one segment that hold offsets at or after ``start``."""
    remote = storage.is_remote(item.path) or is_aiven_item(item)
    if not remote:
        position = checked_range(item.path, item.base_offset, start)[0] if start > item.base_offset else 0
        result = scan_batches(item.path, position=position, check_crc=False)
        h = result.headers
        last = result.last_offsets
        wanted = last >= start
        if not wanted.any():
            return
        top = int(last[wanted].max())
        if txns.log_end is None or top + 1 > txns.log_end:
            txns.log_end = top + 1
        # only transactional batches move the open transactions: an archive without any costs no loop
        txn = wanted & ((h["attributes"] & _TRANSACTIONAL) != 0) & (h["producer_id"] != _NO_PRODUCER)
        for base, attrs, pid in zip(h["base_offset"][txn].tolist(), h["attributes"][txn].tolist(),
                                    h["producer_id"][txn].tolist(), strict=True):  # fmt: skip
            txns.feed(base, attrs, pid)
        return
    with indexes_on_disk(item, options, rsm) as local:
        size = local.size_bytes
        position = 0
        if start > item.base_offset:
            position = checked_range(local.path, item.base_offset, start, log_size=size)[0]
    for batch in _walk(item, position, size, options, rsm):
        if batch.last_offset >= start:
            txns.feed(batch.base_offset, batch.attributes, batch.producer_id, batch.last_offset)

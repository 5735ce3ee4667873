"""What a ``read_committed`` consumer gets from an archived partition, without a broker.

A broker serves a read_committed fetch up to the partition's last stable offset (LSO): the first offset of the
earliest transaction still open, or the high watermark when none is. Below it, the consumer drops control batches
and the records of aborted transactions, which the fetch response lists from the segments' ``.txnindex`` files
(``LogSegment.collectAbortedTxns``). An archive has no high watermark beyond its data, so its LSO is the first
offset of the earliest transaction open at the end of the log, or none (every record is stable).

The open transactions come from Kafka's own producer state: the newest ``.snapshot`` at or below the last segment's
base offset holds each producer's ``currentTxnFirstOffset`` at that offset (what the broker's loader starts from),
and the batch headers after it open (a transactional data batch) and close (a control batch: COMMIT or ABORT) them.
Without a snapshot (or for remote roots, whose listing has none) every batch header of the partition is read. The
walk stops at damage: the scan that reads the records reports it.

One function, :func:`committed_view`, so the DataSource, the export and whatever else reads committed records agree;
the header replay itself is :mod:`kafkalog.log.stable_offset`'s, which the Iceberg sync also runs from its resume
offset.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.tiered import is_aiven_item
from kafkalog.errors import CorruptSnapshotError
from kafkalog.index import TransactionIndex
from kafkalog.log.producer_snapshot import read_producer_snapshot
from kafkalog.log.stable_offset import partition_tail
from kafkalog.log.timestamp_offsets import indexes_on_disk
from kafkalog.names import SNAPSHOT_SUFFIX, parse_segment_file_name

__all__ = ["CommittedView", "committed_view"]


@dataclass(frozen=True)
class CommittedView:
    """A partition as a read_committed consumer sees it: records at offsets below ``last_stable_offset`` (None:
    all), without control batches and without the transactional records of ``aborted`` producers' ranges."""

    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (producer id, first offset, last offset)
    last_stable_offset: int | None = None


def committed_view(items: Sequence[Any], options: dict[str, str] | None = None, rsm: Any = None) -> CommittedView:
    """The :class:`CommittedView` of one partition given its ``SegmentItem``s in offset order (local, remote or
    Aiven tiered)."""
    return CommittedView(aborted_txns(items, options, rsm), last_stable_offset(items, options, rsm))


def aborted_txns(items: Sequence[Any], options: dict[str, str] | None = None, rsm: Any = None) -> list[tuple[int, int, int]]:
    """(producer_id, first_offset, last_offset) of every aborted transaction in the partition's ``.txnindex``
    files."""
    out: list[tuple[int, int, int]] = []
    for item in items:
        if item.txnindex_size <= 0 and not is_aiven_item(item):
            continue
        with indexes_on_disk(item, options, rsm) as local:
            if local.txnindex_size <= 0:
                continue
            idx = TransactionIndex(local.sibling(".txnindex"), item.base_offset, writable=False)
            try:
                for txn in idx.all_aborted_txns():
                    out.append((int(txn.producer_id), int(txn.first_offset), int(txn.last_offset)))
            finally:
                idx.close()
    return out


def last_stable_offset(items: Sequence[Any], options: dict[str, str] | None = None, rsm: Any = None) -> int | None:
    """The first offset of the earliest transaction open at the end of the partition, None when none is: the
    header replay of :func:`kafkalog.log.stable_offset.partition_tail`, started at the newest producer snapshot
    with the transactions it records as open (from the log start without one)."""
    if not items:
        return None
    start, open_txns = _snapshot_state(items)
    return partition_tail(items, max(start, 0), options=options, rsm=rsm, open_at_start=open_txns).first_unstable


def _snapshot_state(items: Sequence[Any]) -> tuple[int, dict[int, int]]:
    """(offset, {producer id: first offset of its open transaction}) from the newest readable ``.snapshot`` of
    a local partition dir at or below its last segment's base offset; (-1, {}) when there is none."""
    pdir = items[0].partition_dir
    if storage.is_remote(pdir) or is_aiven_item(items[0]):
        return -1, {}
    try:
        names = os.listdir(pdir)
    except OSError:
        return -1, {}
    offsets = sorted((p.offset for n in names if (p := parse_segment_file_name(n)) is not None
                      and p.suffix == SNAPSHOT_SUFFIX and not p.temp_suffix
                      and items[0].base_offset <= p.offset <= items[-1].base_offset), reverse=True)  # fmt: skip
    for offset in offsets:
        try:
            entries = read_producer_snapshot(os.path.join(pdir, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
        except (OSError, CorruptSnapshotError):
            continue  # an older one, or the whole log
        return offset, {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0}
    return -1, {}

"""Transaction state while the cleaner walks the log (Kafka's ``CleanedTransactionMetadata``): which data batches
belong to aborted transactions, when a commit or abort marker may go, and the aborted transactions the cleaned
segment's ``.txnindex`` keeps."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from kafkalog.index.txn_index import AbortedTxn, TransactionIndex
from kafkalog.records.control import ControlRecordType, parse_control_type
from kafkalog.segment.log_segment import LogSegment

__all__ = ["CleanedTransactionMetadata", "collect_aborted_transactions"]


def collect_aborted_transactions(segments: Sequence[LogSegment], log_start_offset: int, start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """Kafka's ``UnifiedLog.collectAbortedTransactions``: from the segment holding ``start_offset`` on, every
    ``.txnindex`` entry overlapping [log start, upper bound), until one segment's search is complete."""
    bases = [s.base_offset for s in segments]
    first = 0
    for i, base in enumerate(bases):
        if base <= start_offset:
            first = i
    if not segments or bases[0] > start_offset:
        return []
    out: list[AbortedTxn] = []
    for seg in segments[first:]:
        result = seg.txn_index.collect_aborted_txns(log_start_offset, upper_bound_offset)
        out.extend(result.aborted_transactions)
        if result.is_complete:
            break
    return out


class _Aborted:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Fed every batch in log order; answers whether it may be discarded."""

    def __init__(self, cleaned_index: TransactionIndex | None = None) -> None:
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seq = itertools.count()
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _Aborted] = {}
        self.cleaned_index = cleaned_index

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._heap, (txn.first_offset, next(self._seq), txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._heap and self._heap[0][0] <= offset:
            txn = heapq.heappop(self._heap)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_control_batch_read(self, batch: Any) -> bool:
        """True when this commit/abort marker may be discarded (no batch of its transaction is left)."""
        self._consume_aborted_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an emptied control batch: already cleaned
        ctype = parse_control_type(records[0].key)
        pid = batch.producer_id
        if ctype == ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.txn)
                return False
            return True
        if ctype == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: Any) -> bool:
        """True when this data batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(batch.last_offset)
        if not getattr(batch, "is_transactional", False):
            return False
        aborted = self._ongoing_aborted.get(batch.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False

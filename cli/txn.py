"""``kafkalog txn report``: transactions per producer, from the batches and cross-checked with the ``.txnindex``.

One shallow pass over each partition's segments (only control batches are decoded, one record each): a
transactional data batch opens (or extends) its producer's transaction, a COMMIT/ABORT marker ends it. What is
still open at the log end is *open*; an open transaction whose first batch is older than
``--transaction-timeout-ms`` (Kafka's ``transaction.max.timeout.ms``, 15 min) measured against the newest
timestamp in the partition is *hanging* (what ``kafka-transactions.sh find-hanging`` looks for). Every aborted
transaction must appear in the ``.txnindex`` of the segment holding its marker; a missing or extra entry is
reported and makes the exit code 1.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import click

from kafkalog.archive.discovery import nothing_found
from kafkalog.names import parse_segment_file_name
from kafkalog.records import ControlRecordType, read_batches

from .errors import EXIT_CORRUPT, EXIT_OK, CliState, CommandError
from .output import Event, make_output

DEFAULT_TXN_TIMEOUT_MS = 900_000


@dataclass
class ProducerTxns:
    producer_id: int
    epoch: int = -1
    committed: int = 0
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (first offset, marker offset)
    open_first_offset: int | None = None
    open_first_timestamp: int | None = None
    open_last_offset: int | None = None


@dataclass
class PartitionTxnReport(Event):
    path: str
    producers: dict[int, ProducerTxns]
    max_timestamp: int
    timeout_ms: int
    index_problems: list[str]
    type = "partition"  # type: ignore[misc]

    def _hanging(self, p: ProducerTxns) -> bool:
        return (
            p.open_first_offset is not None
            and p.open_first_timestamp is not None
            and self.max_timestamp - p.open_first_timestamp >= self.timeout_ms
        )

    def text(self) -> str:
        lines = [f"Transactions in {self.path}"]
        for pid in sorted(self.producers):
            p = self.producers[pid]
            state = ""
            if p.open_first_offset is not None:
                state = (
                    f" open: firstOffset {p.open_first_offset} lastOffset {p.open_last_offset}"
                    f"{' HANGING' if self._hanging(p) else ''}"
                )
            lines.append(
                f"  producerId: {pid} producerEpoch: {p.epoch} committed: {p.committed} aborted: {len(p.aborted)}{state}"
            )
        for problem in self.index_problems:
            lines.append(f"  txnindex: {problem}")
        if not self.producers:
            lines.append("  no transactional producers")
        return "\n".join(lines)

    def fields(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "producers": [
                {
                    "producerId": pid,
                    "producerEpoch": p.epoch,
                    "committed": p.committed,
                    "aborted": [{"firstOffset": a, "lastOffset": b} for a, b in p.aborted],
                    "open": None
                    if p.open_first_offset is None
                    else {
                        "firstOffset": p.open_first_offset,
                        "lastOffset": p.open_last_offset,
                        "firstTimestamp": p.open_first_timestamp,
                    },  # fmt: skip
                    "hanging": self._hanging(p),
                }
                for pid, p in sorted(self.producers.items())
            ],
            "txnIndexProblems": self.index_problems,
        }


@click.group()
def txn() -> None:
    """Transaction reports."""


@txn.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option(
    "--transaction-timeout-ms",
    type=click.IntRange(min=0),
    default=DEFAULT_TXN_TIMEOUT_MS,
    show_default=True,
    help="An open transaction older than this (vs the newest timestamp in the partition) is hanging.",
)
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per partition.")
@click.pass_obj
def report(state: CliState | None, paths: tuple[str, ...], transaction_timeout_ms: int, json_mode: bool) -> None:
    """Open, aborted, committed and hanging transactions per producer, for partition dirs or log dirs.

    Exit 1 when the .txnindex files disagree with the markers in the log, or a transaction is hanging.
    """
    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    code = EXIT_OK
    for path in paths:
        for pdir in _partition_dirs(path):
            rep = _report_partition(pdir, transaction_timeout_ms)
            if rep.index_problems or any(rep._hanging(p) for p in rep.producers.values()):
                code = EXIT_CORRUPT
            out.emit(rep)
    click.get_current_context().exit(code)


def _partition_dirs(path: str) -> list[str]:
    os.stat(path)  # a missing or unreadable path: the OS's reason
    if not os.path.isdir(path):
        raise CommandError(f"{path}: not a directory (give a partition dir or a log dir)", path=path)
    if _has_segments(path):
        return [os.path.abspath(path)]
    found = sorted(
        os.path.join(path, n)
        for n in os.listdir(path)
        if os.path.isdir(os.path.join(path, n)) and _has_segments(os.path.join(path, n))
    )
    if not found:
        raise nothing_found(path)
    return [os.path.abspath(p) for p in found]


def _has_segments(path: str) -> bool:
    """Whether a dir holds a segment this report reads (a ``.log`` named by a base offset Kafka can parse)."""
    return any((p := parse_segment_file_name(n)) is not None and p.suffix == ".log" for n in os.listdir(path))


def _report_partition(pdir: str, timeout_ms: int) -> PartitionTxnReport:
    from kafkalog.index.txn_index import TransactionIndex

    producers: dict[int, ProducerTxns] = {}
    max_ts = -1
    problems: list[str] = []
    logs = sorted(
        (p.offset, n)
        for n in os.listdir(pdir)
        if (p := parse_segment_file_name(n)) is not None and p.suffix == ".log" and not p.temp_suffix
    )
    for base, name in logs:
        aborted_here: dict[tuple[int, int, int], None] = {}
        reader = read_batches(os.path.join(pdir, name))
        try:
            for batch in reader:
                if batch.max_timestamp > max_ts:
                    max_ts = batch.max_timestamp
                if batch.magic < 2 or not batch.is_transactional:
                    continue
                p = producers.get(batch.producer_id)
                if p is None:
                    p = producers[batch.producer_id] = ProducerTxns(batch.producer_id)
                p.epoch = max(p.epoch, batch.producer_epoch)
                if batch.is_control:
                    marker = batch.control_marker()
                    if marker is None:
                        continue
                    first = p.open_first_offset if p.open_first_offset is not None else batch.base_offset
                    if marker.control_type == ControlRecordType.COMMIT:
                        p.committed += 1
                    else:
                        p.aborted.append((first, batch.last_offset))
                        aborted_here[(batch.producer_id, first, batch.last_offset)] = None
                    p.open_first_offset = p.open_first_timestamp = p.open_last_offset = None
                else:
                    if p.open_first_offset is None:
                        p.open_first_offset = batch.base_offset
                        p.open_first_timestamp = batch.max_timestamp
                    p.open_last_offset = batch.last_offset
        finally:
            reader.close()
        index_path = os.path.join(pdir, name[: -len(".log")] + ".txnindex")
        indexed: dict[tuple[int, int, int], None] = {}
        if os.path.exists(index_path):
            index = TransactionIndex(index_path, base, writable=False)
            try:
                for e in index.all_entries():
                    indexed[(e.producer_id, e.first_offset, e.last_offset)] = None
            finally:
                index.close()
        for pid, first, last in aborted_here:
            if (pid, first, last) not in indexed:
                problems.append(
                    f"{os.path.basename(index_path)}: no entry for the transaction of producer {pid} aborted at"
                    f" offset {last} (first offset {first})"
                )
        for pid, first, last in indexed:
            if (pid, first, last) not in aborted_here:
                problems.append(
                    f"{os.path.basename(index_path)}: entry for producer {pid} ({first}-{last}) matches no abort"
                    " marker in this segment"
                )
    return PartitionTxnReport(pdir, producers, max_ts, timeout_ms, problems)


_ = defaultdict  # keep the import for readers extending the report per epoch

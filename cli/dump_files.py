"""``kafkalog dump`` of a partition's and a log dir's small files: producer snapshots, offset checkpoints, the
leader-epoch checkpoint, ``partition.metadata``, ``meta.properties`` and the clean-shutdown marker, each in the line
shape of Kafka's ``DumpLogSegments`` (or, where Kafka's tool has none, ``key: value`` pairs of what Kafka reads).
``dump.py`` dispatches to them by file kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkalog.checkpoint.clean_shutdown import parse_clean_shutdown
from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.meta_properties import read_meta_properties
from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata_file
from kafkalog.errors import CorruptCheckpointError, CorruptSnapshotError
from kafkalog.log.producer_snapshot import read_producer_snapshot

from .dump_events import optional_long
from .output import Simple

if TYPE_CHECKING:
    from .dump_state import DumpState

__all__ = ["dump_clean_shutdown", "dump_leader_epochs", "dump_meta_properties", "dump_offset_checkpoint",
           "dump_partition_metadata", "dump_producer_snapshot"]  # fmt: skip


def dump_producer_snapshot(path: str, base: str, st: DumpState) -> None:
    try:
        entries = read_producer_snapshot(path)
    except CorruptSnapshotError as exc:
        st.corrupt()
        st.problem(str(exc), "corrupt_snapshot", file=path, error=str(exc))
        return
    for e in entries:
        txn_first = e.txn_first_offset
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch}"
            f" currentTxnFirstOffset: {optional_long(txn_first)} lastTimestamp: {e.timestamp}"
        )
        data: dict[str, Any] = {
            "producerId": e.producer_id,
            "producerEpoch": e.producer_epoch,
            "coordinatorEpoch": e.coordinator_epoch,
            "currentTxnFirstOffset": txn_first,
            "lastTimestamp": e.timestamp,
        }
        if e.has_batch:  # Kafka prints the batch metadata only when the entry has some
            line += (
                f" firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} lastOffset: {e.last_offset}"
                f" offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
            data.update(
                firstSequence=e.first_sequence,
                lastSequence=e.last_sequence,
                lastOffset=e.last_offset,
                offsetDelta=e.offset_delta,
                timestamp=e.timestamp,
            )
        st.emit(Simple(line, data, type="producer"))


# --- checkpoints and metadata -----------------------------------------------------------------------------------


def _guard(path: str, st: DumpState, read: Callable[[], Any]) -> Any | None:
    try:
        return read()
    except CorruptCheckpointError as exc:
        st.corrupt()
        st.problem(f"corrupt checkpoint: {exc}", "corrupt_checkpoint", file=path, error=str(exc))
        return None


def dump_offset_checkpoint(path: str, base: str, st: DumpState) -> None:
    offsets = _guard(path, st, lambda: read_offset_checkpoint(path))
    if offsets is None:
        return
    for (topic, partition), offset in offsets.items():
        data = {"topic": topic, "partition": partition, "offset": offset}
        st.emit(Simple(f"topic: {topic} partition: {partition} offset: {offset}", data, type="checkpoint"))


def dump_leader_epochs(path: str, base: str, st: DumpState) -> None:
    entries = _guard(path, st, lambda: read_leader_epoch_checkpoint(path))
    for e in entries or ():
        data = {"epoch": e.epoch, "startOffset": e.start_offset}
        st.emit(Simple(f"epoch: {e.epoch} startOffset: {e.start_offset}", data, type="leader_epoch"))


def dump_partition_metadata(path: str, base: str, st: DumpState) -> None:
    meta = _guard(path, st, lambda: read_partition_metadata_file(path))
    if meta is not None:
        data = {"version": meta.version, "topicId": meta.topic_id}
        st.emit(Simple(f"version: {meta.version} topicId: {meta.topic_id}", data, type="partition_metadata"))


def dump_meta_properties(path: str, base: str, st: DumpState) -> None:
    meta = _guard(path, st, lambda: read_meta_properties(path))
    if meta is not None:
        data = {
            "version": meta.version,
            "clusterId": meta.cluster_id,
            "nodeId": meta.node_id,
            "directoryId": meta.directory_id,
        }
        line = " ".join(f"{k}: {v}" for k, v in data.items() if v is not None)
        st.emit(Simple(line, data, type="meta_properties"))


def dump_clean_shutdown(path: str, base: str, st: DumpState) -> None:
    with open(path, "rb") as f:
        epoch, error = parse_clean_shutdown(f.read(4096))
    data = {"brokerEpoch": epoch, "error": error}
    st.emit(Simple(f"brokerEpoch: {epoch}" + (f" error: {error}" if error else ""), data, type="clean_shutdown"))

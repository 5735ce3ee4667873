"""Decoded records into the table's data files: the same code in one process and in a Spark task.

The records come from the ``kafkalog`` DataSource's own segment scan (:class:`kafkalog.spark.datasource.
KafkaLogReader`: index seek, remote byte ranges, Aiven chunks, ``isolation`` with the ``.txnindex`` aborts,
``onCorrupt``), bounded to each partition's [start, stop) offsets, and are converted to the table's columns
(:func:`kafkalog.iceberg.schema.to_table_rows`). They are buffered up to :data:`FLUSH_BYTES` of Arrow data and
handed to pyiceberg's writer, which splits them by partition (topic, day) and cuts files at the table's
``write.target-file-size-bytes``: files of hundreds of MB, not one per segment. The files are written; nothing is
committed here (the driver commits every file of a sync in one snapshot).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkalog.iceberg.offsets import PartitionPlan
from kafkalog.iceberg.schema import SCAN_COLUMNS, to_table_rows

__all__ = ["FLUSH_BYTES", "TaskOutput", "make_reader", "segment_parts", "write_parts"]

#: Arrow bytes buffered before pyiceberg writes them (its bin-packing then cuts files at the target size)
FLUSH_BYTES = 256 << 20


@dataclass
class TaskOutput:
    """What one writer produced: pyiceberg DataFiles (not yet in any snapshot), rows, and what was skipped."""

    data_files: list[Any] = field(default_factory=list)
    rows: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    segments: int = 0


def make_reader(roots: list[str], isolation: str, on_corrupt: str, storage_options: dict[str, str],
                rsm: Any) -> Any:  # fmt: skip
    """The DataSource's reader with the sync's options, emitting :data:`SCAN_COLUMNS` only."""
    import json

    from kafkalog.spark.datasource import KafkaLogReader
    from kafkalog.spark.scan import arrow_schema as scan_schema

    opts = {**storage_options, "paths": json.dumps(roots), "isolation": isolation, "onCorrupt": on_corrupt}
    reader = KafkaLogReader(opts, None)
    reader.rsm = rsm
    full = scan_schema()
    import pyarrow as pa

    reader.columns = (*SCAN_COLUMNS, "is_control")  # read_uncommitted: the DataSource keeps markers, a consumer not
    reader.out_schema = pa.schema([full.field(c) for c in reader.columns])
    return reader


def segment_parts(plan: PartitionPlan, reader: Any) -> list[Any]:
    """The DataSource's input partitions (one per segment) that hold offsets in [plan.start, plan.stop), each
    bounded to that range, with the aborted transactions overlapping it (read_committed)."""
    from kafkalog.spark.datasource import Bounds, SegmentPartition, _aborted_txns

    bounds = Bounds(plan.start, plan.stop - 1)
    items = plan.items
    wanted = [i for i, item in enumerate(items)
              if (i + 1 == len(items) or items[i + 1].base_offset > plan.start) and item.base_offset < plan.stop]  # fmt: skip
    aborted: list[tuple[int, int, int]] = []
    if reader.isolation == "read_committed":
        # an abort of a transaction with records at or after the start has its marker there too
        aborted = _aborted_txns([items[i] for i in wanted] + items[wanted[-1] + 1:] if wanted else [],
                                reader.storage, reader.rsm)  # fmt: skip
    parts = []
    for i in wanted:
        item = items[i]
        nxt = items[i + 1].base_offset if i + 1 < len(items) else 1 << 63
        if item.size_bytes <= 0:
            continue
        mine = [a for a in aborted if a[1] < nxt and a[2] >= item.base_offset]
        parts.append(SegmentPartition(item, nxt, mine, bounds=bounds))
    return parts


class _Files:
    """Buffered rows to data files through pyiceberg's writer."""

    def __init__(self, metadata: Any, io: Any) -> None:
        self.metadata, self.io = metadata, io
        self.write_uuid = uuid.uuid4()  # file names: 00000-<n>-<uuid>.parquet, unique per writer
        self.counter = itertools.count(0)
        self.buffer: list[Any] = []
        self.size = 0
        self.out: list[Any] = []

    def add(self, rows: Any) -> None:
        self.buffer.append(rows)
        self.size += rows.nbytes
        if self.size >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        import pyarrow as pa
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        table = pa.Table.from_batches(self.buffer)
        self.buffer, self.size = [], 0
        self.out.extend(_dataframe_to_data_files(self.metadata, table, self.io, self.write_uuid, self.counter))


def write_parts(reader: Any, parts: Iterable[Any], metadata: Any, io: Any) -> TaskOutput:
    """Decode ``parts`` (SegmentPartitions) and write their rows as data files of the table ``metadata``
    describes; a corrupt segment raises the decoder's ``CorruptRecordError`` naming it (``onCorrupt=fail``) after
    removing the files this writer wrote, or is read past and listed in ``skipped`` (``skip``)."""
    files = _Files(metadata, io)
    out = TaskOutput()
    try:
        for part in parts:
            out.segments += 1
            for batch in _scan(reader, part, out):
                rows = to_table_rows(batch)
                out.rows += rows.num_rows
                files.add(rows)
        files.flush()
    except BaseException:
        remove_files(io, files.out)
        raise
    out.data_files = files.out
    return out


def _scan(reader: Any, part: Any, out: TaskOutput) -> Iterator[Any]:
    from kafkalog.spark.datasource import _scan_segment
    from kafkalog.spark.scan import ScanMetrics

    m = ScanMetrics(part.item.path)
    for batch in _scan_segment(reader, part, m):
        if batch.num_rows:
            yield batch
    if m.skipped_regions or m.skipped_batches:
        out.skipped.append({"segment": part.item.path, "position": m.first_skipped_position,
                            "regions": m.skipped_regions, "bytes": m.skipped_bytes, "batches": m.skipped_batches,
                            "error": m.first_skipped_error})  # fmt: skip


def remove_files(io: Any, data_files: Iterable[Any]) -> None:
    """Delete written data files that will not be committed (best effort: what remains is an orphan)."""
    for f in data_files:
        try:
            io.delete(f.file_path)
        except Exception:  # noqa: BLE001,S112 - left for the orphan cleanup
            continue

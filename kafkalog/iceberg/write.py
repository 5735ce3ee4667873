"""Decoded records into the table's data files: the same code in one process and in a Spark task.

The records come from the ``kafkalog`` DataSource's own segment scan (:class:`kafkalog.spark.datasource.
KafkaLogReader`: index seek, remote byte ranges, Aiven chunks, ``isolation`` with the ``.txnindex`` aborts,
``onCorrupt``), bounded to each partition's [start, stop) offsets, and are converted to the table's columns
(:func:`kafkalog.iceberg.schema.to_table_rows`). They are streamed, split by partition (topic, day), into
Parquet data files cut at the table's ``write.target-file-size-bytes`` of Arrow data (pyiceberg's measure), with
pyiceberg's layout and column metrics: files of hundreds of MB, not one per segment. The files are written; nothing is committed here (the driver commits every file of a sync in one
snapshot).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkalog.iceberg.offsets import PartitionPlan
from kafkalog.iceberg.schema import SCAN_COLUMNS, arrow_schema, to_table_rows
from kafkalog.spark.parquet_file import DICTIONARY_COLUMNS, ROW_GROUP_ROWS, column_codecs

__all__ = ["MAX_OPEN_FILES", "TaskOutput", "lost_offsets", "make_reader", "segment_parts", "write_parts"]

#: data files a writer keeps open at once (one per (topic, day) it is writing; each holds up to a row group)
MAX_OPEN_FILES = 8
_TS = SCAN_COLUMNS.index("timestamp")
_DAY_US = 86_400_000_000
#: a row's partition key is topic number * stride + day (days since 1970; _NO_DAY for a null timestamp)
_NO_DAY = -(1 << 31)
_TOPIC_STRIDE = 1 << 33


@dataclass
class TaskOutput:
    """What one writer produced: pyiceberg DataFiles (not yet in any snapshot), rows, and what was skipped."""

    data_files: list[Any] = field(default_factory=list)
    rows: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    segments: int = 0
    task_seconds: list[float] = field(default_factory=list)  # each Spark task's own time in write_parts


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
    from kafkalog.log.committed import aborted_txns
    from kafkalog.spark.datasource import Bounds, SegmentPartition

    bounds = Bounds(plan.start, plan.stop - 1)
    items = plan.items
    wanted = [i for i, item in enumerate(items)
              if (i + 1 == len(items) or items[i + 1].base_offset > plan.start) and item.base_offset < plan.stop]  # fmt: skip
    aborted: list[tuple[int, int, int]] = []
    if reader.isolation == "read_committed":
        # an abort of a transaction with records at or after the start has its marker there too
        aborted = aborted_txns([items[i] for i in wanted] + items[wanted[-1] + 1:] if wanted else [],
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


class _OpenFile:
    """One data file being written: a Parquet writer with the export's settings, rows held until a row group of
    :data:`~kafkalog.spark.parquet_file.ROW_GROUP_ROWS` is full."""

    def __init__(self, files: _Files, pk: Any, first: Any) -> None:
        import pyarrow.parquet as pq
        from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

        self.pk = pk
        name = f"00000-{next(files.counter)}-{files.write_uuid}.parquet"
        self.path = files.locations.new_data_location(data_file_name=name, partition_key=pk)
        kwargs = _get_parquet_writer_kwargs(files.metadata.properties)
        kwargs["compression"] = column_codecs(first, kwargs["compression"])
        self.output = files.io.new_output(self.path)
        self.stream = self.output.create(overwrite=True)
        self.writer = pq.ParquetWriter(self.stream, schema=arrow_schema(), use_dictionary=list(DICTIONARY_COLUMNS),
                                       **kwargs)  # fmt: skip
        self.pending: list[Any] = []
        self.pending_rows = 0
        self.nbytes = 0  # Arrow bytes written: the measure of pyiceberg's write.target-file-size-bytes

    def write(self, rows: Any) -> None:
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        self.nbytes += rows.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._row_group()

    def _row_group(self) -> None:
        import pyarrow as pa

        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending, arrow_schema()),
                                    row_group_size=max(self.pending_rows, 1))  # fmt: skip
            self.pending, self.pending_rows = [], 0

    def close(self, files: _Files) -> Any:
        """Finish the file; its pyiceberg DataFile (Iceberg's column metrics from the Parquet footer)."""
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )  # fmt: skip
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

        self._row_group()
        self.writer.close()
        self.stream.close()
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=self.writer.writer.metadata,
            stats_columns=compute_statistics_plan(files.schema, files.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(files.schema))  # fmt: skip
        return DataFile.from_args(content=DataFileContent.DATA, file_path=self.path, file_format=FileFormat.PARQUET,
                                  partition=self.pk.partition, file_size_in_bytes=len(self.output),
                                  sort_order_id=None, spec_id=files.metadata.default_spec_id, equality_ids=None,
                                  key_metadata=None, **stats.to_serialized_dict())  # fmt: skip

    def abort(self) -> None:
        for close in (self.writer.close, self.stream.close):
            try:
                close()
            except Exception:  # noqa: BLE001,S112 - the file is removed next
                continue


class _Files:
    """Decoded rows streamed into data files, one open file per partition (topic, day), each cut at the table's
    ``write.target-file-size-bytes`` of Arrow data (pyiceberg's measure): the rows of a chunk are written while
    they are in cache, as the export writes them, not buffered for the whole task. A chunk of one segment is one
    topic and nearly always one day, which a numpy comparison tells; a chunk spanning days is split by a stable
    sort. Files are written with pyiceberg's names, locations and column metrics (Iceberg's statistics from the
    footer); at most :data:`MAX_OPEN_FILES` are open (the least recently written is finished first)."""

    def __init__(self, metadata: Any, io: Any) -> None:
        from pyiceberg.table import TableProperties
        from pyiceberg.table.locations import load_location_provider
        from pyiceberg.utils.properties import property_as_int

        self.metadata, self.io = metadata, io
        self.write_uuid = uuid.uuid4()  # file names: 00000-<n>-<uuid>.parquet, unique per writer
        self.counter = itertools.count(0)
        self.topics: dict[str, int] = {}
        self.open: dict[int, _OpenFile] = {}  # partition key (topic number * stride + day) -> its file
        self.out: list[Any] = []
        self.spec, self.schema = metadata.spec(), metadata.schema()
        self.locations = load_location_provider(table_location=metadata.location,
                                                table_properties=metadata.properties)  # fmt: skip
        self.target = property_as_int(metadata.properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                                      TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)  # fmt: skip

    def add(self, rows: Any) -> None:
        """Write one chunk (rows of one segment: one topic)."""
        import numpy as np
        import pyarrow as pa

        if not rows.num_rows:
            return
        ts = rows.column(_TS)
        us = ts.view(pa.int64()).to_numpy(zero_copy_only=False)
        days = np.floor_divide(us, _DAY_US)
        if ts.null_count:
            days[ts.is_null().to_numpy(zero_copy_only=False)] = _NO_DAY
        topic = self.topics.setdefault(rows.column(0)[0].as_py(), len(self.topics))
        key = days + topic * _TOPIC_STRIDE
        if (key == key[0]).all():
            self._write(int(key[0]), rows)
            return
        order = np.argsort(key, kind="stable")
        key = key[order]
        rows = rows.take(pa.array(order))
        bounds = [0, *(np.flatnonzero(key[1:] != key[:-1]) + 1).tolist(), len(key)]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            self._write(int(key[lo]), rows.slice(lo, hi - lo))

    def _write(self, key: int, rows: Any) -> None:
        f = self.open.pop(key, None)  # re-inserted last: the dict's order is the least recently written first
        if f is None:
            if len(self.open) >= MAX_OPEN_FILES:
                self.out.append(self.open.pop(next(iter(self.open))).close(self))
            f = _OpenFile(self, self._partition_key(key), rows)
        self.open[key] = f
        f.write(rows)
        if f.nbytes >= self.target:
            self.out.append(self.open.pop(key).close(self))

    def _partition_key(self, key: int) -> Any:
        from pyiceberg.partitioning import PartitionFieldValue, PartitionKey

        topic_field, day_field = self.spec.fields
        names = {v: k for k, v in self.topics.items()}
        topic, day = divmod(key - _NO_DAY, _TOPIC_STRIDE)
        day += _NO_DAY
        return PartitionKey(field_values=[PartitionFieldValue(topic_field, names[topic]),
                                          PartitionFieldValue(day_field, None if day == _NO_DAY else day)],
                            partition_spec=self.spec, schema=self.schema)  # fmt: skip

    def flush(self) -> None:
        while self.open:
            self.out.append(self.open.pop(next(iter(self.open))).close(self))

    def abort(self) -> list[str]:
        """Stop every open file; the paths of all files written (to remove)."""
        paths = [f.file_path for f in self.out]
        for f in self.open.values():
            f.abort()
            paths.append(f.path)
        self.open.clear()
        return paths


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
        for path in files.abort():
            try:
                io.delete(path)
            except Exception:  # noqa: BLE001,S112 - left for the orphan cleanup
                continue
        raise
    out.data_files = files.out
    return out


def _scan(reader: Any, part: Any, out: TaskOutput) -> Iterator[Any]:
    from kafkalog.spark.datasource import scan_segment
    from kafkalog.spark.scan import ScanMetrics

    m = ScanMetrics(part.item.path)
    for batch in scan_segment(reader, part, m):
        if batch.num_rows:
            yield batch
    if m.skipped_regions or m.skipped_batches:
        out.skipped.append({"segment": part.item.path, "lost_offsets": lost_offsets(m.lost_offsets, part),
                            "position": m.first_skipped_position, "regions": m.skipped_regions,
                            "bytes": m.skipped_bytes, "batches": m.skipped_batches,
                            "error": m.first_skipped_error})  # fmt: skip


def lost_offsets(lost: list, part: Any) -> list[list[int]]:
    """The scan's lost offset ranges (``[first, last]``, as ``recover --salvage --dry-run`` names them) within
    what the sync read: [the part's lowest offset, the lower of its upper bound and the next segment's base); an
    open end (no kept batch after the last bad region) is that upper end, so every range is known."""
    lo = max(part.bounds.offset_lo, part.item.base_offset)
    hi = min(part.bounds.offset_hi, part.next_base_offset - 1)
    out: list[list[int]] = []
    for first, last in lost:
        a = lo if first is None else max(int(first), lo)
        b = hi if last is None else min(int(last), hi)
        if a <= b:
            out.append([a, b])
    return out


def remove_files(io: Any, data_files: Iterable[Any]) -> None:
    """Delete written data files that will not be committed (best effort: what remains is an orphan)."""
    for f in data_files:
        try:
            io.delete(f.file_path)
        except Exception:  # noqa: BLE001,S112 - left for the orphan cleanup
            continue

"""One Parquet file of an export task (:mod:`kafkalog.spark.export`) and the choices made per file: the
row-group size, which columns are dictionary-encoded, each column's codec, and ``timestamp``'s Parquet type.

Shared with the Iceberg writer (:mod:`kafkalog.iceberg.write`), which writes its data files the same way.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DICTIONARY_COLUMNS",
    "ExportedFile",
    "ROW_GROUP_ROWS",
    "ParquetFileWriter",
    "as_timestamp_batch",
    "column_codecs",
]


@dataclass(frozen=True)
class ExportedFile:
    """One Parquet file of an export: its path or URL, records and bytes."""

    path: str
    rows: int
    bytes: int


#: records buffered before one Parquet row group is written (Spark's readers split work by row group)
ROW_GROUP_ROWS = 1 << 17

#: columns Parquet dictionary-encodes: the ones that repeat within a file. Offsets, timestamps, keys and values
#: are mostly distinct, and a dictionary tried on them first (pyarrow's default) only slows Spark's reads.
DICTIONARY_COLUMNS = ("topic", "timestamp_type")
#: codecs that give way to no compression on a key or value column whose bytes do not shrink (see :func:`column_codecs`)
FAST_CODECS = ("snappy", "lz4")


def column_codecs(batch, compression: str) -> dict[str, str] | str:
    """The codec of each Parquet column of a file whose first batch is ``batch``: ``compression``, except that
    with a fast codec a key or value column whose bytes in this batch do not shrink by a tenth under snappy
    (random or already compressed payloads) is stored uncompressed: the file is no bigger and Spark reads such
    pages faster."""
    if compression.lower() not in FAST_CODECS:
        return compression
    import cramjam

    codecs = {path: compression for path in _leaf_paths(batch.schema)}
    for name in ("key", "value"):
        if name in batch.schema.names:
            data = batch.column(name).buffers()[2]
            sample = b"" if data is None else memoryview(data)[: 256 << 10]
            if len(sample) >= 4096 and len(cramjam.snappy.compress_raw(sample)) > 0.9 * len(sample):
                codecs[name] = "none"
    return codecs


def _leaf_paths(schema) -> list[str]:
    """Parquet's column paths of an Arrow schema (a list is ``name.list.element``, a struct's field
    ``name.field``): a codec map must name every leaf, or pyarrow writes the unnamed ones uncompressed."""
    import pyarrow as pa

    def walk(prefix: str, t) -> Iterable[str]:
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            yield from walk(f"{prefix}.list.element", t.value_type)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                yield from walk(f"{prefix}.{t.field(i).name}", t.field(i).type)
        else:
            yield prefix

    return [p for f in schema for p in walk(f.name, f.type)]


def as_timestamp_batch(batch):
    """``batch`` with its ``timestamp`` column typed TIMESTAMP(ms, UTC): the same int64 milliseconds, no copy."""
    import pyarrow as pa

    i = batch.schema.get_field_index("timestamp")
    if i < 0:
        return batch
    f = batch.schema.field(i).with_type(pa.timestamp("ms", tz="UTC"))
    return pa.RecordBatch.from_arrays([c.view(f.type) if j == i else c for j, c in enumerate(batch.columns)],
                                      schema=batch.schema.set(i, f))  # fmt: skip


class ParquetFileWriter:
    """One Parquet file of one task: batches buffered into row groups. On local disk it is written under a hidden
    temp name and renamed; in an object store straight to its key (an object appears whole when its upload
    completes, and a rename there is a copy: pyarrow's also leaves a directory marker object behind)."""

    def __init__(self, dest: Any, target: str, schema: Any, compression: dict[str, str] | str) -> None:
        import pyarrow.parquet as pq

        self.dest, self.target = dest, target
        head, _, name = target.rpartition(os.sep)
        self.tmp = target if dest.remote else f"{head}{os.sep}.{name}.{uuid.uuid4().hex}.tmp"
        self.sink = dest.open_output(self.tmp)
        self.writer = pq.ParquetWriter(self.sink, schema, compression=compression,
                                       use_dictionary=[n for n in DICTIONARY_COLUMNS if n in schema.names])  # fmt: skip
        self.pending: list = []
        self.pending_rows = 0
        self.rows = 0

    def write(self, batch) -> None:
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending), row_group_size=max(self.pending_rows, 1))
            self.rows += self.pending_rows
            self.pending, self.pending_rows = [], 0

    def close(self) -> ExportedFile:
        self.flush()
        self.writer.close()
        self.sink.close()
        size = self.dest.publish(self.tmp, self.target)
        return ExportedFile(self.target, self.rows, size)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(Exception):
            self.sink.close()
        self.dest.remove(self.tmp)

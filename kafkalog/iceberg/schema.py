"""The table kafkalog writes: its Iceberg schema, partition spec, and the Arrow rows of a decoded chunk.

Columns: ``topic``, ``partition``, ``offset`` (what identifies a record), ``timestamp`` (``timestamptz``: Kafka's
millisecond value exactly, as microseconds; null for a record without one, magic 0), ``timestamp_type``
(``CreateTime``, ``LogAppendTime``, ``NoTimestampType``), ``key``, ``value`` (binary, null kept apart from empty),
``headers`` (list of struct key string, value binary), ``leader_epoch`` and ``producer_id`` (of the record's batch:
which leader wrote it and which producer; -1 when none).

Partitioned by ``identity(topic)`` and ``day(timestamp)``: the two filters nearly every query of a Kafka history
has (which topic, which time range) then prune whole files by partition, and a day keeps files large for the
low-volume topics most clusters have (an hour makes 24 small files a day per topic; a month makes one file too big
to prune by time within it). Offsets need no partition: each data file's min/max ``offset`` and ``partition``
statistics already prune an offset range.
"""

from __future__ import annotations

from typing import Any

from kafkalog.errors import IcebergConfigError

__all__ = ["SCAN_COLUMNS", "arrow_schema", "check_table_schema", "iceberg_schema", "partition_spec", "to_table_rows"]

#: the DataSource columns a sync decodes (:data:`kafkalog.spark.scan.COLUMNS` names), in table order
SCAN_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                "leader_epoch", "producer_id")  # fmt: skip

_CACHE: dict[str, Any] = {}


def iceberg_schema() -> Any:
    """The table's Iceberg schema (field ids fixed, so every sync and every engine agrees)."""
    if "schema" not in _CACHE:
        from pyiceberg.schema import Schema
        from pyiceberg.types import (
            BinaryType,
            IntegerType,
            ListType,
            LongType,
            NestedField,
            StringType,
            StructType,
            TimestamptzType,
        )  # fmt: skip

        header = StructType(NestedField(12, "key", StringType(), required=False),
                            NestedField(13, "value", BinaryType(), required=False))  # fmt: skip
        _CACHE["schema"] = Schema(
            NestedField(1, "topic", StringType(), required=True),
            NestedField(2, "partition", IntegerType(), required=True),
            NestedField(3, "offset", LongType(), required=True),
            NestedField(4, "timestamp", TimestamptzType(), required=False),
            NestedField(5, "timestamp_type", StringType(), required=True),
            NestedField(6, "key", BinaryType(), required=False),
            NestedField(7, "value", BinaryType(), required=False),
            NestedField(8, "headers", ListType(11, header, element_required=True), required=False),
            NestedField(9, "leader_epoch", IntegerType(), required=False),
            NestedField(10, "producer_id", LongType(), required=False),
        )
    return _CACHE["schema"]


def partition_spec() -> Any:
    """identity(topic), day(timestamp) (see the module docstring for why)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, IdentityTransform

    return PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "topic"),
                         PartitionField(4, 1001, DayTransform(), "timestamp_day"))  # fmt: skip


def arrow_schema() -> Any:
    """The table's rows as Arrow (what pyiceberg's writer is handed)."""
    if "arrow" not in _CACHE:
        import pyarrow as pa

        def f(fid: int, name: str, typ: Any, nullable: bool = True) -> Any:  # Parquet readers map columns by id
            return pa.field(name, typ, nullable=nullable, metadata={b"PARQUET:field_id": str(fid).encode()})

        header = pa.struct([f(12, "key", pa.string()), f(13, "value", pa.binary())])
        _CACHE["arrow"] = pa.schema([  # the decoder's own types (not pyiceberg's large ones: no cast, no copy)
            f(1, "topic", pa.string(), False), f(2, "partition", pa.int32(), False), f(3, "offset", pa.int64(), False),
            f(4, "timestamp", pa.timestamp("us", tz="UTC")), f(5, "timestamp_type", pa.string(), False),
            f(6, "key", pa.binary()), f(7, "value", pa.binary()),
            f(8, "headers", pa.list_(f(11, "element", header, False))),
            f(9, "leader_epoch", pa.int32()), f(10, "producer_id", pa.int64()),
        ])  # fmt: skip
    return _CACHE["arrow"]


def to_table_rows(batch: Any) -> Any:
    """A decoded chunk (a RecordBatch with :data:`SCAN_COLUMNS` and ``is_control``, timestamps in ms) as the
    table's Arrow rows; control records (transaction markers) are no consumer's records and are dropped. Numpy
    and zero-copy views where the layout is the same (the headers differ in field names only): a chunk's
    conversion is a small part of its decode."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = arrow_schema()
    control = batch.column(len(SCAN_COLUMNS))
    if control.true_count:
        batch = batch.filter(pc.invert(control))
    ts_type = schema.field("timestamp").type
    ms = batch.column(SCAN_COLUMNS.index("timestamp")).to_numpy(zero_copy_only=False)
    missing = ms == -1  # no timestamp (magic 0): null, not 1969
    us = ms * 1000
    ts = pa.array(us, mask=missing if missing.any() else None, type=pa.int64()).view(ts_type)
    cols = []
    for i, name in enumerate(SCAN_COLUMNS):
        col = ts if name == "timestamp" else batch.column(i)
        want = schema.field(name).type
        if col.type != want:
            try:
                col = col.view(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
                col = col.cast(want)
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def check_table_schema(table: Any, name: str) -> None:
    """Refuse a table whose columns are not kafkalog's (another writer's table under the same name): appending
    would mix rows that mean something else, or fail halfway inside pyiceberg."""
    want = {f.field_id: (f.name, str(f.field_type), f.required) for f in iceberg_schema().fields}
    have = {f.field_id: (f.name, str(f.field_type), f.required) for f in table.schema().fields}
    missing = [v[0] for k, v in want.items() if have.get(k) != v]
    if missing:
        raise IcebergConfigError(f"table {name} is not a kafkalog table: its columns differ at "
                                 f"{', '.join(missing)} (kafkalog writes {_describe()})")  # fmt: skip


def _describe() -> str:
    return ", ".join(f"{f.name} {f.field_type}" for f in iceberg_schema().fields)

"""Narrow reads: a user schema of a few columns answers count, max(timestamp) and offset-range queries exactly as
the full schema's projection does, and a scan that emits no key/value/headers never copies record bytes."""

from __future__ import annotations

import pytest

from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = needs_golden

NARROW = "topic string, partition int, offset long, timestamp long"
QUERIES = [
    ("count(*) AS n",),
    ("topic", "partition", "max(timestamp) AS t", "count(*) AS n"),
    ("topic", "partition", "min(offset) AS lo", "max(offset) AS hi"),
]


def _answers(df) -> list:
    out = []
    for exprs in QUERIES:
        grouped = [e for e in exprs if " AS " not in e]
        aggs = [e for e in exprs if " AS " in e]
        q = df.groupBy(*grouped).agg(*[_expr(a) for a in aggs]) if grouped else df.selectExpr(*aggs)
        out.append(sorted(tuple(r) for r in q.collect()))
    return out


def _expr(a: str):
    from pyspark.sql import functions as F

    return F.expr(a)


@pytest.mark.parametrize("options", [{}, {"startingOffsets": "100", "endingOffsets": "300"},
                                     {"isolation": "read_committed"}])  # fmt: skip
def test_narrow_schema_answers_equal_full_projection(spark, options: dict) -> None:
    root = str(GOLDEN / "logdir")
    full = spark.read.format("kafkalog").options(**options).load(root).select("topic", "partition", "offset",
                                                                                  "timestamp")  # fmt: skip
    narrow = spark.read.format("kafkalog").options(**options).schema(NARROW).load(root)
    assert narrow.columns == ["topic", "partition", "offset", "timestamp"]
    want = _answers(full)
    assert want[0][0][0] > 0
    assert _answers(narrow) == want
    rows = sorted(tuple(r) for r in narrow.collect())
    assert rows == sorted(tuple(r) for r in full.collect())


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("topic string, partition long", "kafkalog column 'partition' is int, not bigint"),
        ("topic string, offset long, size long", "kafkalog has no column 'size'"),
        ("timestamp timestamp", "kafkalog column 'timestamp' is bigint, not timestamp"),
    ],
)
def test_narrow_schema_refuses_unknown_or_mistyped_columns(spark, ddl: str, message: str) -> None:
    df = spark.read.format("kafkalog").schema(ddl).load(str(GOLDEN / "logdir" / "golden-none-0"))
    with pytest.raises(Exception, match=message):
        df.count()


@pytest.mark.parametrize(("columns", "views"), [(("topic", "partition", "offset", "timestamp"), True),
                                                (("offset", "value"), False), (("headers",), False),
                                                (("key", "timestamp"), False)])  # fmt: skip
def test_scan_copies_record_bytes_only_when_emitted(monkeypatch, columns: tuple, views: bool) -> None:
    """The decoder is asked for views (no key/value copies) exactly when no emitted column holds record bytes, and
    the emitted batches are the full read's columns either way."""
    import kafkalog.spark.scan as scan
    from kafkalog.archive.discovery import discover_segments

    asked: list[bool] = []
    real = scan.iter_record_columns

    def spy(*args, **kwargs):
        asked.append(kwargs.get("binary_view", False))
        return real(*args, **kwargs)

    item = discover_segments([str(GOLDEN / "logdir" / "golden-none-0")])[0]

    def read(cols: tuple) -> list:
        spec = scan.ScanSpec(item.topic, item.partition, -(1 << 63), -(1 << 63), (1 << 63) - 1, None,
                             columns=cols, schema=scan.arrow_schema().empty_table().select(list(cols)).schema)  # fmt: skip
        m = scan.ScanMetrics(item.path)
        return [b.to_pylist() for b in scan.scan_range(spec, item.path, 0, None, m, label=item.path)]

    want = read(scan.COLUMNS)
    monkeypatch.setattr(scan, "iter_record_columns", spy)
    got = read(columns)
    assert asked and all(a is views for a in asked)
    flat = [{c: r[c] for c in columns} for b in want for r in b]
    assert [r for b in got for r in b] == flat


def test_small_batches_are_joined_before_spark_takes_them() -> None:
    """Tiny segments give a batch each; a task hands Spark runs of them joined (up to half of arrowBatchRows and
    more), in order, and batches that are big enough pass as they are."""
    import pyarrow as pa

    from kafkalog.spark.scan import coalesced

    def batch(lo: int, n: int):
        return pa.RecordBatch.from_pydict({"offset": list(range(lo, lo + n))})

    small = [batch(i * 30, 30) for i in range(10)]  # 300 records in batches of 30
    out = list(coalesced(iter([*small, batch(300, 200), batch(500, 10)]), rows=200))
    assert [b.num_rows for b in out] == [120, 120, 60 + 200, 10]
    assert [x for b in out for x in b.column(0).to_pylist()] == list(range(510))
    big = [batch(0, 150), batch(150, 150)]
    assert [b.num_rows for b in coalesced(iter(big), rows=200)] == [150, 150]

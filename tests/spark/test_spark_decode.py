"""The DataSource option ``decode=metadata|offsets|txn`` on Kafka's golden internal-topic archives: every row's
decoded columns equal what :mod:`kafkalog.metadata` decodes from the same record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from kafkalog.errors import InvalidArgumentError
from kafkalog.metadata import decode_metadata_record
from kafkalog.records import read_batches
from kafkalog.spark.decoded import add_decoded, decode_option, decode_row, split_schema
from tests.conftest import GOLDEN, needs_golden

pytestmark = needs_golden


def _records(part: Path) -> list:
    return [(b, r) for log in sorted(part.glob("*.log")) for b in read_batches(str(log)) for r in b.records()]


def test_decode_row_for_each_topic() -> None:
    meta = _records(GOLDEN / "metadata" / "__cluster_metadata-0")
    rows = [decode_row("metadata", r.key, r.value, b.is_control) for b, r in meta]
    assert all(error is None for *_, error in rows)
    assert rows[0][:2] == ("LEADER_CHANGE", 0)
    first_data = next(i for i, (b, _) in enumerate(meta) if not b.is_control)
    assert json.loads(rows[first_data][2]) == decode_metadata_record(meta[first_data][1].value).data
    offsets = [decode_row("offsets", r.key, r.value, b.is_control)
               for b, r in _records(GOLDEN / "metadata" / "__consumer_offsets-34")]
    assert offsets[1][0] == "OffsetCommit" and json.loads(offsets[1][2])["value"]["offset"] == 42
    assert offsets[7][1] is None and json.loads(offsets[7][2])["value"] is None  # a tombstone
    assert {t for t, *_ in offsets} >= {"COMMIT", "ABORT", "GroupMetadata", "ConsumerGroupMemberMetadata"}
    txns = [decode_row("txn", r.key, r.value, b.is_control)
            for b, r in _records(GOLDEN / "metadata" / "__transaction_state-28")]
    assert json.loads(txns[1][2])["value"]["state"] == "Ongoing"
    # the wrong decoder is a per-row error, never an exception
    wrong = decode_row("metadata", b"\x00\x01k", b"\x00\x03oops", False)
    assert wrong[:3] == (None, None, None) and wrong[3]


def test_option_and_columns_are_checked() -> None:
    assert decode_option(None) is None and decode_option("Offsets") == "offsets"
    with pytest.raises(InvalidArgumentError):
        decode_option("json")
    scan, out = split_schema(StructType([StructField("offset", LongType()), StructField("decoded", StringType())]))
    assert [f.name for f in scan.fields] == ["offset", "key", "value", "is_control"]
    batch = pa.RecordBatch.from_pydict(
        {"offset": [5], "key": [None], "value": [b"\x01\x14\x00\x00"], "is_control": [False]},
        schema=pa.schema([("offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
                          ("is_control", pa.bool_())]))
    got = add_decoded(batch, "metadata", out)
    assert got.schema.names == ["offset", "decoded"] and got.to_pylist() == [{"offset": 5, "decoded": "{}"}]


@pytest.mark.slow
@pytest.mark.spark
def test_datasource_decodes_the_golden_archives(spark, tmp_path: Path) -> None:
    root = tmp_path / "archive"
    for part in ("__cluster_metadata-0", "__consumer_offsets-34", "__transaction_state-28"):
        shutil.copytree(GOLDEN / "metadata" / part, root / part)
    meta = spark.read.format("kafkalog").option("decode", "metadata").load(str(root / "__cluster_metadata-0"))
    rows = meta.orderBy("offset").collect()
    assert len(rows) == 37 and all(r.decode_error is None for r in rows)
    assert [r.decoded_type for r in rows[:2]] == ["LEADER_CHANGE", "FEATURE_LEVEL_RECORD"]
    offsets = (spark.read.format("kafkalog").option("decode", "offsets").schema("offset long, decoded_type string")
               .load(str(root / "__consumer_offsets-34")).orderBy("offset").collect())
    assert [r.decoded_type for r in offsets[:2]] == ["GroupMetadata", "OffsetCommit"]

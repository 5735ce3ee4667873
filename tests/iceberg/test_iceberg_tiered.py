"""Iceberg sync of an Aiven tiered-storage bucket (encrypted, zstd chunks) with ``--rsm-config``: the rows a
consumer gets from the segments Kafka wrote locally before the plugin uploaded them (``kafka-oracle dump``)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from click.testing import CliRunner  # noqa: E402
from kafkalog_cli.main import main  # noqa: E402

from kafkalog.errors import TieredConfigError  # noqa: E402
from kafkalog.iceberg import sync  # noqa: E402
from tests.aiven_writer import AIVEN  # noqa: E402
from tests.iceberg.test_iceberg_sync import open_table  # noqa: E402
from tests.iceberg_expect import consumer_view, stable_end, table_rows  # noqa: E402
from tests.oracle import needs_oracle, run_oracle_json  # noqa: E402

pytestmark = [pytest.mark.skipif(AIVEN is None, reason="golden tiered-aiven set not found"), needs_oracle]

VARIANT = "encrypted-zstd-chunk256"


def _expected() -> tuple[list, int]:
    result = json.loads((AIVEN / "variants" / VARIANT / "RESULT.json").read_text())
    logs = [AIVEN / s["logSegmentData"]["logSegment"] for s in result["segments"]]
    dumps = run_oracle_json("dump", *logs)
    batches = [b for d in (dumps if isinstance(dumps, list) else [dumps]) for b in d["batches"]]
    return consumer_view(batches, "tiered", 0), stable_end(batches)


def test_encrypted_aiven_bucket_syncs_with_rsm_config(tmp_path):
    variant = tmp_path / VARIANT
    shutil.copytree(AIVEN / "variants" / VARIANT, variant)
    want, end = _expected()
    with pytest.raises(TieredConfigError):
        sync([variant / "remote"], "kafka.tiered", warehouse=tmp_path / "wh")
    res = CliRunner().invoke(main, ["iceberg", "sync", str(variant / "remote"), "--table", "kafka.tiered",
                                    "--warehouse", str(tmp_path / "wh"), "--rsm-config",
                                    str(variant / "rsm.properties"), "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output.strip().splitlines()[-1])
    assert table_rows(open_table(tmp_path / "wh", "kafka.tiered")) == want and obj["rows"] == len(want)
    assert obj["next_offsets"] == {"tiered-0": end}

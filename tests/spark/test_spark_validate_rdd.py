"""``run_validation`` on a small local archive checks its segments in an RDD job (no Spark SQL in a cold driver
JVM): the same reports, Parquet and JSON, summary and exit code as the DataFrame job its other path keeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyspark")


def _archive(dst: Path) -> Path:
    """Three golden partition dirs, one with a truncated last segment."""
    for case in ("golden-none-0", "golden-segments-0", "golden-txn-0"):
        shutil.copytree(GOLDEN / "logdir" / case, dst / case)
    log = sorted((dst / "golden-segments-0").glob("*.log"))[-1]
    with open(log, "r+b") as f:
        f.truncate(log.stat().st_size - 5)
    return dst


@needs_golden
def test_the_rdd_job_writes_what_the_dataframe_job_writes(spark, tmp_path: Path, monkeypatch, capsys) -> None:
    import pyarrow.parquet as pq

    import kafkalog.spark.validate as v

    root = _archive(tmp_path / "logdir")
    seen: dict[str, tuple] = {}
    for path, limit in (("dataframe", 0), ("rdd", v.DRIVER_CONTINUITY_MAX_DIRS)):
        monkeypatch.setattr(v, "DRIVER_CONTINUITY_MAX_DIRS", limit)
        if path == "rdd":  # no DataFrame job on this path

            def no_dataframe(*args, **kwargs):
                raise AssertionError("validate_items called")

            monkeypatch.setattr(v, "validate_items", no_dataframe)
        out = tmp_path / path
        code = v.run_validation([str(root)], str(out / "parquet"), json_mode=True)
        summary = json.loads(capsys.readouterr().out)
        assert v.run_validation([str(root)], str(out / "json"), report_format="json") == code
        capsys.readouterr()
        files = {}
        for name in ("segments", "partitions"):
            table = pq.read_table(out / "parquet" / f"{name}.parquet")
            rows = sorted(table.to_pylist(), key=lambda r: r["partition_dir"] + r.get("path", ""))
            lines = sorted((out / "json" / f"{name}.json" / "part-00000.json").read_text().splitlines())
            files[name] = (table.schema, rows, lines)
        seen[path] = (code, {**summary, "out": None}, files, (out / "parquet" / "summary.txt").read_text())
    assert seen["rdd"][0] == 1
    assert seen["rdd"][1] == seen["dataframe"][1]
    for name in ("segments", "partitions"):
        assert seen["rdd"][2][name][0].equals(seen["dataframe"][2][name][0]), name
        assert seen["rdd"][2][name][1:] == seen["dataframe"][2][name][1:], name
    assert sorted(seen["rdd"][3].splitlines()) == sorted(seen["dataframe"][3].splitlines())
    assert {r["status"] for r in seen["rdd"][2]["segments"][1]} == {"ok", "corrupt"}

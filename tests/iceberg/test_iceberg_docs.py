"""docs/iceberg.md's "Opening the table" snippets, run as the file writes them (``<!-- tested: NAME -->`` blocks),
against a synced table: pyiceberg's scan, DuckDB through pyiceberg, Spark reading the snapshot's data files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from kafkalog.iceberg import sync  # noqa: E402
from tests.conftest import GOLDEN, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_sync import expected  # noqa: E402

pytestmark = needs_golden

DOC = Path(__file__).resolve().parents[2] / "docs" / "iceberg.md"


def snippet(name: str) -> str:
    """The fenced python block right after ``<!-- tested: name -->`` in the doc."""
    m = re.search(rf"<!-- tested: {re.escape(name)} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"docs/iceberg.md has no tested snippet {name!r}"
    return m.group(1)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """A warehouse holding kafka.history synced from golden-none-0's log, as the partition dir ``orders-0``
    (topic ``orders``), and golden-gzip-0 as another topic; and the rows a consumer of ``orders`` gets."""
    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(GOLDEN / "logdir" / "golden-none-0", root / "logdir" / "orders-0")
    shutil.copytree(GOLDEN / "logdir" / "golden-gzip-0", root / "logdir" / "golden-gzip-0")
    sync([root / "logdir"], "kafka.history", warehouse=root / "lake")
    want = [("orders", *r[1:]) for r in expected("golden-none-0")]
    return root / "lake", want


def run(names: list[str], lake: Path, **given) -> dict:
    ns = dict(given)
    for name in names:
        exec(snippet(name).replace("/lake", str(lake)), ns)  # noqa: S102 - the doc's own code
    return ns


def test_pyiceberg_snippet(lake):
    wh, want = lake
    ns = run(["pyiceberg"], wh)
    df = ns["df"]
    assert df.num_rows == len(want)
    assert sorted(df.column("offset").to_pylist()) == [r[2] for r in want]
    assert set(df.column("topic").to_pylist()) == {"orders"}


def test_duckdb_snippet(lake):
    pytest.importorskip("duckdb")
    wh, want = lake
    ns = run(["pyiceberg", "duckdb"], wh)
    assert ns["counts"] == [(0, len(want), max(r[2] for r in want))]


def test_spark_snippet(lake, spark):
    wh, want = lake
    ns = run(["pyiceberg", "spark"], wh, spark=spark)
    assert ns["spark_rows"] == len(want)
    assert all(f.startswith("file://") and f.endswith(".parquet") for f in ns["files"])

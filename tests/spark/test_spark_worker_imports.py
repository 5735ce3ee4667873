"""What a validation task imports in a fresh Python worker: the deep record check's decoder only with ``deep``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]

_TASK = """
import pickle, sys
import pyarrow as pa
from kafkalog.archive.discovery import discover_segments
from kafkalog.spark.validate import _check_tasks
run = _check_tasks(True, {}, deep=sys.argv[2] == "deep", plans=[pickle.dumps(discover_segments([sys.argv[1]]))])
rows = sum(b.num_rows for b in run([pa.RecordBatch.from_pydict({"id": [0]})]))
print(rows, "kafkalog.verify.record_check" in sys.modules)
"""


@needs_golden
@pytest.mark.parametrize(("mode", "loaded"), [("shallow", "False"), ("deep", "True")])
def test_validation_task_imports_the_record_check_only_when_deep(mode: str, loaded: str) -> None:
    root = str(GOLDEN / "logdir" / "golden-none-0")
    out = subprocess.run([sys.executable, "-c", _TASK, root, mode], capture_output=True, text=True, check=True,
                         cwd=ROOT)  # fmt: skip
    rows, seen = out.stdout.split()
    assert int(rows) >= 1 and seen == loaded

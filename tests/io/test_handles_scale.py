"""Proof at scale: child processes limited to 256 descriptors run a LogManager whose segments would need tens of
thousands (create + roll, clean and unclean restarts, every partition read to its end, the background checker, a
replica move, retention), with no dir offline and nothing lost; a child that exhausts its descriptors on purpose
gets the typed retriable error, its dir stays online, and the same call succeeds once descriptors are freed.

Size: ``KAFKALOG_HANDLES_PARTITIONS`` (default 120) x ``KAFKALOG_HANDLES_SEGMENTS`` (default 20) segments, each
segment 4 handles (.log, 2 index maps, a txn index) when open: ~9,600 against a limit of 256.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).parents[1] / "reliability" / "handles_child.py"
PARTITIONS = int(os.environ.get("KAFKALOG_HANDLES_PARTITIONS", "120"))
SEGMENTS = int(os.environ.get("KAFKALOG_HANDLES_SEGMENTS", "20"))
NOFILE = 256
RECORDS_PER_SEGMENT = 2


def run(phase: str, root: Path, partitions: int = PARTITIONS, segments: int = SEGMENTS,
        nofile: int = NOFILE) -> dict:
    env = {**os.environ, "KAFKALOG_CHILD_NO_FSYNC": "1"}
    proc = subprocess.run([sys.executable, str(CHILD), phase, str(root), str(partitions), str(segments),
                           str(nofile)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    out = json.loads(lines[-1])
    assert out["offline"] == [] and out["events"] == 0, out
    assert out["fds"] < nofile and out["cache_peak"] <= out["cache_capacity"] + 1, out
    return out


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("handles-scale")
    out = run("create", root)
    assert out["segments"] == PARTITIONS * SEGMENTS
    assert out["max_fds"] < NOFILE
    assert out["evictions"] > 0  # the layout does not fit: the cache had to work
    return root


def test_clean_restart_read_check_move_retention(layout: Path) -> None:
    out = run("clean", layout)
    assert out["records"] == PARTITIONS * SEGMENTS * RECORDS_PER_SEGMENT
    assert out["checked"] == PARTITIONS and out["checker_errors"] == 0
    assert out["move"] == "completed" and out["moved_dir"]
    assert out["after_move"] == SEGMENTS * RECORDS_PER_SEGMENT
    assert out["segments_left"] == PARTITIONS * (SEGMENTS - 3)
    assert out["after_retention"] == PARTITIONS * (SEGMENTS - 3) * RECORDS_PER_SEGMENT


def test_unclean_restart_loses_nothing(layout: Path) -> None:
    run("crash", layout)
    out = run("unclean", layout)
    # after retention every partition starts at 3 segments in; the crash added one record to each
    assert out["records"] == PARTITIONS * ((SEGMENTS - 3) * RECORDS_PER_SEGMENT + 1)
    assert out["ends"] == [SEGMENTS * RECORDS_PER_SEGMENT + 1]


def test_exhausted_descriptors_give_the_typed_error(layout: Path) -> None:
    out = run("exhaust", layout)
    assert out["relieved"] > 0  # the cache gave its handles back and the retry read the partition
    assert out["error"] == {"type": "ResourceExhaustedError", "errno": 24, "retriable": True}
    assert out["offline_during"] == []
    assert out["again"] == out["relieved"]


def test_moving_a_partition_with_more_files_than_descriptors(tmp_path: Path) -> None:
    """The mover copies one source file at a time: a partition of 80 segments (~240 files) moves at a limit of 64."""
    out = run("bigmove", tmp_path, partitions=1, segments=80, nofile=64)
    assert out["files"] > 64
    assert out["move"] == "completed", out["error"]
    assert out["moved_dir"] and out["intact"]

"""Iceberg sync under SIGKILL and concurrent writers: every record exactly once, no file left unreferenced."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from kafkalog.iceberg import sync  # noqa: E402
from kafkalog.iceberg.orphans import referenced_files  # noqa: E402
from tests.conftest import GOLDEN, REPO_ROOT, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_sync import CASES, expected, open_table  # noqa: E402
from tests.iceberg_expect import table_rows  # noqa: E402

pytestmark = needs_golden

_CHILD = """
import sys
from kafkalog.iceberg import sync
sync([sys.argv[1]], "kafka.history", warehouse=sys.argv[2])
"""


def _segments(case: str) -> list[Path]:
    return sorted(f for f in (GOLDEN / "logdir" / case).iterdir() if f.name[:20].isdigit())


def _copy_stage(logdir: Path, stage: int, stages: int) -> None:
    """Each partition's first stage/stages of its segments (all files of a segment: .log, indexes, snapshot)."""
    for case in CASES:
        files = _segments(case)
        bases = sorted({f.name[:20] for f in files if f.suffix == ".log"})
        keep = set(bases[: max(1, -(-len(bases) * stage // stages))])
        (logdir / case).mkdir(parents=True, exist_ok=True)
        for f in files:
            if f.name[:20] in keep and not (logdir / case / f.name).exists():
                shutil.copy2(f, logdir / case / f.name)
        for extra in ("leader-epoch-checkpoint", "partition.metadata"):
            if (GOLDEN / "logdir" / case / extra).exists():
                shutil.copy2(GOLDEN / "logdir" / case / extra, logdir / case / extra)


def _unreferenced(warehouse: Path) -> list[str]:
    table = open_table(warehouse)
    keep = referenced_files(table)
    root = table.location().removeprefix("file://")
    out = []
    for sub in ("data", "metadata"):
        for dirpath, _d, names in os.walk(os.path.join(root, sub)):
            out.extend(os.path.join(dirpath, n) for n in names if os.path.join(dirpath, n) not in keep)
    return out


def test_six_syncs_killed_at_random_moments_then_one_to_the_end(tmp_path):
    """The archive grows between the runs (a broker still writing); each run is SIGKILLed at a random moment,
    some before, some during, some after their commit. The last run, left to finish, leaves every record once
    and removes what the killed runs wrote without committing."""
    rng = random.Random(40)
    logdir, warehouse = tmp_path / "logdir", tmp_path / "wh"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    delays = []
    for stage in range(1, 7):
        _copy_stage(logdir, stage, 7)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(logdir), str(warehouse)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        delay = rng.uniform(0.5, 7.0)
        delays.append(delay)
        try:
            child.wait(delay)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            child.wait()
    _copy_stage(logdir, 7, 7)
    result = sync([logdir], "kafka.history", warehouse=warehouse)
    want = sorted((r for c in CASES for r in expected(c)), key=lambda r: (r[0], r[1], r[2]))
    got = table_rows(open_table(warehouse))
    assert len(got) == len(set(got)), f"duplicates after kills at {delays}"
    assert got == want, f"kills at {delays}"
    assert _unreferenced(warehouse) == []
    assert result.next_offsets["golden-txn-0"] == 207


def test_a_concurrent_commit_makes_the_sync_start_again_not_duplicate(tmp_path, monkeypatch):
    """Another writer commits the same archive while this sync writes (no local lock between them, as with a
    remote catalog): Iceberg refuses this sync's commit, its files are deleted, and the retry finds nothing new."""
    from kafkalog.iceberg import syncer

    monkeypatch.setattr(syncer, "sync_lock", lambda *a: contextlib.nullcontext(False))
    src = [GOLDEN / "logdir" / c for c in CASES]
    real = syncer.write_parts
    state = {"raced": False}

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        if not state["raced"]:
            state["raced"] = True
            other = sync(src, "kafka.history", warehouse=tmp_path / "wh")
            assert other.snapshot_id is not None
        return out

    monkeypatch.setattr(syncer, "write_parts", racing)
    mine = sync(src, "kafka.history", warehouse=tmp_path / "wh")
    assert mine.attempts == 2 and mine.snapshot_id is None and mine.rows == 0
    want = sorted((r for c in CASES for r in expected(c)), key=lambda r: (r[0], r[1], r[2]))
    assert table_rows(open_table(tmp_path / "wh")) == want
    assert _unreferenced(tmp_path / "wh") == []


def test_orphans_of_a_dead_run_are_removed_by_the_next_sync(tmp_path):
    src = GOLDEN / "logdir" / "golden-none-0"
    sync([src], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    root = Path(table.location().removeprefix("file://"))
    orphan = root / "data" / "topic=golden-none" / "00000-0-dead.parquet"
    orphan.write_bytes(b"PAR1 left by a killed sync")
    stale_meta = root / "metadata" / "99999-dead.metadata.json"
    stale_meta.write_text("{}")
    time.sleep(0.01)
    again = sync([src], "kafka.history", warehouse=tmp_path / "wh")
    assert again.orphans_removed == 2 and not orphan.exists() and not stale_meta.exists()
    assert table_rows(open_table(tmp_path / "wh")) == expected("golden-none-0")


def test_a_sync_after_clean_syncs_reads_no_old_manifests(tmp_path, monkeypatch):
    """With no killed run behind it, the orphan check reads only the last commit's files: a sync's cost does not
    grow with the table's history."""
    from kafkalog.iceberg import orphans

    part = tmp_path / "logdir" / "golden-txn-0"
    part.mkdir(parents=True)
    for f in _segments("golden-txn-0"):
        if int(f.name[:20]) < 88:
            shutil.copy2(f, part / f.name)
    sync([part], "kafka.history", warehouse=tmp_path / "wh")
    for f in _segments("golden-txn-0"):
        shutil.copy2(f, part / f.name)
    sync([part], "kafka.history", warehouse=tmp_path / "wh")

    def forbidden(table):
        raise AssertionError("read every manifest of the table")

    monkeypatch.setattr(orphans, "referenced_files", forbidden)
    again = sync([part], "kafka.history", warehouse=tmp_path / "wh")
    assert again.snapshot_id is None and again.orphans_removed == 0


def test_without_the_lock_clean_orphans_removes_only_old_ones(tmp_path, monkeypatch):
    """Where no lock serializes the writers (a remote catalog), a recent unreferenced file may be a running sync's:
    --clean-orphans removes only files older than ORPHAN_MIN_AGE, and without it nothing is removed."""
    from kafkalog.iceberg import syncer
    from kafkalog.iceberg.orphans import ORPHAN_MIN_AGE

    src = GOLDEN / "logdir" / "golden-none-0"
    sync([src], "kafka.history", warehouse=tmp_path / "wh")
    monkeypatch.setattr(syncer, "sync_lock", lambda *a: contextlib.nullcontext(False))
    root = Path(open_table(tmp_path / "wh").location().removeprefix("file://"))
    young, old = root / "data" / "00000-0-young.parquet", root / "data" / "00000-0-old.parquet"
    for f in (young, old):
        f.write_bytes(b"PAR1")
    past = time.time() - ORPHAN_MIN_AGE - 60
    os.utime(old, (past, past))
    assert sync([src], "kafka.history", warehouse=tmp_path / "wh").orphans_removed == 0
    assert young.exists() and old.exists()
    result = sync([src], "kafka.history", warehouse=tmp_path / "wh", clean_orphans_files=True)
    assert result.orphans_removed == 1 and young.exists() and not old.exists()

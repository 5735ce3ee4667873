"""``kafkalog recover``: the dry run prints the loader's plan (real log end, corruption recovery would not read),
``--salvage`` side by side with Kafka's recovery, ``--quarantine-dir`` and its refusals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

from tests.cli.test_cli_commands import recover_objs, tree_hash, writable
from tests.conftest import needs_golden
from tests.log.test_recovery_plan import flip_one_batch

pytestmark = needs_golden


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _flip_one_batch(logdir: Path) -> tuple[Path, dict, dict]:
    """``flip_one_batch`` on the golden-segments-0 of a copied log dir (replaced by the damaged copy)."""
    pdir = logdir / "golden-segments-0"
    shutil.rmtree(pdir)
    _d, manifest, bad, _path = flip_one_batch(pdir)
    return pdir, manifest, bad


def test_dry_run_after_clean_shutdown_shows_the_log_end_and_unseen_corruption(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    pdir, manifest, bad = _flip_one_batch(logdir)
    end = manifest["scenario"]["logEndOffset"]
    before = tree_hash(logdir)
    text = run("recover", "--dry-run", pdir)
    assert text.exit_code == 1  # corruption found, even though Kafka's recovery would cut nothing
    assert f"log end offset {end} -> {end}" in text.stdout
    assert f"from position {bad['position']}" in text.stdout and "--full" in text.stdout and "--salvage" in text.stdout
    (rec,), _summary = recover_objs(run("recover", "--dry-run", "--json", pdir))
    assert (rec["logEndOffsetBefore"], rec["logEndOffsetAfter"]) == (end, end)
    assert rec["lostData"] is False and rec["unseenCorruption"][0]["position"] == bad["position"]
    assert tree_hash(logdir) == before


def test_dry_run_salvage_shows_both_plans(golden_copy, tmp_path: Path) -> None:
    logdir = writable(golden_copy("logdir"))
    pdir, manifest, bad = _flip_one_batch(logdir)
    end = manifest["scenario"]["logEndOffset"]
    before = tree_hash(logdir.parent)
    text = run("recover", "--dry-run", "--salvage", "--quarantine-dir", tmp_path / "q", pdir)
    assert text.exit_code == 1
    assert "Kafka recovery" in text.stdout and "salvage" in text.stdout
    assert f"{end} -> {bad['baseOffset']}" in text.stdout and f"{end} -> {end}" in text.stdout
    (rec,), _summary = recover_objs(run("recover", "--dry-run", "--salvage", "--json", pdir))
    assert rec["mode"] == "salvage" and rec["dryRun"] is True
    assert (rec["logEndOffsetBefore"], rec["logEndOffsetAfter"]) == (end, end)
    assert rec["lostRanges"] == [[bad["baseOffset"], bad["lastOffset"]]]
    assert rec["offsetsLost"] == bad["lastOffset"] - bad["baseOffset"] + 1
    assert rec["kafka"]["logEndOffsetAfter"] == bad["baseOffset"]
    assert rec["kafka"]["lostRanges"] == [[bad["baseOffset"], end - 1]]
    assert len(rec["kafka"]["deletedSegments"]) == len(manifest["segments"]) - 4
    assert rec["quarantine"] == str(logdir) + ".kafkalog-quarantine"
    assert tree_hash(logdir.parent) == before and not (tmp_path / "q").exists()


def test_salvage_quarantines_and_a_second_recovery_changes_nothing(golden_copy, tmp_path: Path) -> None:
    logdir = writable(golden_copy("logdir"))
    pdir, manifest, bad = _flip_one_batch(logdir)
    q = tmp_path / "quarantine"
    result = run("recover", "--salvage", "--quarantine-dir", q, "--json", pdir)
    assert result.exit_code == 1, result.output
    (rec,), _summary = recover_objs(result)
    assert rec["dryRun"] is False and rec["rewritten"] == [f"{manifest['segments'][3]['baseOffset']:020d}.log"]
    qdir = Path(rec["quarantine"])
    assert qdir.parent == q / "golden-segments-0"
    report = json.loads((qdir / rec["reportFile"]).read_text())
    (removed,) = report["ranges"]
    assert (qdir / removed["quarantineFile"]).stat().st_size == bad["sizeInBytes"] == removed["bytes"]
    assert len(list(pdir.glob("*.log"))) == len(manifest["segments"])
    assert run("verify", pdir).exit_code == 0
    settled = tree_hash(pdir)
    again = run("recover", "--full", "--json", pdir)  # Kafka's recovery from offset 0
    assert again.exit_code == 0 and recover_objs(again)[0][0]["lostData"] is False
    assert tree_hash(pdir) == settled


def test_quarantine_dir_refusals(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    pdir = logdir / "golden-none-0"
    before = tree_hash(logdir)
    inside = run("recover", "--salvage", "--quarantine-dir", logdir / "quarantine", pdir)
    assert inside.exit_code == 2 and "inside the log dir" in inside.stderr
    alone = run("recover", "--quarantine-dir", logdir.parent / "q", pdir)
    assert alone.exit_code == 2 and "--salvage" in alone.stderr
    assert tree_hash(logdir) == before

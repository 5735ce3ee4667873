"""Exit codes and warnings an operator relies on (issue 38, item 6): a missing LOGDIR, a dump of nothing Kafka
writes, ``checkpoints show`` of a file of another kind, a negative checkpoint offset, a recovery point set beyond
the log end, a segment missing from a partition never compacted, and usage errors under ``--json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint, write_offset_checkpoint
from tests.cli.test_cli_commands import writable
from tests.conftest import GOLDEN, needs_golden

pytestmark = needs_golden


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    ld = tmp_path / "logdir"
    shutil.copytree(GOLDEN / "logdir", ld)
    return writable(ld)


def test_dirs_assignments_of_a_missing_path_is_exit_2(tmp_path: Path) -> None:
    r = run("dirs", "assignments", tmp_path / "nope")
    assert r.exit_code == 2 and "No such file or directory" in r.stderr
    r = run("dirs", "assignments", "--json", tmp_path / "nope")
    assert r.exit_code == 2 and json.loads(r.stdout.splitlines()[-1])["type"] == "error"


def test_dump_of_only_unknown_files_is_exit_2(tmp_path: Path, log_dir: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert run("dump", other).exit_code == 2
    r = run("dump", "--json", other)
    assert r.exit_code == 2 and json.loads(r.stdout.splitlines()[-1])["type"] == "error"
    # a known file beside it: something was dumped
    assert run("dump", other, log_dir / "meta.properties").exit_code == 0


@pytest.mark.parametrize("name", ["partition.metadata", "00000000000000000181.snapshot"])
def test_checkpoints_show_names_the_command_for_other_files(log_dir: Path, name: str) -> None:
    path = log_dir / "golden-txn-0" / name
    r = run("checkpoints", "show", path)
    assert r.exit_code == 2
    assert "corrupt" not in r.stderr and f"kafkalog dump {path}" in r.stderr


def test_a_negative_checkpoint_offset_is_flagged(log_dir: Path) -> None:
    path = log_dir / "log-start-offset-checkpoint"
    write_offset_checkpoint(path, {**read_offset_checkpoint(path), ("golden-txn", 0): -5})
    r = run("checkpoints", "show", path)
    assert r.exit_code == 1 and "negative offset for golden-txn-0" in r.stderr
    r = run("verify", log_dir)
    assert r.exit_code == 1 and "negative offset" in r.stdout


def test_checkpoints_set_refuses_a_recovery_point_past_the_log_end(log_dir: Path) -> None:
    path = log_dir / "recovery-point-offset-checkpoint"
    before = path.read_bytes()
    r = run("checkpoints", "set", path, "golden-txn", 0, 211)  # the log end offset is 210
    assert r.exit_code == 2 and "beyond the log end offset 210" in r.stderr
    assert path.read_bytes() == before
    assert run("checkpoints", "set", path, "golden-txn", 0, 210).exit_code == 0
    assert run("checkpoints", "set", "--force", path, "golden-txn", 0, 211).exit_code == 0
    assert read_offset_checkpoint(path)[("golden-txn", 0)] == 211


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_a_segment_missing_from_a_partition_never_compacted(log_dir: Path, with_snapshot: bool) -> None:
    pdir = log_dir / "golden-segments-0"
    for suffix in (".log", ".index", ".timeindex", *((".snapshot",) if not with_snapshot else ())):
        (pdir / f"00000000000000000078{suffix}").unlink()
    r = run("verify", pdir)
    assert r.exit_code == 1
    assert "not from compaction" in r.stdout


def test_a_compacted_gap_stays_ok(log_dir: Path) -> None:
    """The same gap in a partition the cleaner has an entry for (and no snapshot inside it) is compaction's."""
    pdir = log_dir / "golden-segments-0"
    for suffix in (".log", ".index", ".timeindex", ".snapshot"):
        (pdir / f"00000000000000000078{suffix}").unlink()
    write_offset_checkpoint(log_dir / "cleaner-offset-checkpoint", {("golden-segments", 0): 200})
    r = run("verify", pdir)
    assert r.exit_code == 0, r.output
    assert "normal after compaction" in r.stdout


@pytest.mark.parametrize("args", [("verify", "--json", "--bogus", "x"), ("dump", "--json"),
                                  ("checkpoints", "set", "--json", "f", "t", "x", "1"),
                                  ("recover", "--json", "--quarantine-dir", "q", ".")])
def test_usage_errors_under_json_print_the_error_object(args: tuple[str, ...]) -> None:
    r = run(*args)
    assert r.exit_code == 2
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["type"] == "error" and doc["exitCode"] == 2 and doc["message"]


def test_spark_export_errors_under_json(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    r = run("spark", "export", "--json", "--out", tmp_path / "out", tmp_path / "nope")
    assert r.exit_code == 2
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc == {"type": "error", "message": f"{tmp_path / 'nope'}: no such file or directory",
                   "path": str(tmp_path / "nope"), "exitCode": 2}


def test_kafkas_own_compaction_output_has_no_missing_segment() -> None:
    """Kafka's cleaner leaves producer snapshots inside the gaps it makes; its cleaner-offset-checkpoint entry
    says the gaps are compaction's."""
    for case in ("compact-updates-none", "compact-updates-zstd", "compact-updates-lz4"):
        r = run("verify", GOLDEN / "compacted" / case / "output")
        assert r.exit_code == 0, r.output
        assert "normal after compaction" in r.stdout

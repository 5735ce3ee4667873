"""``kafkalog clean`` and the cleaner columns of ``dirs describe``: Kafka's result through the CLI, a dry run that
changes nothing, the checkpoint, which partitions of a log dir it takes, refusal while the dir is locked."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.clean_shutdown import write_clean_shutdown
from kafkalog.manager.lock import DirLock
from tests.cleaner_cases import COMPACTED, assert_same_partition, compacted_cases, prepare_case
from tests.conftest import needs_golden

pytestmark = needs_golden
CASES = compacted_cases()


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _case_args(name: str) -> list[str]:
    case = CASES[name]
    args = [a for k, v in case["cleanConfig"].items() for a in ("--config", f"{k}={v}")]
    if "--dedupe-buffer-bytes" in case["cleanArgs"]:
        size = case["cleanArgs"][case["cleanArgs"].index("--dedupe-buffer-bytes") + 1]
        args += ["--config", f"log.cleaner.dedupe.buffer.size={size}"]
    return [*args, "--now-ms", str(case["nowMs"])]


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + str(p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_clean_gives_kafkas_result_and_checkpoint(tmp_path: Path) -> None:
    name = "compact-partial"  # a map too small for one pass: the checkpoint moves to where it stopped
    case = CASES[name]
    part = prepare_case(case, tmp_path)
    write_clean_shutdown(part.parent, 1)  # a broker that shut down cleanly
    result = run("clean", part, *_case_args(name), "--json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    doc = events[0]
    assert doc["partition"] == case["partition"] and doc["cleaned"] is True
    assert doc["endOffset"] == case["endOffset"] == doc["checkpointAfter"]
    assert doc["recordsRemoved"] > 0 and doc["bytesRemoved"] > 0
    assert events[-1]["type"] == "summary" and events[-1]["recordsRemoved"] == doc["recordsRemoved"]
    out = COMPACTED / case["dir"] / "output"
    assert (part.parent / "cleaner-offset-checkpoint").read_bytes() == (out / "cleaner-offset-checkpoint").read_bytes()
    expected = json.loads((COMPACTED / case["dir"] / "clean.json").read_text())
    assert_same_partition(part, out / case["partition"], expected["filesAfter"])
    # the next pass starts where the checkpoint says
    again = run("clean", part, *_case_args(name), "--json")
    assert json.loads(again.output.splitlines()[0])["firstDirtyOffset"] == case["endOffset"]


def test_dry_run_changes_nothing_and_says_what_a_pass_removes(tmp_path: Path) -> None:
    name = "compact-groups-size"
    part = prepare_case(CASES[name], tmp_path / "a")
    before = _tree(part.parent)
    dry = run("clean", part, *_case_args(name), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert _tree(part.parent) == before
    assert "would remove" in dry.output
    real_part = prepare_case(CASES[name], tmp_path / "b")
    real = run("clean", real_part, *_case_args(name), "--json")
    assert real.exit_code == 0, real.output
    dry_doc = json.loads(run("clean", part, *_case_args(name), "--dry-run", "--json").output.splitlines()[0])
    real_doc = json.loads(real.output.splitlines()[0])
    fields = ("endOffset", "recordsRemoved", "bytesRemoved", "segmentsRemoved", "stats", "groups")
    assert [dry_doc[f] for f in fields] == [real_doc[f] for f in fields]
    assert dry_doc["dryRun"] is True and dry_doc["checkpointAfter"] == real_doc["checkpointAfter"]
    assert real_doc["segmentsRemoved"] > 0  # groups of several segments became one
    assert _tree(part.parent) == before


def test_clean_refuses_a_locked_log_dir(tmp_path: Path) -> None:
    name = "compact-updates-none"
    part = prepare_case(CASES[name], tmp_path)
    before = _tree(part)
    lock = DirLock.acquire(str(part.parent))
    try:
        result = CliRunner().invoke(main, ["clean", str(part), *_case_args(name)])
    finally:
        lock.release()
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalog: error: ") and str(part.parent) in lines[0]
    assert _tree(part) == before


def test_a_log_dir_cleans_its_compacted_partitions_only(tmp_path: Path) -> None:
    name = "compact-txn-pass2"  # its input holds a cleaner-offset-checkpoint naming the partition
    part = prepare_case(CASES[name], tmp_path)
    other = part.parent / "plain-0"
    other.mkdir()
    result = run("clean", part.parent, *_case_args(name), "--json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    assert [e["partition"] for e in events if e["type"] == "partition"] == [CASES[name]["partition"]]
    assert events[-1]["skipped"] == 1
    everything = run("clean", part.parent, *_case_args(name), "--all-partitions", "--json")
    assert {json.loads(x).get("partition") for x in everything.output.splitlines()} >= {"plain-0"}


def test_clean_errors_are_one_line(tmp_path: Path) -> None:
    missing = run("clean", tmp_path / "nope-0")
    assert missing.exit_code == 2 and missing.output.strip() == f"kafkalog: error: {tmp_path / 'nope-0'}: " \
        "No such file or directory"
    part = prepare_case(CASES["compact-updates-none"], tmp_path)
    assert run("clean", part, "--config", "cleanup.policy=delete").exit_code == 2
    assert run("clean", part, "--config", "log.cleaner.dedupe.buffer.size=10").exit_code == 2


def test_dirs_describe_shows_dirty_ratio_and_first_dirty_offset(tmp_path: Path) -> None:
    name = "compact-tombstones-pass2"
    part = prepare_case(CASES[name], tmp_path)
    result = run("dirs", "describe", part.parent, "--json")
    assert result.exit_code == 0, result.output
    (p,) = json.loads(result.output)["brokers"][0]["logDirs"][0]["partitions"]
    assert p["firstDirtyOffset"] == CASES[name]["firstDirtyOffset"]
    sizes = {int(n[:20]): os.path.getsize(part / n) for n in os.listdir(part) if n.endswith(".log")}
    active = max(sizes)
    clean = sum(s for b, s in sizes.items() if b < p["firstDirtyOffset"])
    dirty = sum(s for b, s in sizes.items() if p["firstDirtyOffset"] <= b < active)
    assert p["dirtyRatio"] == dirty / (clean + dirty)
    assert "dirtyRatio:" in run("dirs", "describe", part.parent).output


def test_a_dir_whose_recovery_would_cut_data_is_refused_untouched(tmp_path: Path) -> None:
    part = prepare_case(CASES["compact-updates-none"], tmp_path)
    victim = part / "00000000000000000060.log"
    data = bytearray(victim.read_bytes())
    data[200:210] = b"\xff" * 10
    victim.write_bytes(bytes(data))
    before = _tree(part)
    result = CliRunner().invoke(main, ["clean", str(part), *_case_args("compact-updates-none")])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("kafkalog: error:")]
    assert len(errors) == 1 and "kafkalog recover" in errors[0] and errors[0].count(str(part)) == 1
    assert _tree(part) == before  # no recovery, no cleaning
    # after a clean shutdown the load reads nothing, so the cleaner meets the damage: one line, exit 1
    write_clean_shutdown(part.parent, 1)
    damaged = CliRunner().invoke(main, ["clean", str(part), *_case_args("compact-updates-none")])
    assert damaged.exit_code == 1 and "corrupt" in damaged.output
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(part))

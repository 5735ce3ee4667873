"""``kafkalog recover`` as an operator runs it, against Kafka's own recoveries: every golden unclean and loader case
placed in a log dir whose checkpoints and clean-shutdown marker say what Kafka's ``LogLoader`` was given, the topic
config on the command line. The CLI (at its default clock, the partition's newest batch timestamp) and ``Log.open``
with Kafka's load arguments and clock must both give Kafka's recovered files byte for byte, snapshots included.
Kafka's ``generate-loader`` cases (``tests/oracle.py``) are run the same way, through the whole log dir the oracle
wrote; ``--now-ms`` replays Kafka's load at any other clock."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile
from kafkalog.checkpoint.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    write_offset_checkpoint,
)
from kafkalog.log import Log
from kafkalog.log.producer_snapshot import read_producer_snapshot
from kafkalog.log.recovery_plan import EPOCH_CHECKPOINT_REBUILT
from tests.cli.test_cli_commands import tree_hash, writable
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.oracle import needs_oracle, run_oracle

pytestmark = needs_golden


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _cases() -> list[dict]:
    """Every unclean and loader case's result manifest, with where its files are and the clock of Kafka's load."""
    if GOLDEN is None:
        return []
    out = []
    for kind, index in (("unclean", GOLDEN / "SCENARIOS.json"), ("loader", GOLDEN / "loader" / "SCENARIOS.json")):
        doc = json.loads(index.read_text())
        base = GOLDEN / kind if kind == "loader" else GOLDEN
        for entry in doc["unclean"]:
            case = load_manifest(f"{kind}/manifests/{entry['case']}.result.json")
            clock = case.get("loadEnvironment", {}).get("brokerClockMs", doc["brokerClockStartMs"])
            out.append(case | {"_input": base / case["input"], "_recovered": base / case["recovered"],
                               "_clock": clock})
    return out


def _diff(expected: Path, actual: Path, *, ignore: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(files that differ or are missing, files that should not be there). A ``.tmp`` in Kafka's output is not
    expected of ours: Kafka's loader flushes the leader-epoch checkpoint asynchronously
    (``LeaderEpochFileCache.truncateFromEndAsyncFlush``), and the oracle's process can exit while that flush has its
    temp file open; the checkpoint itself is still compared."""
    differ = [f.name for f in sorted(expected.iterdir()) if f.name not in ignore and not f.name.endswith(".tmp")
              and (not (actual / f.name).is_file() or f.read_bytes() != (actual / f.name).read_bytes())]
    extra = sorted(f.name for f in actual.iterdir() if not (expected / f.name).exists() and f.name not in ignore)
    return differ, extra


def _operator_log_dir(case: dict, root: Path) -> Path:
    """The case's partition dir inside a log dir holding the checkpoints (and marker) of Kafka's load arguments."""
    log_dir = root / "logdir"
    log_dir.mkdir(parents=True)
    src: Path = case["_input"]
    pdir = writable(Path(shutil.copytree(src, log_dir / src.name)))
    topic, partition = src.name.rsplit("-", 1)
    args = case["loadArgs"]
    key = (topic, int(partition))
    write_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, {key: args["recoveryPointCheckpoint"]})
    write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, {key: args["logStartOffsetCheckpoint"]})
    if args["hadCleanShutdown"]:
        CleanShutdownFile(log_dir).write(42)
    return pdir


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["case"])
def test_cli_and_log_open_recover_as_kafka(case: dict, tmp_path: Path) -> None:
    cli_pdir = _operator_log_dir(case, tmp_path / "cli")
    config = [f"--config={k}={v}" for k, v in case["topicConfig"].items()]
    result = run("recover", "--json", *config, cli_pdir)
    (rec,) = [o for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "partition"]

    lib_pdir = _operator_log_dir(case, tmp_path / "lib")
    args = case["loadArgs"]
    with Log.open(lib_pdir, case["topicConfig"], recovery_point=args["recoveryPointCheckpoint"],
                  log_start_offset=args["logStartOffsetCheckpoint"], clean_shutdown=args["hadCleanShutdown"],
                  clock=lambda: case["_clock"]) as log:
        lib_end = log.log_end_offset

    # The CLI's default clock: the newest batch timestamp of what the load keeps.
    kept = load_manifest(f"{case['_input'].parent.parent.name}/manifests/{case['case']}.recovered.json")
    assert rec["nowMs"] == max((b["maxTimestamp"] for seg in kept["segments"] for b in seg["log"]["batches"]),
                               default=None)  # None: nothing kept, the wall clock
    # One recovery path: the CLI leaves exactly the files the library's load leaves.
    assert _diff(lib_pdir, cli_pdir) == ([], [])
    assert rec["logEndOffsetAfter"] == lib_end
    if case.get("kafkaException"):
        # Kafka refuses a malformed leader-epoch checkpoint; kafkalog does better: it rebuilds the file from the
        # batches' leader epochs (exactly what Kafka had written before the damage) and loses nothing.
        assert result.exit_code == 0, result.output
        assert {"action": EPOCH_CHECKPOINT_REBUILT, "file": "leader-epoch-checkpoint"} in rec["actions"]
        assert lib_end == case["logEndOffsetBeforeDamage"] and rec["lostData"] is False
        assert (cli_pdir / "leader-epoch-checkpoint").read_text() == case["damage"]["originalContent"]
        assert _diff(case["_recovered"], cli_pdir, ignore=frozenset({"leader-epoch-checkpoint"})) == ([], [])
        return
    kafka = case["kafkaLoadResult"]
    assert lib_end == kafka["nextOffset"]
    lost = lib_end < case["logEndOffsetBeforeDamage"]
    assert rec["lostData"] is lost and result.exit_code == (1 if lost else 0), result.output
    assert _diff(case["_recovered"], cli_pdir) == ([], [])


def test_refused_load_is_one_line_and_changes_nothing(golden_copy) -> None:
    """Where kafkalog refuses as Kafka does (a malformed ``partition.metadata``), the CLI prints one error line,
    exits non-zero and leaves every file of the partition as it was."""
    log_dir = writable(golden_copy("unclean/input/unclean-corrupt-crc-0").parent)
    pdir = log_dir / "unclean-corrupt-crc-0"
    (pdir / "partition.metadata").write_text("version: 0\ntopic_id: not-a-uuid\n")
    before = tree_hash(pdir)
    result = run("recover", pdir)
    assert result.exit_code != 0
    assert len(result.stderr.splitlines()) == 1 and "partition.metadata" in result.stderr
    assert tree_hash(pdir) == before


@needs_oracle
def test_cli_recovers_kafka_generated_loader_cases_as_kafka(tmp_path: Path) -> None:
    """Kafka's ``generate-loader`` writes a log dir of damaged partitions (with its recovery-point checkpoint) and
    what its LogLoader made of each; ``kafkalog recover`` of that log dir gives the same files."""
    gen = tmp_path / "gen"
    run_oracle("generate-loader", gen)
    doc = json.loads((gen / "SCENARIOS.json").read_text())
    configs = {json.dumps(c["topicConfig"], sort_keys=True) for c in doc["unclean"]}
    assert len(configs) == 1  # one log dir, one --config set
    config = [f"--config={k}={v}" for k, v in doc["unclean"][0]["topicConfig"].items()]
    result = run("recover", "--json", *config, gen / "input")
    recs = {Path(o["path"]).name: o for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "partition"}
    assert len(recs) == len(doc["unclean"]) >= 7
    for case in doc["unclean"]:
        name = Path(case["input"]).name
        assert _diff(gen / case["recovered"], gen / case["input"]) == ([], []), case["case"]
        assert recs[name]["logEndOffsetAfter"] == case["kafkaLoadResult"]["logEndOffset"], case["case"]


@needs_oracle
def test_now_ms_is_kafkas_clock(tmp_path: Path) -> None:
    """``--now-ms`` runs the load at that clock, as Kafka's own load at it: a year after the data, producers idle
    past ``producer.id.expiration.ms`` are dropped at load and producer 2000 comes back from the replayed batches
    without its coordinator epoch (-1 where the golden recovery, made right after the writes, kept 8)."""
    (case,) = [c for c in _cases() if c["case"] == "unclean-corrupt-crc"]
    pdir = _operator_log_dir(case, tmp_path / "cli")
    kafka_dir = tmp_path / "kafka"
    shutil.copytree(pdir.parent, kafka_dir)
    config = [a for k, v in case["topicConfig"].items() for a in ("--config", f"{k}={v}")]
    later = str(case["_clock"] + 365 * 86_400_000)
    assert run("recover", "--now-ms", later, *config, pdir).exit_code == 1
    run_oracle("load", kafka_dir, "--in-place", "--clock-ms", later, *config)
    assert _diff(kafka_dir / pdir.name, pdir) == ([], [])
    assert _diff(case["_recovered"], pdir) == (["00000000000000000199.snapshot"], [])
    epochs = {e.producer_id: e.coordinator_epoch for e in read_producer_snapshot(pdir / "00000000000000000199.snapshot")}
    golden = read_producer_snapshot(case["_recovered"] / "00000000000000000199.snapshot")
    assert epochs[2000] == -1 and {e.producer_id: e.coordinator_epoch for e in golden}[2000] == 8


def test_recover_json_ends_with_a_summary(tmp_path: Path) -> None:
    """``recover --json`` closes with one summary object adding up the partitions (the dry run predicts it); the
    text output closes with the same totals in one line."""
    cases = {c["case"]: c for c in _cases()}
    crc, tail = cases["unclean-corrupt-crc"], cases["unclean-truncated-tail"]
    pdir = _operator_log_dir(crc, tmp_path)
    log_dir = pdir.parent
    shutil.copytree(tail["_input"], log_dir / tail["_input"].name)
    writable(log_dir)
    write_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, {
        ("unclean-corrupt-crc", 0): crc["loadArgs"]["recoveryPointCheckpoint"],
        ("unclean-truncated-tail", 0): tail["loadArgs"]["recoveryPointCheckpoint"],
    })
    # Bytes Kafka cuts: from its recovered position to the end of the damaged file.
    cut = {c["case"]: (c["_input"] / f"{c['kafkaLoadResult']['nextOffsetSegmentBase']:020d}.log").stat().st_size
           - c["kafkaLoadResult"]["nextOffsetPosition"] for c in (crc, tail)}
    config = [f"--config={k}={v}" for k, v in crc["topicConfig"].items()]
    dry = run("recover", "--dry-run", "--json", *config, log_dir)
    result = run("recover", "--json", *config, log_dir)
    again = run("recover", "--json", *config, log_dir)
    summaries = []
    for r in (dry, result, again):
        out = [json.loads(line) for line in r.stdout.splitlines()]
        assert [o["type"] for o in out] == ["partition", "partition", "summary"]
        assert out[-1]["filesChanged"] == sum(len(o["changedFiles"]) for o in out[:-1])
        summaries.append({k: v for k, v in out[-1].items() if k != "filesChanged"})
    want = {
        "type": "summary", "dryRun": True, "mode": "kafka", "partitions": 2, "recovered": 2, "skippedCleanShutdown": 0,
        "changed": 2, "withDataLost": 2, "truncatedBytes": sum(cut.values()), "deletedSegments": 0, "deletedBytes": 0,
        "salvagedRanges": 0, "bytesRemoved": sum(cut.values()),
        # corrupt-crc loses its readable batches 199-203; truncated-tail only a torn batch with no readable offset.
        "offsetsLost": crc["logEndOffsetBeforeDamage"] - crc["kafkaLoadResult"]["nextOffset"],
        "unseenCorruption": 0, "checkpointsClamped": 0, "errors": 0, "refusedDirs": 0, "exitCode": 1, "ok": False,
    }
    assert summaries[0] == want
    assert summaries[1] == want | {"dryRun": False}
    assert summaries[2] | {"recovered": 2} == want | {
        "dryRun": False, "changed": 0, "withDataLost": 0, "truncatedBytes": 0, "bytesRemoved": 0, "offsetsLost": 0,
        "exitCode": 0, "ok": True,
    }
    assert (dry.exit_code, result.exit_code, again.exit_code) == (1, 1, 0)
    text = run("recover", "--dry-run", *config, log_dir).stdout.splitlines()[-1]
    assert text.startswith("Summary: 2 partitions, 2 recovered, 0 skipped (clean shutdown); 0 would be changed")


def test_recover_salvage_summary(tmp_path: Path) -> None:
    (crc,) = [c for c in _cases() if c["case"] == "unclean-corrupt-crc"]
    pdir = _operator_log_dir(crc, tmp_path)
    out = [json.loads(line) for line in
           run("recover", "--json", "--dry-run", "--salvage", pdir).stdout.splitlines()]
    (rec,) = [o for o in out if o["type"] == "partition"]
    summary = out[-1]
    assert summary["type"] == "summary" and summary["mode"] == "salvage" and summary["dryRun"] is True
    assert summary["salvagedRanges"] == len(rec["ranges"]) >= 1
    assert summary["bytesRemoved"] == sum(r["bytes"] for r in rec["ranges"])
    assert summary["offsetsLost"] == rec["offsetsLost"] and summary["truncatedBytes"] == 0


def test_log_dir_without_partitions_is_not_ok(tmp_path: Path) -> None:
    """A log dir with its checkpoints but no partition dir: nothing recovered is an error (exit 2), not a summary
    saying nothing was lost."""
    write_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT, {})
    text = run("recover", tmp_path)
    assert text.exit_code == 2
    assert text.stderr.splitlines() == [f"kafkalog: error: {tmp_path}: a log dir without partition dirs: nothing to recover"]
    js = run("recover", "--json", tmp_path)
    assert js.exit_code == 2
    assert [json.loads(line)["type"] for line in js.stdout.splitlines()] == ["error"]

"""recover, checkpoints, txn report, dirs describe, demo, spark validate, the group's error funnel, and real
subprocesses of the installed ``kafkalog`` script."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import classify, main

from tests.conftest import load_manifest, needs_golden

pytestmark = needs_golden


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def writable(root: Path) -> Path:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    return root


def tree_hash(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def recover_objs(result) -> tuple[list[dict], dict]:
    """``recover --json``'s partition objects and its closing summary (always the last object)."""
    out = objs(result)
    assert out and out[-1]["type"] == "summary", result.output
    assert all(o["type"] == "partition" for o in out[:-1])
    return out[:-1], out[-1]


# --- recover ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["unclean-truncated-tail", "unclean-corrupt-crc", "unclean-missing-index"])
def test_recover_dry_run_changes_nothing_and_predicts_kafka(golden_copy, case: str) -> None:
    root = writable(golden_copy(f"unclean/input/{case}-0").parent)
    pdir = root / f"{case}-0"
    result_info = load_manifest(f"unclean/manifests/{case}.result.json")
    before = tree_hash(root)
    result = run("recover", "--dry-run", "--json", pdir)
    assert tree_hash(root) == before
    (rec,), summary = recover_objs(result)
    assert rec["dryRun"] is True
    assert (summary["dryRun"], summary["partitions"], summary["exitCode"]) == (True, 1, result.exit_code)
    assert rec["logEndOffsetAfter"] == result_info["kafkaLoadResult"]["nextOffset"]
    lost = bool(rec["truncations"] or rec["deletedSegments"])
    assert result.exit_code == (1 if lost else 0)
    if case == "unclean-truncated-tail":
        (t,) = rec["truncations"]
        assert t["segment"] == result_info["damage"]["truncated"]
        assert t["position"] == result_info["kafkaLoadResult"]["nextOffsetPosition"]
        assert t["bytes"] == result_info["damage"]["to"] - t["position"]


@pytest.mark.parametrize("case", ["unclean-truncated-tail", "unclean-corrupt-crc", "unclean-missing-index"])
def test_recover_matches_kafka_recovered_logs(golden_copy, case: str) -> None:
    pdir = writable(golden_copy(f"unclean/input/{case}-0"))
    cfg = load_manifest(f"unclean/manifests/{case}.result.json")["topicConfig"]
    args = [f"--config={k}={v}" for k, v in cfg.items()]
    result = run("recover", *args, pdir)
    assert result.exit_code in (0, 1), result.output
    recovered = load_manifest(f"unclean/manifests/{case}.recovered.json")
    want = {f["name"]: f["sha256"] for f in recovered["files"] if f["name"].endswith(".log")}
    got = {n: hashlib.sha256((pdir / n).read_bytes()).hexdigest() for n in os.listdir(pdir) if n.endswith(".log")}
    assert got == want
    # Afterwards the partition verifies clean and a second recovery finds nothing to cut.
    assert run("verify", "--no-index-check", pdir).exit_code == 0
    again = run("recover", "--json", pdir)
    assert again.exit_code == 0 and recover_objs(again)[0][0]["truncations"] == []


def test_recover_refuses_while_locked(golden_copy) -> None:
    from kafkalog.manager.lock import DirLock

    logdir = writable(golden_copy("logdir"))
    lock = DirLock.acquire(str(logdir))
    try:
        result = run("recover", logdir / "golden-none-0")
        assert result.exit_code == 2
        assert len(result.stderr.splitlines()) == 1 and "in use" in result.stderr
        dry = run("recover", "--dry-run", logdir)
        assert dry.exit_code == 2
    finally:
        lock.release()


def test_recover_log_dir_clean_shutdown_is_noop(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    before = tree_hash(logdir)
    result = run("recover", "--dry-run", "--json", logdir)
    assert result.exit_code == 0
    recs, summary = recover_objs(result)
    assert all(o["cleanShutdown"] and not o["lostData"] for o in recs)
    assert (summary["partitions"], summary["skippedCleanShutdown"], summary["recovered"]) == (12, 12, 0)
    assert tree_hash(logdir) == before
    full = run("recover", "--dry-run", "--full", "--json", logdir)
    assert full.exit_code == 0 and len(recover_objs(full)[0]) == 12
    assert tree_hash(logdir) == before


def test_recover_clamps_checkpoints(golden_copy, tmp_path: Path) -> None:
    logdir = writable(golden_copy("logdir"))
    src = writable(golden_copy("unclean/input/unclean-corrupt-crc-0"))
    shutil.move(str(src), logdir / "unclean-corrupt-crc-0")
    (logdir / ".kafka_cleanshutdown").unlink()
    cp = logdir / "recovery-point-offset-checkpoint"
    cp.write_text(cp.read_text().replace("0\n15\n", "0\n16\n") + "unclean-corrupt-crc 0 204\n")
    result = run("recover", "--json", logdir)
    assert result.exit_code == 1
    recs, summary = recover_objs(result)
    (rec,) = [o for o in recs if o["path"].endswith("unclean-corrupt-crc-0")]
    assert summary["checkpointsClamped"] == len(rec["checkpoints"]) >= 1
    assert rec["logEndOffsetAfter"] == 199
    assert {"file": "recovery-point-offset-checkpoint", "partition": "unclean-corrupt-crc-0", "before": 204,
            "after": 199} in rec["checkpoints"]  # fmt: skip
    assert "unclean-corrupt-crc 0 199" in cp.read_text()


def test_recover_bad_paths(tmp_path: Path) -> None:
    missing = run("recover", tmp_path / "nope")
    assert missing.exit_code == 2 and missing.stderr.splitlines() == [
        f"kafkalog: error: {tmp_path / 'nope'}: No such file or directory"
    ]
    (tmp_path / "f").write_text("x")
    assert run("recover", tmp_path / "f").exit_code == 2
    assert run("recover", tmp_path).exit_code == 2


# --- checkpoints ------------------------------------------------------------------------------------------------


def test_checkpoints_show_and_set(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    cp = logdir / "recovery-point-offset-checkpoint"
    root = load_manifest("manifests/_logdir-root.json")
    shown = run("checkpoints", "show", "--json", cp)
    got = {f"{o['topic']}-{o['partition']}": o["offset"] for o in objs(shown)}
    assert got == root["recovery-point-offset-checkpoint"]["offsets"]
    text = run("checkpoints", "show", cp).stdout.splitlines()
    assert "topic: golden-none partition: 0 offset: 146" in text
    result = run("checkpoints", "set", cp, "golden-none", "0", "100")
    assert result.exit_code == 0
    assert result.stdout.strip() == "recovery-point-offset-checkpoint: golden-none-0 146 -> 100"
    lines = cp.read_text().splitlines()
    original = root["recovery-point-offset-checkpoint"]["text"].splitlines()
    assert lines == [line if line != "golden-none 0 146" else "golden-none 0 100" for line in original]
    assert not (logdir / "recovery-point-offset-checkpoint.tmp").exists()
    added = run("checkpoints", "set", "--json", cp, "new-topic", "3", "7")
    assert objs(added) == [{"type": "checkpoint_set", "file": "recovery-point-offset-checkpoint",
                            "topic": "new-topic", "partition": 3, "before": None, "after": 7}]  # fmt: skip
    assert cp.read_text().splitlines()[:2] == ["0", "16"]
    epochs = run("checkpoints", "show", "--json", logdir / "golden-txn-0" / "leader-epoch-checkpoint")
    assert [{"epoch": o["epoch"], "startOffset": o["startOffset"]} for o in objs(epochs)] == load_manifest(
        "manifests/golden-txn-0.json"
    )["leaderEpochCheckpoint"]["entries"]


def test_checkpoints_set_refusals(golden_copy, tmp_path: Path) -> None:
    from kafkalog.manager.lock import DirLock

    logdir = writable(golden_copy("logdir"))
    cp = logdir / "recovery-point-offset-checkpoint"
    before = cp.read_bytes()
    assert run("checkpoints", "set", cp, "bad/topic", "0", "1").exit_code == 2
    assert run("checkpoints", "set", cp, "t", "0", "-1").exit_code == 2
    assert run("checkpoints", "set", logdir / "meta.properties", "t", "0", "1").exit_code == 2
    lock = DirLock.acquire(str(logdir))
    try:
        locked = run("checkpoints", "set", cp, "golden-none", "0", "1")
        assert locked.exit_code == 2 and "in use" in locked.stderr
    finally:
        lock.release()
    assert cp.read_bytes() == before
    missing = run("checkpoints", "set", tmp_path / "log-start-offset-checkpoint", "t", "0", "1")
    assert missing.exit_code == 2
    created = run("checkpoints", "set", "--create", tmp_path / "log-start-offset-checkpoint", "t", "0", "1")
    assert created.exit_code == 0
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 1\n"
    bad = tmp_path / "replication-offset-checkpoint"
    bad.write_text("0\n1\n")
    assert run("checkpoints", "show", bad).exit_code == 1
    assert run("checkpoints", "show", tmp_path / "nope").exit_code == 2


# --- txn report -------------------------------------------------------------------------------------------------


def test_txn_report_golden(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-txn-0")
    m = load_manifest("manifests/golden-txn-0.json")
    result = run("txn", "report", "--json", pdir)
    assert result.exit_code == 0, result.output
    (rep,) = objs(result)
    producers = {p["producerId"]: p for p in rep["producers"]}
    assert rep["txnIndexProblems"] == []
    indexed = sorted(
        (e["producerId"], e["firstOffset"], e["lastOffset"]) for s in m["segments"] for e in s["txnIndex"]["entries"]
    )
    reported = sorted((pid, a["firstOffset"], a["lastOffset"]) for pid, p in producers.items() for a in p["aborted"])
    assert reported == indexed
    assert producers[2000]["committed"] > 0 and producers[2000]["aborted"] == []
    assert producers[2003]["open"] is not None and producers[2003]["open"]["firstOffset"] == 207
    assert all(p["open"] is None for pid, p in producers.items() if pid != 2003)
    text = run("txn", "report", pdir).stdout
    assert "producerId: 2003 producerEpoch: 3 committed: 0 aborted: 0 open: firstOffset 207" in text
    hanging = run("txn", "report", "--json", "--transaction-timeout-ms", "0", pdir)
    assert hanging.exit_code == 1


def test_txn_report_missing_index_entry(golden_copy) -> None:
    pdir = writable(golden_copy("logdir/golden-txn-0"))
    (pdir / "00000000000000000044.txnindex").write_bytes(b"")
    result = run("txn", "report", pdir)
    assert result.exit_code == 1
    assert "00000000000000000044.txnindex: no entry" in result.stdout
    assert run("txn", "report", pdir.parent / "nope").exit_code == 2


# --- dirs describe ----------------------------------------------------------------------------------------------


def test_dirs_describe_json_shape(golden_copy, tmp_path: Path) -> None:
    logdir = golden_copy("logdir")
    root = load_manifest("manifests/_logdir-root.json")
    result = run("dirs", "describe", "--json", logdir, tmp_path / "gone")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {tmp_path / 'gone'}: No such file or directory"]
    doc = json.loads(result.stdout)
    brokers = {b["broker"]: b for b in doc["brokers"]}
    assert set(brokers) == {-1, root["meta.properties"]["nodeId"]}
    (d,) = brokers[1]["logDirs"]
    assert d["logDir"] == str(logdir) and d["error"] is None
    assert d["directoryId"] == root["meta.properties"]["directoryId"]
    assert d["totalBytes"] > 0 and d["usableBytes"] >= 0
    parts = {p["partition"]: p for p in d["partitions"]}
    for name, p in parts.items():
        m = load_manifest(f"manifests/{name}.json")
        assert p["size"] == sum(f["size"] for f in m["files"] if f["name"].endswith(".log"))
        assert p["logEndOffset"] == m["scenario"]["logEndOffset"]
        assert p["logStartOffset"] == m["scenario"]["logStartOffset"]
        assert (p["offsetLag"], p["isFuture"]) == (0, False)
    (gone,) = brokers[-1]["logDirs"]
    assert gone["error"] == "KafkaStorageException" and gone["partitions"] == []
    text = run("dirs", "describe", logdir)
    assert text.exit_code == 0
    assert any(line.startswith("  partition: golden-none-0 size: 12155 ") for line in text.stdout.splitlines())


# --- demo, spark, group -----------------------------------------------------------------------------------------


def test_demo_runs_every_step(tmp_path: Path) -> None:
    result = run("demo", "--no-spark", "--dir", tmp_path / "demo")
    assert result.exit_code == 0, result.output
    for step in ("[1]", "[2]", "[3]", "[4]", "[5]"):
        assert step in result.stdout
    assert "(recovery: truncated)" in result.stdout
    assert "offline dirs: data2" in result.stdout
    assert "verify exit code: 0" in result.stdout


def test_spark_validate_delegates(golden_copy, tmp_path: Path, monkeypatch) -> None:
    import kafkalog.spark

    calls = []
    monkeypatch.setattr(
        kafkalog.spark, "run_validation", lambda roots, out, master: calls.append((roots, out, master)) or 1
    )
    pytest.importorskip("pyspark")
    result = run("spark", "validate", "a", "b", "--out", tmp_path, "--master", "local[2]")
    assert result.exit_code == 1
    assert calls == [(["a", "b"], str(tmp_path), "local[2]")]
    timed = []
    monkeypatch.setattr(kafkalog.spark, "run_validation", lambda *a, **kw: timed.append(kw) or 0)
    assert run("spark", "validate", "a", "--out", tmp_path, "--timings", "--json").exit_code == 0
    assert timed == [{"json_mode": True, "timings": True}]


def test_usage_errors_exit_2() -> None:
    assert run("dump").exit_code == 2
    assert run("nosuchcommand").exit_code == 2
    assert run("dump", "--key-decoder", "base64", "x.log").exit_code == 2


def test_classify_maps_library_errors() -> None:
    from kafkalog import errors as E

    assert classify(E.CorruptRecordError("x"))[0] == 1
    assert classify(E.CorruptIndexError("x"))[0] == 1
    assert classify(E.LogDirLockedError("x"))[0] == 2
    assert classify(E.KafkaStorageError("x"))[0] == 2
    assert classify(E.InvalidTopicError("x"))[0] == 2
    assert classify(PermissionError(13, "Permission denied", "/f")) == (2, "/f: Permission denied")
    assert classify(RuntimeError("boom"))[0] == 2


def test_debug_shows_traceback(monkeypatch, tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    plain = run("dump", missing)
    assert "Traceback" not in plain.stderr
    debug = run("--debug", "dump", missing)
    assert debug.exit_code == 2 and "Traceback" in debug.stderr


# --- real subprocesses ------------------------------------------------------------------------------------------


def kafkalog(*args: str) -> subprocess.CompletedProcess:
    """The installed console script of the interpreter running the tests (a venv used without activating it has
    its own beside ``sys.executable``; PATH may hold another install's), else the CLI module."""
    beside = Path(sys.executable).with_name("kafkalog")
    exe = str(beside) if beside.exists() else shutil.which("kafkalog")
    cmd = [exe] if exe else [sys.executable, "-c", "from kafkalog_cli.main import main; main()"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, check=False)


def test_subprocess_dump_and_verify(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-none-0")
    log = pdir / "00000000000000000000.log"
    dumped = kafkalog("dump", "--deep-iteration", log)
    assert dumped.returncode == 0 and dumped.stderr == ""
    assert dumped.stdout.splitlines()[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    verified = kafkalog("verify", "--json", pdir)
    assert verified.returncode == 0
    assert json.loads(verified.stdout.splitlines()[-1])["ok"] is True


def test_subprocess_errors_are_one_line(golden_copy, tmp_path: Path) -> None:
    missing = kafkalog("dump", tmp_path / "nope.log")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [f"kafkalog: error: {tmp_path / 'nope.log'}: No such file or directory"]
    assert kafkalog("verify", tmp_path / "nope").returncode == 2
    bad = writable(golden_copy("unclean/input/unclean-truncated-tail-0"))
    assert kafkalog("verify", bad).returncode == 1
    before = tree_hash(bad)
    assert kafkalog("recover", "--dry-run", bad).returncode == 1
    assert tree_hash(bad) == before
    assert kafkalog("--help").returncode == 0


def test_subprocess_unreadable_paths(tmp_path: Path) -> None:
    """Paths that exist but cannot be read as files (tests run as root, where chmod 000 does not stop reads;
    the permission case itself is covered in test_cli_dump/test_cli_verify by denying open())."""
    fake = tmp_path / "00000000000000000000.log"
    fake.mkdir()
    dumped = kafkalog("dump", fake)
    assert dumped.returncode == 2
    (line,) = dumped.stderr.splitlines()
    assert line.startswith(f"kafkalog: error: {fake}: Is a directory")
    idx = tmp_path / "00000000000000000000.index"
    idx.mkdir()
    result = kafkalog("dump", idx)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["spark", "validate", "ROOT"], ["spark", "export", "ROOT"]])
def test_a_missing_required_path_option_is_a_usage_error_naming_it(tmp_path, args) -> None:
    """A required ``--out PATH`` left out is click's usage error naming the option (exit 2), not an empty
    ``kafkalog: error:`` line: click's MissingParameter is a BadParameter of a Path option with no message yet."""
    from click.testing import CliRunner
    from kafkalog_cli.main import main

    r = CliRunner().invoke(main, [a if a != "ROOT" else str(tmp_path) for a in args])
    assert r.exit_code == 2
    assert "Missing option '--out'" in r.stderr and "kafkalog: error: \n" not in r.stderr

"""Issue 28 item 2: nothing checked is never OK. An empty or non-Kafka dir, a missing or mistyped path and a
partition dir that cannot be read are each an error line naming the path and exit 2, with a summary that says
what was not checked (text and ``--json``); ``spark validate`` of an empty root gets the same "nothing found" from
the library's discovery."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.archive.discovery import discover_segments
from tests.conftest import needs_golden
from tests.unreadable import ELOOP, make_loop

NOTHING = "no Kafka log files found: nothing checked"


def run(*args: str | os.PathLike):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture
def not_kafka(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "README.txt").write_text("not a Kafka file\n")
    return d


@pytest.mark.parametrize("with_file", [False, True], ids=["empty-dir", "non-kafka-dir"])
def test_verify_of_a_dir_with_nothing_to_check_is_exit_2(tmp_path: Path, with_file: bool) -> None:
    d = tmp_path / "d"
    d.mkdir()
    if with_file:
        (d / "README.txt").write_text("hello\n")
    result = run("verify", d)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {d}: {NOTHING}"]
    assert result.stdout.splitlines() == [f"Summary: ERRORS: 1 dirs (error 1); 0 bytes read; not checked (1): {d}"]


def test_verify_json_says_what_was_not_checked(not_kafka: Path) -> None:
    result = run("verify", "--json", not_kafka)
    assert result.exit_code == 2
    error, summary = objs(result)
    assert error == {"type": "error", "message": f"{not_kafka}: {NOTHING}", "path": str(not_kafka), "exitCode": 2}
    assert summary["type"] == "summary" and summary["ok"] is False and summary["exitCode"] == 2
    assert summary["counts"] == {"dir": {"error": 1}} and summary["notChecked"] == [str(not_kafka)]


@needs_golden
def test_verify_of_a_good_partition_and_an_empty_dir_is_still_exit_2(golden_copy, not_kafka: Path) -> None:
    pdir = golden_copy("logdir/golden-gzip-0")
    result = run("verify", "--json", pdir, not_kafka)
    assert result.exit_code == 2
    out = objs(result)
    assert [o["status"] for o in out if o["type"] == "segment"] == ["ok"]
    assert out[-1]["notChecked"] == [str(not_kafka)]


def test_dump_of_a_missing_path_is_an_error_not_an_ignored_file(tmp_path: Path) -> None:
    missing = tmp_path / "golden-none-O"  # a mistyped partition dir
    result = run("dump", missing)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {missing}: No such file or directory"]
    assert "Ignoring unknown file" not in result.output and result.stdout == ""
    as_json = run("dump", "--json", missing)
    assert as_json.exit_code == 2
    assert objs(as_json) == [
        {"type": "error", "message": f"{missing}: No such file or directory", "path": str(missing), "exitCode": 2},
        {"type": "summary", "files": 1, "notDumped": [str(missing)], "exitCode": 2},
    ]


@needs_golden
def test_dump_of_several_files_names_the_ones_not_dumped(golden_copy, tmp_path: Path) -> None:
    log = golden_copy("logdir/golden-gzip-0") / "00000000000000000000.log"
    missing = tmp_path / "00000000000000000099.log"
    result = run("dump", log, missing)
    assert result.exit_code == 2
    assert result.stdout.startswith(f"Dumping {log}\n")
    assert result.stderr.splitlines() == [
        f"kafkalog: error: {missing}: No such file or directory",
        f"kafkalog: not dumped: 1 of 2 file(s): {missing}",
    ]


def test_dump_of_a_non_kafka_dir_says_nothing_was_found(not_kafka: Path) -> None:
    result = run("dump", not_kafka)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {not_kafka}: {NOTHING}"]


# --- a log dir with a partition dir that cannot be read ----------------------------------------------------------
# Tests run as root, where chmod 000 does not deny reads: the dir's listing is refused the way the kernel refuses it
# to any other user (os.scandir raising PermissionError, in process), and a partition dir path that is a symlink
# loop or a dangling symlink fails for root too.


@needs_golden
def test_an_unreadable_partition_dir_is_named_and_fails_the_run(golden_copy, monkeypatch) -> None:
    logdir = golden_copy("logdir")
    denied = os.path.realpath(logdir / "golden-lz4-0")
    real_scandir = os.scandir

    def scandir(path=".", *args, **kwargs):
        if os.fspath(path) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    text = run("-q", "verify", logdir)
    assert text.exit_code == 2
    assert text.stderr.splitlines() == [f"kafkalog: error: {denied}: Permission denied"]
    (summary,) = text.stdout.splitlines()
    assert summary.startswith("Summary: ERRORS: ") and summary.endswith(f"not checked (1): {denied}")
    assert "partitions (error 1, ok 11)" in summary
    result = run("verify", "--json", logdir)
    assert result.exit_code == 2
    out = objs(result)
    assert {"type": "error", "message": f"{denied}: Permission denied", "path": denied, "exitCode": 2} in out
    assert out[-1]["counts"]["partition"] == {"error": 1, "ok": 11} and out[-1]["notChecked"] == [denied]


@needs_golden
@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_partition_dir_symlink_that_does_not_resolve_is_an_io_error(golden_copy, kind: str) -> None:
    logdir = golden_copy("logdir")
    bad = logdir / "orders-7"
    if kind == "loop":
        make_loop(bad)
        reason = ELOOP
    else:
        os.symlink(logdir / "gone-0", bad)
        reason = os.strerror(errno.ENOENT)
    result = run("verify", "--json", logdir)
    assert result.exit_code == 2
    out = objs(result)
    errors = [o for o in out if o["type"] == "error"]
    assert errors == [{"type": "error", "message": f"{bad}: {reason}", "path": str(bad), "exitCode": 2}]
    assert result.stderr.splitlines() == [f"kafkalog: error: {bad}: {reason}"]
    assert out[-1]["notChecked"] == [str(bad)] and out[-1]["counts"]["partition"]["error"] == 1


# --- spark validate: the same "nothing found", from the library ---------------------------------------------------


def test_discovery_refuses_a_root_with_nothing_when_asked(not_kafka: Path) -> None:
    from kafkalog.errors import NothingToCheckError

    assert discover_segments(not_kafka) == []  # listing alone: an empty answer
    with pytest.raises(NothingToCheckError) as info:
        discover_segments(not_kafka, require=True)
    assert str(info.value) == f"{not_kafka}: {NOTHING}" and info.value.path == str(not_kafka)


def test_spark_validate_of_an_empty_root_is_exit_2(not_kafka: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")  # the command needs the spark extra; the refusal comes before any JVM
    result = run("spark", "validate", not_kafka, "--out", tmp_path / "report")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {not_kafka}: {NOTHING}"]
    assert not (tmp_path / "report").exists()
    as_json = run("spark", "validate", "--json", not_kafka, "--out", tmp_path / "report")
    assert as_json.exit_code == 2
    assert objs(as_json) == [{"type": "error", "message": f"{not_kafka}: {NOTHING}", "path": str(not_kafka),
                              "exitCode": 2}]  # fmt: skip


def test_spark_validate_of_a_missing_root_uses_the_common_prefix(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    missing = tmp_path / "nope"
    result = run("spark", "validate", missing, "--out", tmp_path / "report")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {missing}: No such file or directory"]


@needs_golden
def test_txn_report_of_a_dir_whose_segments_cannot_be_named_is_exit_2(golden_copy, tmp_path: Path) -> None:
    """A partition dir whose only .log has a base offset beyond a long (Kafka cannot load it) has nothing to report."""
    src = golden_copy("logdir/golden-txn-0") / "00000000000000000000.log"
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / "99999999999999999999.log").write_bytes(src.read_bytes())
    result = run("txn", "report", pdir)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {pdir}: {NOTHING}"]
    assert "no transactional producers" not in result.stdout

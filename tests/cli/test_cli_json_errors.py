"""Issue 28 item 5: JSON and errors. Every command's errors under ``--json`` are ``{"type": "error", ...}`` objects
on stdout (the one funnel, as ``verify --json``); ``dump --json`` batches carry stable ``timestamp`` and
``timestampType`` keys; ``demo`` takes ``--json``; and every error is one line, ``kafkalog: error: PATH: reason``:
a refused path argument, a non-ASCII or out-of-range segment name, an unreadable ``.log`` that several of a dir's
files need."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog import errors as E
from kafkalog.archive.discovery import discover_segments
from kafkalog.names import base_offset_prefix
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.unreadable import ELOOP, deny_open, make_loop


def run(*args: str | os.PathLike):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize(
    "command",
    [["dump", "--json"], ["txn", "report", "--json"], ["checkpoints", "show", "--json"], ["recover", "--json"]],
    ids=lambda c: " ".join(c[:-1]),
)
def test_errors_under_json_are_error_objects_on_stdout(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nope"
    result = run(*command, missing)
    assert result.exit_code == 2
    message = f"{missing}: No such file or directory"
    error = {"type": "error", "message": message, "path": str(missing), "exitCode": 2}
    assert objs(result)[0] == error
    assert result.stderr.splitlines() == [f"kafkalog: error: {message}"]


def test_a_refused_checkpoint_edit_is_an_error_object(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    result = run("checkpoints", "set", "--json", target, "t", "0", "5")
    assert result.exit_code == 2
    (error,) = objs(result)
    assert error["type"] == "error" and error["path"] == str(target) and error["exitCode"] == 2
    assert error["message"].startswith(f"{target}: not an offset checkpoint file")


@needs_golden
@pytest.mark.parametrize(("case", "kind"), [("golden-none-0", "CreateTime"), ("golden-logappendtime-0", "LogAppendTime")])
def test_dump_json_batches_have_stable_timestamp_keys(golden_copy, case: str, kind: str) -> None:
    log = golden_copy(f"logdir/{case}") / "00000000000000000000.log"
    want = load_manifest(f"manifests/{case}.json")["segments"][0]["log"]["batches"]
    batches = [o for o in objs(run("dump", "--json", log)) if o["type"] == "batch"]
    assert len(batches) == len(want)
    for got, ref in zip(batches, want, strict=True):
        assert got["timestampType"] == kind
        assert got["timestamp"] == ref["maxTimestamp"]
        assert got[kind] == got["timestamp"]  # the Kafka-named key api.md lists stays


def test_demo_takes_json(tmp_path: Path) -> None:
    result = run("demo", "--json", "--no-spark", "--dir", tmp_path / "demo")
    assert result.exit_code == 0, result.output
    out = objs(result)
    assert [o["step"] for o in out if o["type"] == "step"] == [1, 2, 3, 4, 5]
    assert any(o["type"] == "info" and o["message"] == "verify exit code: 0" for o in out)
    assert out[-1] == {"type": "summary", "ok": True, "exitCode": 0, "verifyExitCode": 0, "sparkExitCode": None,
                       "dir": str(tmp_path / "demo")}  # fmt: skip


@needs_golden
def test_a_refused_path_argument_is_one_line(tmp_path: Path) -> None:
    assert GOLDEN is not None
    result = run("dirs", "assignments", GOLDEN / "logdir", "--expected", tmp_path)
    assert result.exit_code == 2
    assert result.output.splitlines() == [f"kafkalog: error: {tmp_path}: is a directory"]


def test_an_unreadable_expected_file_is_the_os_reason(tmp_path: Path) -> None:
    missing = tmp_path / "expected.json"
    result = run("dirs", "assignments", tmp_path, "--expected", missing)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"kafkalog: error: {missing}: No such file or directory"


@needs_golden
@pytest.mark.parametrize("name", ["0000000000000000000é.log", "0000000000000000000é.index"])
def test_a_non_ascii_segment_name_is_not_an_internal_error(golden_copy, name: str) -> None:
    src = golden_copy("logdir/golden-none-0") / ("00000000000000000000" + Path(name).suffix)
    odd = src.with_name(name)
    shutil.copyfile(src, odd)
    result = run("dump", odd)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {odd}: a segment file name must start with its base offset"]
    assert "internal error" not in result.output
    if odd.suffix == ".log":
        checked = run("verify", odd)
        assert checked.exit_code == 2 and "CORRUPT" not in checked.stdout
        assert checked.stderr.splitlines() == [f"kafkalog: error: {odd}: not a segment file (<20-digit offset>.log)"]


@needs_golden
@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex"])
def test_a_20_digit_name_beyond_a_long_names_the_file(golden_copy, suffix: str) -> None:
    pdir = golden_copy("logdir/golden-none-0")
    for s in (".log", ".index", ".timeindex"):
        shutil.copyfile(pdir / f"00000000000000000000{s}", pdir / f"99999999999999999999{s}")
    path = pdir / f"99999999999999999999{suffix}"
    result = run("dump", path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"kafkalog: error: {path}: base offset 99999999999999999999 is not in [0, 2^63-1]"
    ]
    if suffix == ".log":
        checked = run("verify", path)
        assert checked.exit_code == 2 and "CORRUPT" not in checked.stdout
        assert checked.stderr.splitlines() == [
            f"kafkalog: error: {os.path.realpath(path)}: base offset 99999999999999999999 in the file name is not in"
            " [0, 2^63-1]"
        ]


@needs_golden
def test_dump_of_a_dir_reports_an_unreadable_log_once(golden_copy, monkeypatch) -> None:
    """The .log, its .index and its .timeindex all need the .log: one error line, not three. Tests run as root,
    where chmod 000 does not deny reads: the open is refused in process, as the kernel refuses it to a user."""
    pdir = golden_copy("logdir/golden-none-0")
    log = pdir / "00000000000000000000.log"
    deny_open(monkeypatch, log)
    result = run("dump", pdir)
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if "Permission denied" in line] == [
        f"kafkalog: error: {log}: Permission denied"
    ]
    assert f"Dumping {pdir / '00000000000000000000.index'}" in result.stdout  # the entries are still printed
    assert "offset: " in result.stdout


@needs_golden
def test_dump_of_a_dir_whose_log_is_a_symlink_loop_gives_the_real_reason_once(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-none-0")
    log = make_loop(pdir / "00000000000000000000.log")
    result = run("dump", pdir)
    assert result.exit_code == 2
    assert "not found" not in result.stderr  # a loop is not a missing file
    errors = [line for line in result.stderr.splitlines() if line.startswith("kafkalog: error:")]
    assert errors == [f"kafkalog: error: {log}: {ELOOP}"]


@needs_golden
def test_dump_of_a_dir_whose_log_is_a_dir_says_so_once(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-none-0")
    log = pdir / "00000000000000000000.log"
    log.unlink()
    log.mkdir()
    result = run("dump", pdir)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {log}: Is a directory"]


def test_the_library_names_bad_segment_names_with_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(E.InvalidArgumentError, match=r"99999999999999999999\.log: base offset"):
        base_offset_prefix("99999999999999999999.log")
    odd = tmp_path / "notes.log"
    odd.write_bytes(b"")
    with pytest.raises(E.InvalidArgumentError, match="not a segment file"):
        discover_segments(odd)
    with pytest.raises(OSError) as info:
        discover_segments(make_loop(tmp_path / "loop"))
    assert info.value.errno == errno.ELOOP

"""`kafkalog dump DIR`: a partition dir or a whole log dir is dumped as the files Kafka's tools read, in the order
``kafka-dump-log.sh --files dir/*`` would take them (names sorted within a dir, a dir's own files before its
subdirs), with the same lines and exit code as naming those files one by one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.names import file_kind
from tests.conftest import needs_golden

pytestmark = needs_golden


def run(*args: str | os.PathLike):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def files_as_an_operator_lists_them(root: Path) -> list[str]:
    """What ``ls -R`` shows of Kafka's files below root: sorted names per dir, the dir's files first."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found.extend(os.path.join(dirpath, n) for n in sorted(filenames) if file_kind(n)[0] != "unknown")
    return found


def test_a_partition_dir_dumps_like_its_files_named_one_by_one(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    files = files_as_an_operator_lists_them(pdir)
    assert len(files) > 4 and any(f.endswith(".log") for f in files)
    by_dir = run("dump", pdir, "--deep-iteration")
    by_file = run("dump", *files, "--deep-iteration")
    assert by_dir.exit_code == by_file.exit_code == 0
    assert by_dir.output == by_file.output
    headers = [ln for ln in by_dir.output.splitlines() if ln.startswith("Dumping ")]
    assert headers == [f"Dumping {f}" for f in files]


def test_a_log_dir_recurses_into_its_partitions_and_skips_unknown_files(golden_copy) -> None:
    logdir = golden_copy("logdir")
    (logdir / ".lock").write_bytes(b"")
    (logdir / "golden-none-0" / "notes.txt").write_text("operator scribbles")
    files = files_as_an_operator_lists_them(logdir)
    result = run("dump", logdir, "--json")
    assert result.exit_code == 0, result.output
    objs = [json.loads(ln) for ln in result.output.splitlines()]
    dumped = [o["file"] for o in objs if o["type"] == "file"]
    assert dumped == files
    # the log dir's own metadata first, then every partition dir in name order
    assert os.path.dirname(dumped[0]) == str(logdir)
    assert {os.path.basename(os.path.dirname(f)) for f in dumped if f.endswith(".log")} == {
        p.name for p in logdir.iterdir() if p.is_dir()
    }
    assert not any(o["type"] == "ignored" for o in objs)
    assert not any(f.endswith((".lock", "notes.txt")) for f in dumped)


def test_an_unknown_file_named_explicitly_is_still_reported(golden_copy, tmp_path: Path) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("x")
    result = run("dump", stray)
    assert f"Ignoring unknown file {stray}" in result.output


def test_corruption_anywhere_in_the_dir_sets_the_exit_code(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    logs = sorted(pdir.glob("*.log"))
    data = bytearray(logs[-1].read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    logs[-1].write_bytes(bytes(data))
    result = run("dump", pdir)
    assert result.exit_code == 1
    assert "isvalid: false" in result.output


def test_an_empty_dir_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    (empty / "README").write_text("no Kafka files")
    result = run("dump", empty)
    assert result.exit_code == 2
    assert result.output.strip() == f"kafkalog: error: {empty}: no Kafka log files found: nothing checked"
    assert "Traceback" not in result.output


def test_symlinked_dirs_inside_are_not_followed(golden_copy, tmp_path: Path) -> None:
    logdir = golden_copy("logdir")
    outside = tmp_path / "elsewhere"
    shutil.copytree(logdir / "golden-none-0", outside / "linked-0")
    os.symlink(outside / "linked-0", logdir / "linked-0")
    result = run("dump", logdir, "--json")
    assert result.exit_code == 0
    assert not any("linked-0" in ln for ln in result.output.splitlines())


def test_dirs_and_files_mix_in_the_order_given(golden_copy) -> None:
    logdir = golden_copy("logdir")
    single = sorted((logdir / "golden-lz4-0").glob("*.log"))[0]
    pdir = logdir / "golden-none-0"
    result = run("dump", single, pdir, "--json")
    assert result.exit_code == 0
    dumped = [json.loads(ln)["file"] for ln in result.output.splitlines() if '"type": "file"' in ln]
    assert dumped == [str(single), *files_as_an_operator_lists_them(pdir)]


def test_progress_bar_on_a_terminal_leaves_redirected_output_intact(golden_copy, tmp_path: Path) -> None:
    """`kafkalog dump LOGDIR > out.txt` on a terminal: the bar is drawn on stderr (the terminal), and out.txt gets
    exactly the lines of a run without a terminal."""
    import pty
    import subprocess
    import sys

    logdir = golden_copy("logdir")
    cmd = [sys.executable, "-c", "from kafkalog_cli.main import main; main()", "dump", str(logdir)]
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    primary, secondary = pty.openpty()
    out_file = tmp_path / "out.txt"
    with open(out_file, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=secondary, env={**os.environ, "TERM": "xterm"})
        os.close(secondary)
        seen = b""
        while True:  # drained while the child runs: a full terminal buffer would block it
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        os.close(primary)
        proc.wait(timeout=120)
    assert proc.returncode == plain.returncode == 0
    assert out_file.read_text() == plain.stdout
    assert b"dumping" in seen


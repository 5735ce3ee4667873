"""Issue 28 item 3: one verdict. A partition is CORRUPT when any of its files is (an index included) and ERROR when
one cannot be read, in ``kafkalog verify`` and in the Spark job's partition rows alike; the log start offset is
Kafka's everywhere (the checkpoint's, as ``dirs describe`` prints it); a symlink loop is an I/O error with its real
reason; ``dump --max-bytes`` stops where Kafka's DumpLogSegments stops, without calling the cut corrupt."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.archive.discovery import discover_segments
from kafkalog.verify import exit_code, verify_partition, verify_segment
from tests.conftest import load_manifest, needs_golden
from tests.unreadable import ELOOP, deny_open, make_loop

pytestmark = needs_golden

def run(*args: str | os.PathLike):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))


def test_a_corrupt_index_makes_its_partition_and_the_summary_corrupt(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    index = pdir / "00000000000000000000.index"  # an inactive segment: no crash excuse for a bad index
    flip(index, 5)  # the first entry's position now points far beyond the log
    result = run("verify", "--json", pdir)
    assert result.exit_code == 1
    out = objs(result)
    (seg,) = [o for o in out if o["type"] == "segment" and o["status"] != "ok"]
    assert seg["path"].endswith("00000000000000000000.log") and seg["status"] == "corrupt"
    assert seg["segmentStatus"] == "ok" and seg["indexStatus"] == "corrupt"
    (part,) = [o for o in out if o["type"] == "partition"]
    assert part["status"] == "corrupt" and "1 segment(s) not ok" in part["problems"]
    assert out[-1]["counts"]["partition"] == {"corrupt": 1}
    text = run("verify", pdir).stdout.splitlines()
    assert text[-1].startswith("Summary: CORRUPTION FOUND: 11 segments (corrupt 1, ok 10); 1 partitions (corrupt 1)")
    # the Spark job's partition row (verify_partition over segment rows) says the same
    from kafkalog.verify import summary_fields

    reports = [verify_segment(i) for i in discover_segments(pdir)]
    rows = [r.to_dict() for r in reports]
    part_row = verify_partition(rows)
    assert part_row.status == "corrupt" and part_row.corrupt_segments == 1
    assert exit_code(rows, [part_row]) == 1
    assert summary_fields(rows, [part_row])["counts"]["partition"] == {"corrupt": 1}


def test_an_unreadable_segment_makes_its_partition_error(golden_copy, monkeypatch) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    path = deny_open(monkeypatch, os.path.realpath(pdir / "00000000000000000040.log"))
    result = run("verify", "--json", pdir)
    assert result.exit_code == 2
    out = objs(result)
    (part,) = [o for o in out if o["type"] == "partition"]
    assert part["status"] == "error"
    assert "1 segment(s) could not be read: their offsets are not checked" in part["problems"]
    assert out[-1]["counts"]["partition"] == {"error": 1}
    assert out[-1]["notChecked"] == [path, str(os.path.realpath(pdir))]
    assert result.stderr.splitlines() == [f"kafkalog: error: {path}: Permission denied"]


def test_an_index_that_is_a_symlink_loop_is_an_io_error_not_a_missing_index(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    index = make_loop(pdir / "00000000000000000040.index")
    result = run("verify", "--json", pdir)
    assert result.exit_code == 2
    out = objs(result)
    (seg,) = [o for o in out if o["type"] == "segment" and o["status"] != "ok"]
    assert seg["status"] == "error" and seg["indexStatus"] == "unreadable" and seg["segmentStatus"] == "ok"
    assert seg["indexError"] == f".index: {os.path.realpath(index)}: {ELOOP}"
    (part,) = [o for o in out if o["type"] == "partition"]
    assert part["status"] == "error" and part["logEndOffset"] == 411  # the readable .log still counts
    assert result.stderr.splitlines() == [f"kafkalog: error: {os.path.realpath(index)}: {ELOOP}"]


def test_a_log_that_is_a_symlink_loop_is_eloop_exit_2_not_corrupt(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-gzip-0")
    log = make_loop(pdir / "00000000000000000000.log")
    for target in (log, pdir):
        result = run("verify", target)
        assert result.exit_code == 2, target
        assert "CORRUPT" not in result.stdout and "no such file" not in result.output.lower()
        assert result.stderr.splitlines() == [f"kafkalog: error: {os.path.realpath(log)}: {ELOOP}"]
    dumped = run("dump", log)
    assert dumped.exit_code == 2 and dumped.stderr.splitlines() == [f"kafkalog: error: {log}: {ELOOP}"]


def test_verify_prints_the_checkpoint_log_start_offset_as_dirs_describe(golden_copy) -> None:
    logdir = golden_copy("logdir")
    scenario = load_manifest("manifests/golden-deleterecords-0.json")["scenario"]
    described = json.loads(run("dirs", "describe", "--json", logdir).stdout)
    (d,) = [p for p in described["brokers"][0]["logDirs"][0]["partitions"] if p["partition"] == "golden-deleterecords-0"]
    assert d["logStartOffset"] == 28 == scenario["logStartOffset"]
    out = objs(run("verify", "--json", logdir / "golden-deleterecords-0"))
    (part,) = [o for o in out if o["type"] == "partition"]
    assert part["logStartOffset"] == 28 and part["logStartOffsetCheckpoint"] == 28
    text = run("verify", logdir / "golden-deleterecords-0").stdout
    assert f"log start 28, log end {scenario['logEndOffset']}" in text
    # the Spark job's partition row: the same offset
    rows = [verify_segment(i) for i in discover_segments(logdir / "golden-deleterecords-0")]
    assert verify_partition(rows).log_start_offset == 28


def test_dump_max_bytes_of_a_healthy_file_stops_quietly_as_kafka(golden_copy) -> None:
    log = golden_copy("logdir/golden-none-0") / "00000000000000000000.log"
    batches = load_manifest("manifests/golden-none-0.json")["segments"][0]["log"]["batches"]
    within = [b for b in batches if b["position"] + b["sizeInBytes"] <= 1000]
    assert 0 < len(within) < len(batches)
    result = run("dump", "--max-bytes", "1000", log)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert sum(1 for line in result.stdout.splitlines() if line.startswith("baseOffset:")) == len(within)
    # bytes that are no batch even in the whole file are still damage under --max-bytes
    pdir = golden_copy("unclean/input/unclean-truncated-tail-0")
    info = load_manifest("unclean/manifests/unclean-truncated-tail.result.json")
    log = pdir / info["damage"]["truncated"]
    result = run("dump", "--max-bytes", str(log.stat().st_size + 100), log)
    assert result.exit_code == 1
    assert "unreadable bytes" in result.stderr

"""`kafkalog verify` on golden copies (clean), damaged copies (every corrupt range found), bad paths."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from tests.conftest import load_manifest, needs_golden
from tests.unreadable import deny_open

pytestmark = needs_golden


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def writable(root: Path) -> Path:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    return root


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_golden_logdir_is_clean(golden_copy) -> None:
    logdir = golden_copy("logdir")
    result = run("verify", "--json", logdir)
    assert result.exit_code == 0, result.output
    out = objs(result)
    segments = [o for o in out if o["type"] == "segment"]
    want = sum(len(load_manifest(f"manifests/{p.name}.json")["segments"]) for p in logdir.iterdir() if p.is_dir())
    assert len(segments) == want and all(o["status"] == "ok" for o in segments)
    parts = {Path(o["path"]).name: o for o in out if o["type"] == "partition"}
    for name, p in parts.items():
        scen = load_manifest(f"manifests/{name}.json")["scenario"]
        assert p["logEndOffset"] == scen["logEndOffset"]
        assert p["recoveryPoint"] == scen["recoveryPoint"]
        assert p["topicId"] == scen["topicId"]
    assert out[-1]["type"] == "summary" and out[-1]["ok"] is True
    assert [o["type"] for o in out].count("logdir") == 1


def test_text_mode_and_quiet(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-segments-0")
    result = run("verify", pdir)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert sum(1 for line in lines if line.startswith("segment ") and ": ok (" in line) == 11
    assert lines[-1].startswith("Summary: OK: 11 segments (ok 11)")
    quiet = run("-q", "verify", pdir)
    assert quiet.stdout.splitlines() == [lines[-1]]


def test_single_segment_and_index_path(golden_copy) -> None:
    pdir = golden_copy("logdir/golden-txn-0")
    for p in (pdir / "00000000000000000044.log", pdir / "00000000000000000044.index"):
        out = objs(run("verify", "--json", p))
        segs = [o for o in out if o["type"] == "segment"]
        assert [Path(s["path"]).name for s in segs] == ["00000000000000000044.log"]


def test_truncated_tail_range(golden_copy) -> None:
    d = writable(golden_copy("unclean/input/unclean-truncated-tail-0"))
    info = load_manifest("unclean/manifests/unclean-truncated-tail.result.json")
    result = run("verify", "--json", d)
    assert result.exit_code == 1
    bad = [o for o in objs(result) if o["type"] == "segment" and o["status"] == "corrupt"]
    assert [Path(o["path"]).name for o in bad] == [info["damage"]["truncated"]]
    (rng,) = bad[0]["corruptRanges"]
    assert rng["position"] == info["kafkaLoadResult"]["nextOffsetPosition"]
    assert rng["position"] + rng["size"] == info["damage"]["to"]


def test_every_corrupt_range_is_reported(golden_copy) -> None:
    """Flip a byte in two batches of one segment and in another segment: all three ranges come back."""
    d = writable(golden_copy("logdir/golden-segments-0"))
    m = load_manifest("manifests/golden-segments-0.json")
    hits = []
    for seg_i, batch_i in ((0, 1), (0, 5), (3, 2)):
        seg = m["segments"][seg_i]
        b = seg["log"]["batches"][batch_i]
        path = d / seg["log"]["file"]
        data = bytearray(path.read_bytes())
        data[b["position"] + b["sizeInBytes"] - 1] ^= 0xFF  # last byte of the batch: CRC fails, structure intact
        path.write_bytes(bytes(data))
        hits.append((seg["log"]["file"], b["position"], b["sizeInBytes"]))
    result = run("verify", "--json", d)
    assert result.exit_code == 1
    found = {
        (Path(o["path"]).name, r["position"], r["size"])
        for o in objs(result)
        if o["type"] == "segment"
        for r in o["corruptRanges"]
    }
    assert found == set(hits)
    text = run("verify", d)
    for _name, pos, size in hits:
        assert f"  corrupt range: position {pos} size {size}" in text.stdout
    assert "CORRUPTION FOUND" in text.stdout.splitlines()[-1]


def test_corrupt_index_detected(golden_copy) -> None:
    d = writable(golden_copy("logdir/golden-segments-0"))  # not the active segment: a bad index there is damage
    index = d / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 7)  # first entry's position: not a batch start
    index.write_bytes(bytes(data))
    result = run("verify", "--json", d)
    assert result.exit_code == 1
    (seg,) = [o for o in objs(result) if o["type"] == "segment" and o["path"].endswith("00000000000000000000.log")]
    assert seg["indexStatus"] == "corrupt" and seg["status"] == "corrupt"
    assert run("verify", "--no-index-check", d).exit_code == 0


def test_corrupt_checkpoints_and_snapshot(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    (logdir / "recovery-point-offset-checkpoint").write_text("0\n1\ngolden-none zero 5\n")
    (logdir / "golden-txn-0" / "leader-epoch-checkpoint").write_text("0\n1\nx\n")
    snap = logdir / "golden-txn-0" / "00000000000000000044.snapshot"
    data = bytearray(snap.read_bytes())
    data[-1] ^= 1
    snap.write_bytes(bytes(data))
    result = run("verify", "--json", logdir)
    assert result.exit_code == 1
    out = objs(result)
    (ld,) = [o for o in out if o["type"] == "logdir"]
    assert ld["status"] == "corrupt" and any("recovery-point-offset-checkpoint" in p for p in ld["problems"])
    (txn,) = [o for o in out if o["type"] == "partition" and o["path"].endswith("golden-txn-0")]
    assert txn["status"] == "corrupt"
    assert any(p.startswith("leader-epoch-checkpoint") for p in txn["problems"])
    assert any(p.startswith("00000000000000000044.snapshot") for p in txn["problems"])


def test_checkpoint_beyond_log_end(golden_copy) -> None:
    logdir = writable(golden_copy("logdir"))
    cp = logdir / "recovery-point-offset-checkpoint"
    cp.write_text(cp.read_text().replace("golden-none 0 146", "golden-none 0 999"))
    result = run("verify", "--json", logdir)
    assert result.exit_code == 1
    (p,) = [o for o in objs(result) if o["type"] == "partition" and o["path"].endswith("golden-none-0")]
    assert p["status"] == "corrupt" and any("999" in x for x in p["problems"])


def test_missing_path_one_line_exit_2(tmp_path: Path) -> None:
    result = run("verify", tmp_path / "nope")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {tmp_path / 'nope'}: No such file or directory"]
    # issue 28: the summary says what was not checked (it printed nothing before)
    assert result.stdout.splitlines() == [
        f"Summary: ERRORS: 1 files (error 1); 0 bytes read; not checked (1): {tmp_path / 'nope'}"
    ]


def test_unreadable_segment_exit_2(golden_copy, monkeypatch) -> None:
    d = golden_copy("logdir/golden-none-0")
    path = deny_open(monkeypatch, os.path.realpath(d / "00000000000000000000.log"))
    result = run("verify", d)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {path}: Permission denied"]


@pytest.mark.parametrize("case", ["unclean-corrupt-crc", "unclean-truncated-tail"])
def test_damaged_inputs_exit_1(golden_copy, case: str) -> None:
    d = writable(golden_copy(f"unclean/input/{case}-0"))
    assert run("verify", d).exit_code == 1
    recovered = writable(golden_copy(f"unclean/recovered/{case}-0"))
    assert run("verify", recovered).exit_code == 0


def _flip_mid_segment(d: Path, seg_i: int) -> tuple[str, int]:
    """Flip the last byte of the middle batch of segment ``seg_i`` (its CRC fails); (file name, position)."""
    seg = load_manifest("manifests/golden-segments-0.json")["segments"][seg_i]
    batches = seg["log"]["batches"]
    b = batches[len(batches) // 2]
    path = d / seg["log"]["file"]
    data = bytearray(path.read_bytes())
    data[b["position"] + b["sizeInBytes"] - 1] ^= 0xFF
    path.write_bytes(bytes(data))
    return seg["log"]["file"], b["position"]


def test_partition_with_corrupt_segment_is_corrupt(golden_copy) -> None:
    """Issue 22: one byte flipped in an inactive segment makes its partition CORRUPT (text and JSON), not ok."""
    d = writable(golden_copy("logdir/golden-segments-0"))
    name, _pos = _flip_mid_segment(d, 4)
    result = run("verify", "--json", d)
    assert result.exit_code == 1
    out = objs(result)
    (part,) = [o for o in out if o["type"] == "partition"]
    assert part["status"] == "corrupt" and part["continuity"] == "corrupt"
    assert "1 segment(s) not ok" in part["problems"]
    assert out[-1]["counts"]["partition"] == {"corrupt": 1}
    bad = [Path(o["path"]).name for o in out if o["type"] == "segment" and o["status"] == "corrupt"]
    assert bad == [name]
    text = run("verify", d).stdout.splitlines()
    (line,) = [x for x in text if x.startswith("partition ")]
    assert line.startswith(f"partition {os.path.realpath(d)}: CORRUPT (11 segments")
    assert text[-1].startswith("Summary: CORRUPTION FOUND: 11 segments (corrupt 1, ok 10); 1 partitions (corrupt 1)")


def test_leader_epochs_out_of_order_are_corrupt(golden_copy) -> None:
    d = writable(golden_copy("logdir/golden-segments-0"))
    (d / "leader-epoch-checkpoint").write_text("0\n2\n3 100\n1 200\n")
    result = run("verify", "--json", d)
    assert result.exit_code == 1
    (part,) = [o for o in objs(result) if o["type"] == "partition"]
    assert part["status"] == "corrupt" and part["continuity"] == "ok"
    assert part["leaderEpochs"] == [{"epoch": 3, "startOffset": 100}, {"epoch": 1, "startOffset": 200}]
    assert any(p.startswith("leader-epoch-checkpoint: entry") for p in part["problems"])

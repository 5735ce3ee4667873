"""`kafkalog dump` against Kafka's golden files: text lines rebuilt from the manifests in Kafka's
DumpLogSegments shapes and compared line by line, `--json` parsed back, damaged copies and bad paths."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from tests.conftest import GOLDEN, golden_cases, legacy_cases, load_manifest, needs_golden

pytestmark = needs_golden


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _b(v: bool) -> str:
    return "true" if v else "false"


def _size(hexval: str | None) -> int:
    return -1 if hexval is None else len(hexval) // 2


def _opt(v: int | None) -> str:
    return "OptionalLong.empty" if v is None else f"OptionalLong[{v}]"


def batch_line(b: dict) -> str:
    """Kafka's DumpLogSegments.printBatchLevel, from a manifest batch."""
    if b["magic"] >= 2:
        head = (
            f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['recordCount']}"
            f" baseSequence: {b['baseSequence']} lastSequence: {b['lastSequence']} producerId: {b['producerId']}"
            f" producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']}"
            f" isTransactional: {_b(b['isTransactional'])} isControl: {_b(b['isControl'])}"
            f" deleteHorizonMs: {_opt(b['deleteHorizonMs'])}"
        )
    else:
        head = f"offset: {b['lastOffset']}"
    return (
        f"{head} position: {b['position']} {b['timestampType']}: {b['maxTimestamp']} size: {b['sizeInBytes']}"
        f" magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} isvalid: {_b(b['crcValid'])}"
    )


def record_line(b: dict, r: dict) -> str:
    """Kafka's printRecordMetadata, from a manifest record."""
    line = (
        f"| offset: {r['offset']} {b['timestampType']}: {r['timestamp']}"
        f" keySize: {_size(r['key'])} valueSize: {_size(r['value'])}"
    )
    if b["magic"] >= 2:
        line += f" sequence: {r['sequence']} headerKeys: [{','.join(h['key'] for h in r['headers'])}]"
    else:
        line += f" isValid: {_b(r['crcValid'])} crc: {r['crc']}}}"  # Kafka's stray brace
    if b["isControl"]:
        key, value = bytes.fromhex(r["key"]), bytes.fromhex(r["value"])
        ctype = {0: "ABORT", 1: "COMMIT"}[struct.unpack(">h", key[2:4])[0]]
        line += f" endTxnMarker: {ctype} coordinatorEpoch: {struct.unpack('>i', value[2:6])[0]}"
    return line


def expected_log_dump(path: str, segment: dict, *, deep: bool) -> list[str]:
    lines = [f"Dumping {path}", f"Log starting offset: {segment['baseOffset']}"]
    for b in segment["log"]["batches"]:
        lines.append(batch_line(b))
        if deep:
            lines.extend(record_line(b, r) for r in b["records"])
    return lines


def _all_segments() -> list[tuple[str, str, int]]:
    """(manifest path, partition dir relative to golden, segment index) for every golden and legacy segment."""
    out = []
    for case in golden_cases():
        m = load_manifest(f"manifests/{case}.json")
        out += [(f"manifests/{case}.json", f"logdir/{case}", i) for i in range(len(m["segments"]))]
    for case in legacy_cases():
        m = load_manifest(f"legacy/manifests/{case}.json")
        out += [(f"legacy/manifests/{case}.json", f"legacy/logdir/{case}", i) for i in range(len(m["segments"]))]
    return out


SEGMENTS = _all_segments() if GOLDEN is not None else []


@pytest.fixture(scope="module")
def golden_tree(tmp_path_factory) -> Path:
    """One writable copy of the golden tree for the read-only dump tests of this module."""
    dst = tmp_path_factory.mktemp("golden") / "g"
    shutil.copytree(GOLDEN, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    return dst


@pytest.mark.parametrize(("manifest", "pdir", "seg"), SEGMENTS, ids=[f"{p.split('/')[-1]}#{s}" for _, p, s in SEGMENTS])
def test_log_text_matches_kafka_lines(golden_tree: Path, manifest: str, pdir: str, seg: int) -> None:
    segment = load_manifest(manifest)["segments"][seg]
    path = str(golden_tree / pdir / segment["log"]["file"])
    shallow = run("dump", path)
    assert shallow.exit_code == 0, shallow.stderr
    assert shallow.stdout.splitlines() == expected_log_dump(path, segment, deep=False)
    deep = run("dump", "--deep-iteration", path)
    assert deep.exit_code == 0, deep.stderr
    assert deep.stdout.splitlines() == expected_log_dump(path, segment, deep=True)


@pytest.mark.parametrize(("manifest", "pdir", "seg"), SEGMENTS, ids=[f"{p.split('/')[-1]}#{s}" for _, p, s in SEGMENTS])
def test_log_json_matches_manifest(golden_tree: Path, manifest: str, pdir: str, seg: int) -> None:
    segment = load_manifest(manifest)["segments"][seg]
    path = str(golden_tree / pdir / segment["log"]["file"])
    result = run("dump", "--json", "--print-data-log", "--key-decoder", "hex", "--value-decoder", "hex", path)
    assert result.exit_code == 0, result.stderr
    objs = [json.loads(line) for line in result.stdout.splitlines()]
    assert objs[0] == {"type": "file", "file": path, "kind": "log", "startOffset": segment["baseOffset"]}
    batches = [o for o in objs if o["type"] == "batch"]
    records = [o for o in objs if o["type"] == "record"]
    want = segment["log"]["batches"]
    assert len(batches) == len(want)
    for got, b in zip(batches, want, strict=True):
        assert got["baseOffset"] == b["baseOffset"] and got["lastOffset"] == b["lastOffset"]
        assert (got["position"], got["size"], got["magic"], got["crc"]) == (
            b["position"],
            b["sizeInBytes"],
            b["magic"],
            b["crc"],
        )
        assert got["compresscodec"] == b["compression"] and got["isvalid"] is b["crcValid"]
        assert got[b["timestampType"]] == b["maxTimestamp"]
        if b["magic"] >= 2:
            for field in ("producerId", "producerEpoch", "baseSequence", "lastSequence", "partitionLeaderEpoch"):
                assert got[field] == b[field], field
            assert got["count"] == b["recordCount"]
            assert got["isTransactional"] is b["isTransactional"] and got["isControl"] is b["isControl"]
    want_records = [(b, r) for b in want for r in b["records"]]
    assert len(records) == len(want_records)
    for got, (b, r) in zip(records, want_records, strict=True):
        assert (got["offset"], got["timestamp"]) == (r["offset"], r["timestamp"])
        assert (got["keySize"], got["valueSize"]) == (_size(r["key"]), _size(r["value"]))
        assert got["headerKeys"] == [h["key"] for h in r.get("headers", [])]
        if b["isControl"]:
            assert "key" not in got and "payload" not in got  # Kafka never prints control record contents
            continue
        assert got.get("key") == r["key"] and got.get("payload") == r["value"]


def _index_segments() -> list[tuple[str, str, int]]:
    return [s for s in SEGMENTS if s[0].startswith("manifests/")]


INDEX_SEGMENTS = _index_segments()


@pytest.mark.parametrize(
    ("manifest", "pdir", "seg"), INDEX_SEGMENTS, ids=[f"{p.split('/')[-1]}#{s}" for _, p, s in INDEX_SEGMENTS]
)
def test_index_and_timeindex_lines(golden_tree: Path, manifest: str, pdir: str, seg: int) -> None:
    segment = load_manifest(manifest)["segments"][seg]
    d = golden_tree / pdir
    oi, ti = segment["offsetIndex"], segment["timeIndex"]
    ipath, tpath = str(d / oi["file"]), str(d / ti["file"])
    result = run("dump", ipath, tpath)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # every entry checked against the log, no mismatch
    want = [f"Dumping {ipath}"]
    want += [f"offset: {e['offset']} position: {e['position']}" for e in oi["entries"]] or [f"{ipath} is empty."]
    want += [f"Dumping {tpath}"] + [f"timestamp: {e['timestamp']} offset: {e['offset']}" for e in ti["entries"]]
    assert result.stdout.splitlines() == want
    js = run("dump", "--json", ipath, tpath)
    objs = [json.loads(line) for line in js.stdout.splitlines()]
    assert [{"offset": o["offset"], "position": o["position"]} for o in objs if o["type"] == "index"] == oi["entries"]
    assert [{"timestamp": o["timestamp"], "offset": o["offset"]} for o in objs if o["type"] == "timeindex"] == ti[
        "entries"
    ]
    # --verify-index-only prints nothing but the headers when the index agrees with the log.
    quiet = run("dump", "--verify-index-only", ipath, tpath)
    assert quiet.exit_code == 0
    assert quiet.stdout.splitlines() == [f"Dumping {ipath}"] + ([] if oi["entries"] else [f"{ipath} is empty."]) + [
        f"Dumping {tpath}"
    ]
    sane = run("dump", "--index-sanity-check", ipath, tpath)
    assert sane.exit_code == 0
    if oi["entries"]:
        assert f"{ipath} passed sanity check." in sane.stdout.splitlines()
    assert f"{tpath} passed sanity check." in sane.stdout.splitlines()


def test_txnindex_snapshot_and_checkpoints(golden_tree: Path) -> None:
    m = load_manifest("manifests/golden-txn-0.json")
    d = golden_tree / "logdir" / "golden-txn-0"
    for seg in m["segments"]:
        path = str(d / seg["txnIndex"]["file"])
        result = run("dump", path)
        want = [f"Dumping {path}"] + [
            f"version: {e['version']} producerId: {e['producerId']} firstOffset: {e['firstOffset']}"
            f" lastOffset: {e['lastOffset']} lastStableOffset: {e['lastStableOffset']}"
            for e in seg["txnIndex"]["entries"]
        ]
        assert result.stdout.splitlines() == want
    for snap in m["producerSnapshots"]:
        path = str(d / snap["file"])
        result = run("dump", path)
        want = [f"Dumping {path}"]
        for e in snap["entries"]:
            line = (
                f"producerId: {e['producerId']} producerEpoch: {e['producerEpoch']}"
                f" coordinatorEpoch: {e['coordinatorEpoch']} currentTxnFirstOffset: {_opt(e['currentTxnFirstOffset'])}"
                f" lastTimestamp: {e['lastTimestamp']}"
            )
            for bm in e["batchMetadata"][:1]:
                line += (
                    f" firstSequence: {bm['firstSeq']} lastSequence: {bm['lastSeq']} lastOffset: {bm['lastOffset']}"
                    f" offsetDelta: {bm['offsetDelta']} timestamp: {bm['timestamp']}"
                )
            want.append(line)
        assert result.stdout.splitlines() == want
    epochs = run("dump", "--json", str(d / "leader-epoch-checkpoint"), str(d / "partition.metadata"))
    objs = [json.loads(line) for line in epochs.stdout.splitlines()]
    assert [{"epoch": o["epoch"], "startOffset": o["startOffset"]} for o in objs if o["type"] == "leader_epoch"] == m[
        "leaderEpochCheckpoint"
    ]["entries"]
    assert [o["topicId"] for o in objs if o["type"] == "partition_metadata"] == [m["partitionMetadata"]["topicId"]]
    root = load_manifest("manifests/_logdir-root.json")
    cp = run("dump", "--json", str(golden_tree / "logdir" / "recovery-point-offset-checkpoint"))
    got = {
        f"{o['topic']}-{o['partition']}": o["offset"]
        for o in map(json.loads, cp.stdout.splitlines())
        if o["type"] == "checkpoint"
    }
    assert got == root["recovery-point-offset-checkpoint"]["offsets"]
    meta = run("dump", str(golden_tree / "logdir" / "meta.properties"))
    mp = root["meta.properties"]
    assert meta.stdout.splitlines()[1] == (
        f"version: {mp['version']} clusterId: {mp['clusterId']} nodeId: {mp['nodeId']} directoryId: {mp['directoryId']}"
    )


def test_truncated_tail_reports_invalid_bytes(golden_copy) -> None:
    d = golden_copy("unclean/input/unclean-truncated-tail-0")
    info = load_manifest("unclean/manifests/unclean-truncated-tail.result.json")
    log = d / info["damage"]["truncated"]
    result = run("dump", str(log))
    assert result.exit_code == 1
    last = result.stdout.splitlines()[-1]
    assert last.startswith("Found ") and last.endswith(f" invalid bytes at the end of {log.name}")
    n = int(last.split()[1])
    js = run("dump", "--json", str(log))
    tail = json.loads(js.stdout.splitlines()[-1])
    assert tail == {"type": "invalid_bytes", "file": log.name, "position": log.stat().st_size - n, "size": n}
    assert js.exit_code == 1


def test_corrupt_crc_marks_batch_invalid(golden_copy) -> None:
    d = golden_copy("unclean/input/unclean-corrupt-crc-0")
    results = [run("dump", str(p)) for p in sorted(d.glob("*.log"))]
    assert any("isvalid: false" in r.stdout for r in results)
    assert {r.exit_code for r in results} == {0, 1}
    assert all(("isvalid: false" in r.stdout) == (r.exit_code == 1) for r in results)


def test_index_mismatch_reported_like_kafka(golden_copy) -> None:
    d = golden_copy("logdir/golden-none-0")
    index = d / "00000000000000000000.index"
    os.chmod(index, 0o644)
    data = bytearray(index.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 8)  # second entry: point it at the first batch
    struct.pack_into(">ii", data, 8, rel, 0)
    index.write_bytes(bytes(data))
    result = run("dump", str(index))
    assert result.exit_code == 1
    assert f"Mismatches in :{index.resolve()}" in result.stderr.splitlines()
    assert any(line.startswith(f"  Index offset: {rel}, log offset: ") for line in result.stderr.splitlines())
    js = run("dump", "--json", "--verify-index-only", str(index))
    kinds = [json.loads(line)["type"] for line in js.stdout.splitlines()]
    assert kinds == ["file", "index_mismatch"]


def test_time_index_mismatch_reported(golden_copy) -> None:
    d = golden_copy("logdir/golden-none-0")
    ti = d / "00000000000000000000.timeindex"
    os.chmod(ti, 0o644)
    data = bytearray(ti.read_bytes())
    ts, rel = struct.unpack_from(">qi", data, 12)
    struct.pack_into(">qi", data, 12, ts + 1, rel)
    ti.write_bytes(bytes(data))
    result = run("dump", "--verify-index-only", str(ti))
    assert result.exit_code == 1
    assert f"Found timestamp mismatch in :{ti.resolve()}" in result.stderr.splitlines()
    assert f"  Index timestamp: {ts + 1}, log timestamp: {ts}" in result.stderr.splitlines()


def test_skip_metadata_and_string_decoder(golden_tree: Path) -> None:
    m = load_manifest("manifests/golden-none-0.json")
    seg = m["segments"][0]
    path = str(golden_tree / "logdir" / "golden-none-0" / seg["log"]["file"])
    result = run("dump", "--print-data-log", "--skip-record-metadata", path)
    records = [line for line in result.stdout.splitlines()
               if not line.startswith(("baseOffset:", "Dumping ", "Log starting offset:"))]
    want = []
    for b in seg["log"]["batches"]:
        for r in b["records"]:
            parts = []
            if r["key"] is not None:
                parts.append(f"| key: {bytes.fromhex(r['key']).decode('utf-8', 'replace')}")
            if r["value"] is not None:  # DumpLogSegments: " payload: ..." even when no key came first
                parts.append(f" payload: {bytes.fromhex(r['value']).decode('utf-8', 'replace')}")
            if parts:
                want.append("".join(parts))
    assert records == want


def test_max_bytes_limits_the_read(golden_tree: Path) -> None:
    seg = load_manifest("manifests/golden-none-0.json")["segments"][0]
    path = str(golden_tree / "logdir" / "golden-none-0" / seg["log"]["file"])
    b2 = seg["log"]["batches"][2]
    result = run("dump", "--max-bytes", str(b2["position"] + b2["sizeInBytes"] + 5), path)
    assert result.stdout.splitlines()[2:] == [batch_line(b) for b in seg["log"]["batches"][:3]]
    assert "invalid bytes" not in result.stdout  # Kafka only reports trailing bytes for a whole-file read


def test_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    result = run("dump", str(missing))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {missing}: No such file or directory"]
    assert "Traceback" not in result.output


def test_directory_and_unknown_files(tmp_path: Path) -> None:
    result = run("dump", str(tmp_path))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    other = tmp_path / "notes.txt"
    other.write_text("x")
    result = run("dump", str(other))
    # Kafka's line, then: nothing was dumped, which is not a pass (exit 2, as for a dir holding nothing)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"Ignoring unknown file {other}",
                                          f"kafkalog: error: {other}: no file Kafka writes (nothing dumped)"]


def test_keeps_going_after_a_bad_file(golden_tree: Path, tmp_path: Path) -> None:
    good = str(golden_tree / "logdir" / "golden-none-0" / "00000000000000000000.log")
    result = run("dump", str(tmp_path / "00000000000000000000.log"), good)
    assert result.exit_code == 2
    assert f"Dumping {good}" in result.stdout


def test_unreadable_file_is_exit_2(golden_tree: Path, monkeypatch) -> None:
    path = str(golden_tree / "logdir" / "golden-none-0" / "00000000000000000000.log")
    real_open = open

    def deny(file, *a, **k):
        if os.fspath(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *a, **k)

    monkeypatch.setattr("builtins.open", deny)
    result = run("dump", path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"kafkalog: error: {path}: Permission denied"]


def test_corrupt_checkpoint_is_exit_1(tmp_path: Path) -> None:
    cp = tmp_path / "recovery-point-offset-checkpoint"
    cp.write_text("0\n2\nt 0 5\n")
    result = run("dump", str(cp))
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1

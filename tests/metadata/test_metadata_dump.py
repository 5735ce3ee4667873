"""``kafkalog dump`` with kafka-dump-log.sh's internal-topic decoders, against Kafka's own output: the golden
``__cluster_metadata-0``, ``__consumer_offsets-34`` and ``__transaction_state-28`` (METADATA/OFFSETS/TRANSACTIONS
.txt line for line, .json record by record), and fresh data the oracle generates and decodes in this session."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.metadata.codec import Reader, read_message, write_message
from kafkalog.metadata.decode import decode_metadata_record
from kafkalog.metadata.metadata_records import RECORD_TYPES
from kafkalog.records import build_batch, read_batches
from tests.conftest import GOLDEN, needs_golden
from tests.oracle import needs_oracle, run_oracle, run_oracle_json

#: (partition dir, decoder option, Kafka's text, Kafka's JSON)
CASES = [
    ("__cluster_metadata-0", "--cluster-metadata-decoder", "METADATA.txt", "METADATA.json"),
    ("__consumer_offsets-34", "--offsets-decoder", "OFFSETS.txt", "OFFSETS.json"),
    ("__transaction_state-28", "--transaction-log-decoder", "TRANSACTIONS.txt", "TRANSACTIONS.json"),
]
#: what Kafka's JSON names a record's decoded parts (control record bodies under the word the tool prints)
DECODED = ("key", "payload", "SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters", "LeaderChange")


def _run(cwd: Path, *args: str) -> Any:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["dump", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


def _files(kafka_json: dict) -> list[str]:
    return [f["file"] for f in kafka_json["files"]]


def _compare(root: Path, part: str, option: str, text_name: str, json_name: str) -> int:
    """Our text equals Kafka's line for line; our JSON records equal Kafka's field by field. Returns the number
    of records compared."""
    kafka = json.loads((root / json_name).read_text())
    files = _files(kafka)
    assert files and all(f.startswith(part + "/") for f in files)
    result = _run(root, option, *files)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == (root / text_name).read_text().splitlines()

    result = _run(root, option, "--json", *files)
    assert result.exit_code == 0
    ours = [json.loads(line) for line in result.stdout.splitlines()]
    records = [o for o in ours if o["type"] == "record"]
    batches = [o for o in ours if o["type"] == "batch"]
    want_batches = [b for f in kafka["files"] for b in f["batches"]]
    want = [r for b in want_batches for r in b["records"]]
    assert len(records) == len(want) and len(batches) == len(want_batches)
    for got, exp in zip(batches, want_batches, strict=True):
        for field in ("baseOffset", "lastOffset", "count", "crc", "isvalid", "position", "size", "isControl"):
            assert got[field] == exp[field], field
    for got, exp in zip(records, want, strict=True):
        assert (got["offset"], got["keySize"], got["valueSize"]) == (exp["offset"], exp["keySize"], exp["valueSize"])
        for field in DECODED:
            if field == "LeaderChange" or field in exp:
                assert got.get(field) == exp.get(field), (exp["offset"], field)
        if "controlType" in exp and "endTxnMarker" not in got:
            assert got["controlType"] == exp["controlType"]
    return len(want)


@needs_golden
@pytest.mark.parametrize("part,option,text_name,json_name", CASES, ids=[c[0] for c in CASES])
def test_golden_decoders_match_kafka_dump_log(tmp_path: Path, part, option, text_name, json_name) -> None:
    root = tmp_path / "metadata"
    shutil.copytree(GOLDEN / "metadata", root)
    assert _compare(root, part, option, text_name, json_name) > 15


@needs_golden
def test_every_golden_metadata_record_writes_back_to_its_bytes() -> None:
    """The writer is the reader's inverse on Kafka's bytes: every version and tagged field present round-trips."""
    seen: set[tuple[str, int]] = set()
    for path in sorted((GOLDEN / "metadata" / "__cluster_metadata-0").iterdir()):
        if path.suffix not in (".log", ".checkpoint"):
            continue
        for batch in read_batches(str(path)):
            if batch.is_control:
                continue
            for record in batch.records():
                decoded = decode_metadata_record(record.value)
                head = bytes(record.value)[:3]  # frame version, api key, version: one byte each here
                body = write_message(decoded.schema, decoded.version, decoded.data)
                assert head + body == bytes(record.value), (path.name, record.offset)
                seen.add((decoded.type_name, decoded.version))
    assert {("PARTITION_RECORD", 0), ("PARTITION_RECORD", 1), ("PARTITION_RECORD", 2),
            ("PARTITION_CHANGE_RECORD", 2), ("REGISTER_BROKER_RECORD", 3)} <= seen


def test_tables_are_well_formed() -> None:
    """Tags unique per struct and only on tagged fields; api keys match the table they index."""
    def walk(fields, where):
        tags = [f.tag for f in fields if f.tag is not None]
        assert len(tags) == len(set(tags)), where
        for f in fields:
            assert (f.tag is None) == f.tagged.empty, (where, f.name)
            walk(f.fields, f"{where}.{f.name}")

    for key, message in RECORD_TYPES.items():
        assert message.api_key == key
        walk(message.fields, message.name)
    reader = Reader(b"\x00")
    with pytest.raises(Exception) as info:
        read_message(RECORD_TYPES[2], reader, 5)
    assert type(info.value).__name__ == "UnsupportedRecordVersionError"


@pytest.fixture(scope="module")
def oracle_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh generation per test session: the metadata log and the two coordinator topics."""
    root = tmp_path_factory.mktemp("oracle-metadata")
    run_oracle("generate-metadata", root / "metadata")
    run_oracle("generate-offsets", root / "offsets")
    return root


@needs_oracle
@pytest.mark.parametrize("part,option,text_name,json_name", CASES, ids=[c[0] for c in CASES])
def test_fresh_oracle_data_decodes_as_kafka_does(oracle_data: Path, part, option, text_name, json_name) -> None:
    root = oracle_data / ("metadata" if part.startswith("__cluster") else "offsets")
    assert _compare(root, part, option, text_name, json_name) > 15


@needs_oracle
def test_oracle_decode_command_agrees_on_a_snapshot(oracle_data: Path) -> None:
    """``decode-metadata`` (DumpLogSegments' own parser) on the image snapshot: every record equal to ours."""
    root = oracle_data / "metadata"
    snapshot = sorted((root / "__cluster_metadata-0").glob("*-*.checkpoint"))[-1]
    kafka = run_oracle_json("decode-metadata", snapshot)
    files = kafka.get("files", [kafka]) if isinstance(kafka, dict) else kafka
    want = [r for f in files for b in f["batches"] for r in b["records"]]
    result = _run(root, "--cluster-metadata-decoder", "--json", str(snapshot))
    assert result.exit_code == 0
    got = [o for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "record"]
    assert len(got) == len(want) > 5
    for g, w in zip(got, want, strict=True):
        for field in DECODED:
            if field in w:
                assert g.get(field) == w[field], (w["offset"], field)


@needs_golden
def test_kraft_snapshots_are_verified(tmp_path: Path) -> None:
    """A sound snapshot dumps with exit 0 and verifies; one whose footer batch is torn off, or whose header is not
    first, is reported by both commands (exit 1) with each broken rule."""
    src = GOLDEN / "metadata" / "__cluster_metadata-0" / "00000000000000000023-0000000001.checkpoint"
    good = tmp_path / "good" / src.name
    good.parent.mkdir()
    shutil.copy(src, good)
    result = _run(tmp_path, "--json", str(good))
    assert result.exit_code == 0
    head = json.loads(result.stdout.splitlines()[0])
    assert (head["kind"], head["snapshotEndOffset"], head["snapshotEpoch"]) == ("kraft-snapshot", 23, 1)
    verify = CliRunner().invoke(main, ["verify", str(good)], catch_exceptions=False)
    assert verify.exit_code == 0 and "kraft-snapshot, 22 entries" in verify.stdout

    torn = tmp_path / "torn" / src.name
    torn.parent.mkdir()
    torn.write_bytes(src.read_bytes()[:-30])
    result = _run(tmp_path, str(torn))
    assert result.exit_code == 1
    assert f"{torn}: the last record is not a SnapshotFooter control record" in result.stderr.splitlines()
    verify = CliRunner().invoke(main, ["verify", str(torn)], catch_exceptions=False)
    assert verify.exit_code == 1 and "SnapshotFooter" in verify.stdout

    headless = tmp_path / "headless" / src.name
    headless.parent.mkdir()
    first_batch = 299  # the control batch with SnapshotHeader, KRaftVersion, KRaftVoters
    headless.write_bytes(src.read_bytes()[first_batch:])
    result = _run(tmp_path, str(headless))
    assert result.exit_code == 1
    problems = result.stderr.splitlines()
    assert f"{headless}: offset 3 where 0 was expected" in problems
    assert f"{headless}: the first record is not a SnapshotHeader control record" in problems


def _k(record_type: int, *parts: bytes) -> bytes:
    return struct.pack(">h", record_type) + b"".join(parts)


def _s(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


#: records that do not decode, each a different way in (frame, type, version, lengths, nulls, varints, tags)
MALFORMED = {
    "__cluster_metadata-0": [
        bytes([1, 20, 0, 0]),  # a good NoOpRecord
        bytes([1, 99, 0, 0]),  # unknown api key
        bytes([1, 2, 5, 0]),  # TopicRecord v5
        bytes([1, 2, 0, 7, 0x61]),  # truncated string
        bytes([1, 20, 0, 0, 0]),  # a byte of garbage after it
        bytes([0, 20, 0, 0]),  # frame version 0
        bytes([2, 20, 0, 0]),  # frame version 2
        bytes([1, 2, 0]) + b"\x00" + bytes(16) + b"\x00",  # null non-nullable string
        bytes([1, 3, 0, 0, 0, 0, 1]) + bytes(16) + b"\xff\xff\xff\xff\x0f",  # a huge array length
        bytes([1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),  # a varint too long
        bytes([1, 0x80, 0x80, 0x04, 0]),  # type too large
        bytes([1, 12, 0]) + b"\x02a" + b"\x00\x01" + b"\x01\x07\x02ab",  # an unknown tag (kept)
        b"",  # nothing at all
    ],
    "__consumer_offsets-0": [
        (_k(99, _s(b"g")), b"\x00\x00"),  # unknown record type
        (_k(2, _s(b"g")), struct.pack(">h", 9) + b"x"),  # a value version past the schema's
        (_k(2, _s(b"g")), b"\x00\x00\x00"),  # truncated value
        (_k(1), None),  # truncated key
        (_k(2, _s(b"g"), b"zz"), None),  # bytes after the key (ignored, as Kafka does)
        (_k(2, struct.pack(">h", 50) + b"ab"), None),  # string longer than the key
        (_k(2, struct.pack(">h", -1)), None),  # null group
        (_k(3, _s(b"g")), struct.pack(">h", 0) + b"\x00\x00\x00\x01\x05\x00"),  # tagged count past the end
        (_k(3, _s(b"g")), struct.pack(">h", 0) + b"\x00\x00\x00\x01" + b"\xff\xff\xff\xff\xff\x01"),  # varint
        (_k(4, _s(b"g")), struct.pack(">h", 0) + b"\x02" + bytes(10)),  # a short uuid
        (b"\x00", b"\x00"),  # no key version
    ],
}


@needs_oracle
@pytest.mark.parametrize("part", sorted(MALFORMED))
def test_malformed_records_print_what_kafka_prints(tmp_path: Path, part: str) -> None:
    """Kafka's own dump of records that do not decode (``decode-... --text`` runs DumpLogSegments.main): every line
    equal, ours from typed errors, never an exception."""
    records = [(None, r) if isinstance(r, bytes) else r for r in MALFORMED[part]]
    log = tmp_path / part / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(build_batch(records, base_offset=0, timestamp=1700000000000))
    command, option = (("decode-metadata", "--cluster-metadata-decoder") if part.startswith("__cluster")
                       else ("decode-offsets", "--offsets-decoder"))
    kafka = run_oracle(command, log, "--text").stdout.splitlines()
    result = _run(tmp_path, option, str(log))
    assert result.exit_code == 0
    ours = result.stdout.splitlines()
    assert [line for line in ours if line.startswith("|")] == [line for line in kafka if line.startswith("|")]
    assert sum(line.startswith("|") for line in ours) == len(records)

"""Offset checkpoints and leader-epoch checkpoints: Kafka's golden files, malformed input, round trips."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.checkpoint import (
    EpochEntry,
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from kafkalog.errors import CorruptCheckpointError
from kafkalog.names import parse_partition_dir
from tests.conftest import GOLDEN, needs_golden


def partition_manifests() -> Iterator[tuple[dict, Path]]:
    """Every partition manifest under golden with the partition dir it describes."""
    if GOLDEN is None:
        return
    for m in sorted((GOLDEN / "manifests").glob("golden-*.json")):
        data = json.loads(m.read_text())
        yield data, GOLDEN / "logdir" / data["dir"]
    for m in sorted((GOLDEN / "legacy" / "manifests").glob("*.json")):
        data = json.loads(m.read_text())
        yield data, GOLDEN / "legacy" / "logdir" / data["dir"]
    for group in ("unclean", "loader"):
        for m in sorted((GOLDEN / group / "manifests").glob("*.json")):
            stage = m.name.split(".")[-2]
            if stage in ("input", "recovered"):
                data = json.loads(m.read_text())
                yield data, GOLDEN / group / stage / data["dir"]


# --- offset checkpoints ----------------------------------------------------------------------------------------

ROOT_CHECKPOINTS = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"]


@needs_golden
@pytest.mark.parametrize("name", ROOT_CHECKPOINTS)
def test_golden_offset_checkpoints(golden: Path, name: str, tmp_path: Path) -> None:
    manifest = json.loads((golden / "manifests" / "_logdir-root.json").read_text())[name]
    path = golden / "logdir" / name
    offsets = read_offset_checkpoint(path)
    expected = {}
    for dirname, offset in manifest["offsets"].items():
        tp = parse_partition_dir(dirname)
        expected[(tp.topic, tp.partition)] = offset
    assert offsets == expected
    # Kafka wrote these in sorted order here, so re-writing gives the same bytes.
    assert format_offset_checkpoint(offsets) == path.read_bytes() == manifest["text"].encode()
    out = tmp_path / name
    write_offset_checkpoint(out, offsets)
    assert out.read_bytes() == path.read_bytes()


def test_order_is_sorted_by_default_and_kept_on_request() -> None:
    offsets = {("b", 1): 5, ("a", 10): 1, ("a", 2): 7}
    assert format_offset_checkpoint(offsets) == b"0\n3\na 2 7\na 10 1\nb 1 5\n"
    assert format_offset_checkpoint(offsets, sort=False) == b"0\n3\nb 1 5\na 10 1\na 2 7\n"
    assert format_offset_checkpoint([("z", 0, 1), ("y", 0, 2)], sort=False) == b"0\n2\nz 0 1\ny 0 2\n"
    assert format_offset_checkpoint({}) == b"0\n0\n"


def test_empty_file_is_an_empty_checkpoint(tmp_path: Path) -> None:
    # Kafka's CheckpointFile creates the file empty before the first write.
    (tmp_path / "cp").write_bytes(b"")
    assert read_offset_checkpoint(tmp_path / "cp") == {}
    assert read_leader_epoch_checkpoint(tmp_path / "cp") == []


def test_missing_file_is_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_offset_checkpoint(tmp_path / "nope")


def test_tolerated_like_kafka() -> None:
    # several spaces/tabs between fields, trailing blanks, CRLF line ends, explicit '+' sign: Java accepts all
    assert parse_offset_checkpoint(b"0\r\n2\r\nt  0\t5 \r\nu 1 +6\r\n") == {("t", 0): 5, ("u", 1): 6}
    # the last entry wins for a repeated partition (Kafka fills a map); the count is of lines
    assert parse_offset_checkpoint(b"0\n2\nt 0 5\nt 0 6\n") == {("t", 0): 6}
    # no final newline
    assert parse_offset_checkpoint(b"0\n1\nt 0 5") == {("t", 0): 5}
    # negative offsets fit a Java long
    assert parse_offset_checkpoint(b"0\n1\nt 0 -1\n") == {("t", 0): -1}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"1\n0\n", "unrecognised version 1"),
        (b"x\n0\n", "non-numeric version"),
        (b" 0\n0\n", "non-numeric version"),
        (b"0\n", "entry count line is missing"),
        (b"0\nx\n", "non-numeric entry count"),
        (b"0\n-1\n", "negative entry count"),
        (b"0\n2\nt 0 5\n", r"expected \[2\] entries .* found \[1\]"),
        (b"0\n1\nt 0 5\nu 0 6\n", r"expected \[1\] entries .* found \[2\]"),
        (b"0\n0\n\n", "expected 3 fields"),
        (b"0\n1\nt 0\n", "expected 3 fields"),
        (b"0\n1\nt 0 5 9\n", "expected 3 fields"),
        (b"0\n1\n t 0 5\n", "expected 3 fields"),  # Java's split gives a leading empty field
        (b"0\n1\nt x 5\n", "non-numeric partition"),
        (b"0\n1\nt -1 5\n", "partition -1 out of range"),
        (b"0\n1\nt 2147483648 5\n", "out of range"),
        (b"0\n1\nt 0 5x\n", "non-numeric offset"),
        (b"0\n1\nt 0 9223372036854775808\n", "out of range"),
        (b"0\n1\nt 0 1_000\n", "non-numeric offset"),
        (b"0\n1\n../etc 0 5\n", "invalid topic"),
        (b"0\n1\na/b 0 5\n", "invalid topic"),
        (b"0\n1\n" + b"a" * 250 + b" 0 5\n", "invalid topic"),
        (b"0\n1\nt\x000 0 5\n", "invalid topic"),
        (b"0\n1\n\xff 0 5\n", "not UTF-8"),
        (b"0\n99999999999\n", "out of range"),
    ],
)
def test_malformed_offset_checkpoints(data: bytes, match: str, tmp_path: Path) -> None:
    with pytest.raises(CorruptCheckpointError, match=match):
        parse_offset_checkpoint(data)
    (tmp_path / "cp").write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as info:
        read_offset_checkpoint(tmp_path / "cp")
    assert str(tmp_path / "cp") in str(info.value)  # the message names the file


@pytest.mark.parametrize(
    "bad", [{("a b", 0): 1}, {("t", -1): 1}, {("t", 0): 2**63}, {("t", 0): "5"}, {("t", True): 1}, {("", 0): 1}]
)
def test_write_refuses_bad_entries(bad: dict, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_offset_checkpoint(tmp_path / "cp", bad)
    assert not (tmp_path / "cp").exists()


topics = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=30).filter(lambda t: t not in (".", ".."))
offset_maps = st.dictionaries(
    st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=30
)


@given(offset_maps)
def test_offset_checkpoint_round_trip(offsets: dict) -> None:
    data = format_offset_checkpoint(offsets)
    assert parse_offset_checkpoint(data) == offsets
    assert format_offset_checkpoint(parse_offset_checkpoint(data)) == data


@given(st.binary(max_size=200))
def test_offset_checkpoint_never_crashes_on_garbage(data: bytes) -> None:
    try:
        parse_offset_checkpoint(data)
    except CorruptCheckpointError:
        pass


# --- leader-epoch checkpoints ------------------------------------------------------------------------------------


@needs_golden
def test_golden_leader_epoch_checkpoints(tmp_path: Path) -> None:
    checked = refused = 0
    for manifest, pdir in partition_manifests():
        info = manifest.get("leaderEpochCheckpoint")
        if info is None:
            continue
        path = pdir / info["file"]
        if "readError" in info:
            # Kafka refused this file: so must we, with a typed error
            with pytest.raises(CorruptCheckpointError, match="malformed line"):
                read_leader_epoch_checkpoint(path)
            refused += 1
            continue
        entries = read_leader_epoch_checkpoint(path)
        assert entries == [EpochEntry(e["epoch"], e["startOffset"]) for e in info["entries"]], path
        assert format_leader_epoch_checkpoint(entries) == path.read_bytes(), path
        out = tmp_path / "leader-epoch-checkpoint"
        write_leader_epoch_checkpoint(out, entries)
        assert out.read_bytes() == path.read_bytes()
        checked += 1
    assert checked >= 25 and refused == 2


@needs_golden
def test_kafka_malformed_epoch_checkpoint_is_refused(golden: Path) -> None:
    path = golden / "loader" / "input" / "loader-epoch-checkpoint-malformed-0" / "leader-epoch-checkpoint"
    assert path.read_bytes() == b"0\n4\n0 0\n1 142 7\n3 248\n4 360\n"
    with pytest.raises(CorruptCheckpointError, match=r"malformed line .*'1 142 7'") as info:
        read_leader_epoch_checkpoint(path)
    assert info.value.path == path


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"1\n0\n", "unrecognised version"),
        (b"0\n", "count line is missing"),
        (b"0\n1\n", r"expected \[1\] entries"),
        (b"0\n1\n5\n", "expected 2 fields"),
        (b"0\n1\n5 0 1\n", "expected 2 fields"),
        (b"0\n1\nx 0\n", "non-numeric epoch"),
        (b"0\n1\n2147483648 0\n", "epoch 2147483648 out of range"),
        (b"0\n1\n0 y\n", "non-numeric start offset"),
        (b"0\n1\n0 0\ngarbage\n", "expected 2 fields"),
    ],
)
def test_malformed_leader_epoch_checkpoints(data: bytes, match: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=match):
        parse_leader_epoch_checkpoint(data)


def test_leader_epoch_write_format(tmp_path: Path) -> None:
    write_leader_epoch_checkpoint(tmp_path / "l", [EpochEntry(5, 0), (6, 141)])
    assert (tmp_path / "l").read_bytes() == b"0\n2\n5 0\n6 141\n"
    with pytest.raises(ValueError):
        format_leader_epoch_checkpoint([(2**31, 0)])


@given(st.lists(st.builds(EpochEntry, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=40))
def test_leader_epoch_round_trip(entries: list[EpochEntry]) -> None:
    data = format_leader_epoch_checkpoint(entries)
    assert parse_leader_epoch_checkpoint(data) == entries

"""names.py: segment file names, topic validation (Kafka's TopicTest cases + traversal), partition dirs, uuids."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog import names
from kafkalog.errors import InvalidPartitionDirError, InvalidTopicError
from kafkalog.metadata.snapshot import parse_snapshot_name
from kafkalog.names import (
    LOST_DIRECTORY_ID,
    MIGRATING_DIRECTORY_ID,
    UNASSIGNED_DIRECTORY_ID,
    TopicPartitionDir,
    base64url_to_uuid_bytes,
    base_offset_prefix,
    delete_dir_name,
    file_name,
    future_dir_name,
    offset_from_file_name,
    parse_partition_dir,
    parse_segment_file_name,
    partition_dir_name,
    random_directory_id,
    random_uuid_base64,
    stray_dir_name,
    uuid_to_base64url,
    validate_topic,
)
from tests.conftest import GOLDEN, needs_golden

# --- segment files ---------------------------------------------------------------------------------------------


def test_file_name_pads_to_20_digits() -> None:
    assert file_name("/d", 42, ".log") == Path("/d/00000000000000000042.log")
    assert file_name("/d", 0, ".index") == Path("/d/00000000000000000000.index")
    assert file_name("d", 2**63 - 1, ".log.deleted").name == "09223372036854775807.log.deleted"


@pytest.mark.parametrize("bad", [-1, 2**63, 1.0, True, "5"])
def test_file_name_rejects_bad_offsets(bad: object) -> None:
    with pytest.raises(ValueError):
        file_name("/d", bad, ".log")  # type: ignore[arg-type]


@pytest.mark.parametrize("suffix", ["log", "/../x", ".log\0"])
def test_file_name_rejects_bad_suffixes(suffix: str) -> None:
    with pytest.raises(ValueError):
        file_name("/d", 1, suffix)


@pytest.mark.parametrize(
    ("name", "offset", "suffix", "temp"),
    [
        ("00000000000000000042.log", 42, ".log", ""),
        ("00000000000000000042.index", 42, ".index", ""),
        ("00000000000000000042.timeindex", 42, ".timeindex", ""),
        ("00000000000000000042.txnindex", 42, ".txnindex", ""),
        ("00000000000000000432.snapshot", 432, ".snapshot", ""),
        ("00000000000000000000.log.deleted", 0, ".log", ".deleted"),
        ("00000000000000000016.snapshot.deleted", 16, ".snapshot", ".deleted"),
        ("00000000000000000000.index.swap", 0, ".index", ".swap"),
        ("00000000000000000007.txnindex.cleaned", 7, ".txnindex", ".cleaned"),
    ],
)
def test_parse_segment_file_names(name: str, offset: int, suffix: str, temp: str) -> None:
    parsed = parse_segment_file_name(name)
    assert parsed is not None and (parsed.offset, parsed.suffix, parsed.temp_suffix) == (offset, suffix, temp)
    assert parsed.name == name
    assert offset_from_file_name(name) == offset
    assert offset_from_file_name(Path("/x") / name) == offset


@pytest.mark.parametrize(
    "name",
    [
        ".lock",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "0000000000000000042.log",  # 19 digits
        "000000000000000000042.log",  # 21 digits
        "00000000000000000042.log.tmp",
        "00000000000000000042.logx",
        "00000000000000000042.deleted",
        "99999999999999999999.log",  # > Long.MAX
        "00000000000000000042.log\n",
    ],
)
def test_non_segment_names(name: str) -> None:
    assert parse_segment_file_name(name) is None
    with pytest.raises(ValueError):
        offset_from_file_name(name)


@needs_golden
def test_every_golden_file_name_parses() -> None:
    assert GOLDEN is not None
    seen = 0
    for p in GOLDEN.rglob("*"):
        if p.is_file() and p.name[:1].isdigit():
            if p.suffix == ".checkpoint":  # a KRaft snapshot, named <offset>-<epoch>.checkpoint
                assert parse_snapshot_name(p.name) is not None, p
                continue
            if names._TIERED_STEM.match(p.name.split(".")[0]):  # a tiered object: <offset>-<segment id>.<kind>
                assert base_offset_prefix(p.name) == int(p.name[:20]), p
                continue
            parsed = parse_segment_file_name(p.name)
            assert parsed is not None, p
            assert file_name(p.parent, parsed.offset, parsed.suffix + parsed.temp_suffix) == p
            seen += 1
    assert seen > 500


@given(st.integers(0, 2**63 - 1), st.sampled_from(names.FILE_SUFFIXES), st.sampled_from(("",) + names.TEMP_SUFFIXES))
def test_file_name_round_trip(offset: int, suffix: str, temp: str) -> None:
    p = file_name("/d", offset, suffix + temp)
    parsed = parse_segment_file_name(p.name)
    assert parsed is not None and (parsed.offset, parsed.suffix, parsed.temp_suffix) == (offset, suffix, temp)


# --- topic names -------------------------------------------------------------------------------------------------

# Kafka's TopicTest: valid and invalid names, plus the 249/250-character edge.
KAFKA_VALID = ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "a" * 249, "__consumer_offsets"]
KAFKA_INVALID = ["", "foo bar", "..", "foo:bar", "foo=bar", ".", "a" * 250]
TRAVERSAL = [
    "../etc",
    "..\\etc",
    "a/b",
    "/abs",
    "a\0b",
    "\0",
    "foo\n",
    "foo\r",
    "foo\t",
    "tópic",
    "topic\u2024",  # one-dot leader
    "ｔopic",  # fullwidth
    "a" * 10_000,
    "~",
    "$HOME",
    "a*",
]


@pytest.mark.parametrize("topic", KAFKA_VALID)
def test_valid_topics(topic: str) -> None:
    assert validate_topic(topic) == topic
    assert names.is_valid_topic(topic)


@pytest.mark.parametrize("topic", KAFKA_INVALID + TRAVERSAL)
def test_invalid_topics(topic: str) -> None:
    with pytest.raises(InvalidTopicError, match="Topic name is invalid"):
        validate_topic(topic)
    assert isinstance(InvalidTopicError("x"), ValueError)
    with pytest.raises(InvalidTopicError):
        partition_dir_name(topic, 0)


@pytest.mark.parametrize("topic", [None, 5, b"abc"])
def test_non_str_topic(topic: object) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(topic)


@given(st.text(max_size=300))
def test_valid_topic_can_never_escape_a_dir(topic: str) -> None:
    if names.is_valid_topic(topic):
        assert "/" not in topic and "\0" not in topic and topic not in (".", "..") and len(topic) <= 249
        d = Path("/logdir") / partition_dir_name(topic, 0)
        assert d.parent == Path("/logdir")


# --- partition dirs ------------------------------------------------------------------------------------------------

UID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("golden-none-0", TopicPartitionDir("golden-none", 0)),
        ("a-1", TopicPartitionDir("a", 1)),
        ("my-topic-2147483647", TopicPartitionDir("my-topic", 2147483647)),
        ("__consumer_offsets-49", TopicPartitionDir("__consumer_offsets", 49)),
        ("a-b-7", TopicPartitionDir("a-b", 7)),
        (f"topic-3.{UID}-delete", TopicPartitionDir("topic", 3, "delete", UID)),
        (f"topic-3.{UID}-future", TopicPartitionDir("topic", 3, "future", UID)),
        (f"topic-3.{UID}-stray", TopicPartitionDir("topic", 3, "stray", UID)),
        (f"t.x-0.{UID}-future", TopicPartitionDir("t.x", 0, "future", UID)),
        ("topic-delete-0", TopicPartitionDir("topic-delete", 0)),
    ],
)
def test_parse_partition_dir(name: str, expected: TopicPartitionDir) -> None:
    assert parse_partition_dir(name) == expected
    assert parse_partition_dir(Path("/logs") / name) == expected
    assert expected.name == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "topic",  # no '-'
        "-0",  # empty topic
        "topic-",  # empty partition
        "topic-x",
        "topic--1",  # '-' then partition "1" with topic "topic-" is valid... but "--1" must not give -1
        "topic-+1",
        "topic-01",  # non-canonical
        "topic-2147483648",
        "topic-0.abc-delete",  # uuid too short
        f"topic-0.{UID}x-delete",
        f"topic-0.{UID}-deleted",
        f"topic-0.{UID}",
        "topic-0-delete",
        "..-0",
        ".-0",
        "a b-0",
        "a/b-0",
        "../x-0",
        "a\0-0",
        "a" * 250 + "-0",
        ".lock",
        "meta.properties",
        "recovery-point-offset-checkpoint",
        "x" * 300,
        "topic-0\n",
        f"topic-0.{UID}-delete\n",
    ],
)
def test_parse_partition_dir_rejects(name: str) -> None:
    if name == "topic--1":
        # Kafka's split (last '-') gives topic "topic-" and partition 1; "-1" is never a partition
        assert parse_partition_dir(name) == TopicPartitionDir("topic-", 1)
        return
    with pytest.raises(InvalidPartitionDirError):
        parse_partition_dir(name)


@needs_golden
def test_golden_partition_dirs_parse() -> None:
    assert GOLDEN is not None
    dirs = [p for p in (GOLDEN / "logdir").iterdir() if p.is_dir()]
    dirs += [
        p for sub in ("unclean", "loader") for kind in ("input", "recovered") for p in (GOLDEN / sub / kind).iterdir()
    ]
    dirs += [p for p in (GOLDEN / "legacy" / "logdir").iterdir()]
    for d in dirs:
        parsed = parse_partition_dir(d)
        assert parsed.partition == 0 and parsed.kind == "" and parsed.name == d.name


@given(
    st.text(alphabet="abcXYZ019._-", min_size=1, max_size=249).filter(names.is_valid_topic),
    st.integers(0, 2**31 - 1),
)
def test_dir_names_round_trip(topic: str, partition: int) -> None:
    assert parse_partition_dir(partition_dir_name(topic, partition)) == TopicPartitionDir(topic, partition)
    fut = parse_partition_dir(future_dir_name(topic, partition))
    assert (fut.topic, fut.partition, fut.kind) == (topic, partition, "future") and len(fut.uuid or "") == 32
    for make, kind in ((delete_dir_name, "delete"), (stray_dir_name, "stray")):
        name = make(topic, partition)
        assert len(name) <= 255
        parsed = parse_partition_dir(name)
        assert parsed.kind == kind and parsed.partition == partition
        assert topic.startswith(parsed.topic)  # Kafka truncates long topics here


def test_delete_dir_truncates_long_topic_like_kafka() -> None:
    topic = "t" * 249
    name = delete_dir_name(topic, 12, unique_id=UID)
    suffix = f"-12.{UID}-delete"
    assert name == "t" * (255 - len(suffix)) + suffix and len(name) == 255
    assert future_dir_name(topic, 12, unique_id=UID) == f"{topic}-12.{UID}-future"  # not capped, as in Kafka
    assert delete_dir_name("short", 1, unique_id=UID) == f"short-1.{UID}-delete"


@pytest.mark.parametrize("bad", [-1, 2**31, True, "0"])
def test_partition_dir_name_rejects_bad_partition(bad: object) -> None:
    with pytest.raises(InvalidPartitionDirError):
        partition_dir_name("t", bad)  # type: ignore[arg-type]


def test_unique_id_must_be_32_hex() -> None:
    with pytest.raises(ValueError):
        future_dir_name("t", 0, unique_id="../../x")


# --- uuids -------------------------------------------------------------------------------------------------------


def test_reserved_ids() -> None:
    assert MIGRATING_DIRECTORY_ID == "AAAAAAAAAAAAAAAAAAAAAA"
    assert UNASSIGNED_DIRECTORY_ID == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert LOST_DIRECTORY_ID == "AAAAAAAAAAAAAAAAAAAAAg"
    assert names.ZERO_UUID == MIGRATING_DIRECTORY_ID and names.ONE_UUID == UNASSIGNED_DIRECTORY_ID
    for rid in (UNASSIGNED_DIRECTORY_ID, LOST_DIRECTORY_ID, MIGRATING_DIRECTORY_ID, uuid_to_base64url(99)):
        assert names.is_reserved_directory_id(rid)
    assert not names.is_reserved_directory_id(uuid_to_base64url(100))


def test_golden_ids_decode() -> None:
    assert base64url_to_uuid_bytes("T3JhY2xlRGlyZWN0MDAwMQ") == b"OracleDirect0001"
    assert base64url_to_uuid_bytes("dG9waWNJZAtnb2xkZW4ACw") == base64.urlsafe_b64decode("dG9waWNJZAtnb2xkZW4ACw==")
    assert base64url_to_uuid_bytes("T3JhY2xlRGlyZWN0MDAwMQ==") == b"OracleDirect0001"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "AAAA",
        "T3JhY2xlRGlyZWN0MDAwMQ=",
        "T3JhY2xlRGlyZWN0MDAwM+",
        "T3JhY2xlRGlyZWN0MDAwM/",
        "T3JhY2xlRGlyZWN0MDAwMR",
        "T3JhY2xlRGlyZWN0MDAwMQA",
        " T3JhY2xlRGlyZWN0MDAwMQ",
        "T3JhY2xlRGlyZWN0MDAwMQ\n",
        None,
        5,
    ],
)
def test_bad_uuid_text(bad: object) -> None:
    with pytest.raises(ValueError):
        base64url_to_uuid_bytes(bad)  # type: ignore[arg-type]


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw: bytes) -> None:
    text = uuid_to_base64url(raw)
    assert len(text) == 22 and base64url_to_uuid_bytes(text) == raw
    assert uuid_to_base64url(int.from_bytes(raw, "big")) == text
    assert uuid_to_base64url(uuid.UUID(bytes=raw)) == text


def test_random_ids_avoid_reserved_and_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # Force the generator through every refusal: zero, one, a leading '-', then a reserved directory id (5).
    seq = iter([bytes(16), (1).to_bytes(16, "big"), b"\xf8" + bytes(15), (5).to_bytes(16, "big"), b"\x12" * 16])
    monkeypatch.setattr(names._uuid, "uuid4", lambda: uuid.UUID(bytes=next(seq)))
    assert random_directory_id() == uuid_to_base64url(b"\x12" * 16)
    monkeypatch.undo()
    for _ in range(200):
        rid = random_directory_id()
        assert not rid.startswith("-") and not names.is_reserved_directory_id(rid)
        assert random_uuid_base64() not in names.RESERVED_UUIDS

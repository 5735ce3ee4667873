"""partition.metadata, meta.properties and the clean-shutdown marker: golden bytes, bad input, round trips."""

from __future__ import annotations

import json
import string
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.checkpoint import (
    CleanShutdownFile,
    MetaProperties,
    format_clean_shutdown,
    format_meta_properties,
    format_partition_metadata,
    generate_directory_id,
    parse_meta_properties,
    parse_partition_metadata,
    read_clean_shutdown,
    read_meta_properties,
    read_partition_metadata,
    write_clean_shutdown,
    write_meta_properties,
    write_partition_metadata,
)
from kafkalog.checkpoint.meta_properties import (
    java_date_string,
    java_properties_order,
    parse_java_date_comment,
    parse_java_properties,
)
from kafkalog.errors import CorruptCheckpointError
from kafkalog.names import is_reserved_directory_id, uuid_to_base64url
from tests.checkpoint.test_checkpoint_offsets import partition_manifests
from tests.conftest import needs_golden

# --- partition.metadata ------------------------------------------------------------------------------------------


@needs_golden
def test_golden_partition_metadata(tmp_path: Path) -> None:
    n = 0
    for manifest, pdir in partition_manifests():
        info = manifest["partitionMetadata"]
        path = pdir / info["file"]
        assert read_partition_metadata(path) == info["topicId"]
        assert parse_partition_metadata(path.read_bytes()).version == info["version"] == 0
        assert format_partition_metadata(info["topicId"]) == path.read_bytes()
        write_partition_metadata(tmp_path / "pm", info["topicId"])
        assert (tmp_path / "pm").read_bytes() == path.read_bytes()
        n += 1
    assert n == 35


TID = "dG9waWNJZAxnb2xkZW4ADA"


def test_partition_metadata_exact_bytes() -> None:
    assert format_partition_metadata(TID) == b"version: 0\ntopic_id: " + TID.encode()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "missing the 'version' line"),
        (b"version: 0", "missing the 'topic_id' line"),
        (b"version: 0\n", "missing the 'topic_id' line"),
        (b"version:0\ntopic_id: " + TID.encode(), "malformed line"),
        (b"versio: 0\ntopic_id: " + TID.encode(), "malformed line"),
        (b"version: x\ntopic_id: " + TID.encode(), "non-numeric version"),
        (b"version: -1\ntopic_id: " + TID.encode(), "out of range"),
        (b"version: 0\ntopicid: " + TID.encode(), "malformed line"),
        (b"version: 0\ntopic_id: abc", "malformed topic id"),
        (b"version: 0\ntopic_id: " + TID.encode() + b"x", "malformed topic id"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "zero uuid"),
        (b"version: 0\ntopic_id: " + TID.encode() + b"\ngarbage", "unexpected content"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_partition_metadata(data: bytes, match: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=match):
        parse_partition_metadata(data)


def test_partition_metadata_accepts_what_kafka_accepts() -> None:
    # a trailing newline, CRLF, a future version (Kafka reads it for downgrades), padded base64
    assert parse_partition_metadata(b"version: 0\r\ntopic_id: " + TID.encode() + b"\r\n").topic_id == TID
    assert parse_partition_metadata(b"version: 1\ntopic_id: " + TID.encode()).version == 1
    assert parse_partition_metadata(b"version: 0\ntopic_id: " + TID.encode() + b"==").topic_id == TID


@pytest.mark.parametrize("bad", ["", "AAAAAAAAAAAAAAAAAAAAAA", "x" * 22, "../../etc/passwd"])
def test_write_partition_metadata_refuses_bad_ids(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path / "pm", bad)


@given(st.binary(min_size=16, max_size=16).filter(lambda b: any(b)))
def test_partition_metadata_round_trip(raw: bytes) -> None:
    tid = uuid_to_base64url(raw)
    assert parse_partition_metadata(format_partition_metadata(tid)).topic_id == tid


# --- meta.properties ------------------------------------------------------------------------------------------------


@needs_golden
@pytest.mark.parametrize("rel", ["logdir/meta.properties", "extra/meta-v0/meta.properties"])
def test_golden_meta_properties(golden: Path, rel: str, tmp_path: Path) -> None:
    root = json.loads((golden / "manifests" / "_logdir-root.json").read_text())
    info = root["meta.properties" if rel.startswith("logdir") else rel]
    path = golden / rel
    raw = path.read_bytes()
    assert parse_java_properties(raw.decode("latin-1")) == info["raw"]
    meta = read_meta_properties(path)
    assert meta == MetaProperties(info["version"], info["clusterId"], info["nodeId"], info["directoryId"])
    # same content + the same date line = the same bytes, key order included
    when = parse_java_date_comment(raw.decode())
    assert when is not None
    assert format_meta_properties(meta, when=when) == raw
    write_meta_properties(tmp_path / "meta.properties", meta, when=when)
    assert (tmp_path / "meta.properties").read_bytes() == raw


def test_java_properties_order_matches_kafka_files() -> None:
    assert java_properties_order(["version", "cluster.id", "node.id", "directory.id"]) == [
        "node.id",
        "directory.id",
        "version",
        "cluster.id",
    ]
    assert java_properties_order(["version", "cluster.id", "broker.id"]) == ["broker.id", "version", "cluster.id"]


def test_java_date_string() -> None:
    when = datetime(2026, 11, 21, 5, 11, 25, tzinfo=timezone.utc)
    assert java_date_string(when) == "Sat Nov 21 05:11:25 UTC 2026"
    assert java_date_string(datetime(2024, 2, 3, 4, 5, 6)) == "Sat Feb 03 04:05:06 UTC 2024"


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n! other comment\n   \n"
        "a=1\nb:2\nc 3\nd   =   4  \n  e\t:\tfive\n"
        "f=line\\\n    continued\n"
        "g=\\u0041\\t\\=\\:\\#\n"
        "h\\ key=v\n"
        "empty=\n"
        "lonely\n"
        "a=override\r\n"
        "crlf=1\r"
    )
    assert parse_java_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "4  ",
        "e": "five",
        "f": "linecontinued",
        "g": "A\t=:#",
        "h key": "v",
        "empty": "",
        "lonely": "",
        "crlf": "1",
    }
    with pytest.raises(CorruptCheckpointError, match="uxxxx"):
        parse_java_properties("a=\\u12")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("version=1\ncluster.id=c\n", "node.id was not found"),
        ("version=1\nnode.id=1\n", "cluster.id was not found"),
        ("version=2\nnode.id=1\ncluster.id=c\n", "unknown meta.properties version"),
        ("version=x\n", "unknown meta.properties version"),
        ("version=1\nnode.id=one\ncluster.id=c\n", "node.id as a base-10 number"),
        ("version=1\nnode.id=2147483648\ncluster.id=c\n", "node.id as a base-10 number"),
        ("version=0\nbroker.id=\n", "broker.id as a base-10 number"),
        ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=nope\n", "directory.id as a Uuid"),
    ],
)
def test_malformed_meta_properties(text: str, match: str, tmp_path: Path) -> None:
    with pytest.raises(CorruptCheckpointError, match=match):
        parse_meta_properties(text.encode())
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(CorruptCheckpointError, match="meta.properties"):
        read_meta_properties(tmp_path / "meta.properties")


def test_meta_properties_v0_minimal() -> None:
    # version 0 needs nothing (Kafka's Builder): missing version means 0
    assert parse_meta_properties(b"") == MetaProperties(0)
    assert parse_meta_properties(b"broker.id=3\n") == MetaProperties(0, None, 3)


def test_meta_properties_constructor_checks() -> None:
    with pytest.raises(ValueError):
        MetaProperties(1, None, 1)
    with pytest.raises(ValueError):
        MetaProperties(3, "c", 1)
    with pytest.raises(ValueError):
        MetaProperties(1, "c", 1, "bad")


def test_generate_directory_id_never_reserved() -> None:
    ids = {generate_directory_id() for _ in range(500)}
    assert len(ids) == 500
    assert not any(is_reserved_directory_id(i) or i.startswith("-") for i in ids)


ascii_text = st.text(alphabet=string.printable, max_size=40)


@given(
    st.sampled_from([0, 1]),
    ascii_text,
    st.integers(-(2**31), 2**31 - 1),
    st.one_of(st.none(), st.binary(min_size=16, max_size=16).map(uuid_to_base64url)),
)
def test_meta_properties_round_trip(version: int, cluster_id: str, node_id: int, directory_id: str | None) -> None:
    meta = MetaProperties(version, cluster_id, node_id, directory_id)
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    data = format_meta_properties(meta, when=when)
    assert parse_meta_properties(data) == meta
    assert parse_java_date_comment(data.decode()) == when


# --- clean shutdown marker ------------------------------------------------------------------------------------------


@needs_golden
def test_golden_clean_shutdown(golden: Path, tmp_path: Path) -> None:
    raw = (golden / "logdir" / ".kafka_cleanshutdown").read_bytes()
    assert raw == b'{"version":0,"brokerEpoch":42}'
    state = read_clean_shutdown(golden / "logdir")
    assert state.exists and state.broker_epoch == 42 and state.error is None
    write_clean_shutdown(tmp_path, 42)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == raw


def test_clean_shutdown_lifecycle(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    assert not marker.exists() and marker.read() is None and not marker.read_state().exists
    marker.write(7)
    assert marker.exists() and marker.read() == 7
    marker.delete()
    assert not marker.exists()
    marker.delete()  # idempotent


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b'{"version":0}', b'{"brokerEpoch":"7"}', b'{"brokerEpoch":true}', b"\xff", b"x" * 10000],
)
def test_unreadable_marker_still_means_clean(content: bytes, tmp_path: Path) -> None:
    (tmp_path / ".kafka_cleanshutdown").write_bytes(content)
    state = read_clean_shutdown(tmp_path)
    assert state.exists and state.broker_epoch is None and state.error


def test_marker_tolerates_unknown_fields(tmp_path: Path) -> None:
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b'{"version":1,"brokerEpoch":-1,"extra":{}}')
    assert read_clean_shutdown(tmp_path).broker_epoch == -1


@given(st.integers(-(2**63), 2**63 - 1))
def test_clean_shutdown_format_round_trip(epoch: int) -> None:
    data = format_clean_shutdown(epoch)
    assert json.loads(data) == {"version": 0, "brokerEpoch": epoch}

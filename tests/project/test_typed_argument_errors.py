"""Bad arguments raise a typed error from kafkalog.errors that is still a ValueError / TypeError.

Each case calls a public function or constructor with bad input and checks both the specific kafkalog class
and the builtin base class generic callers catch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalog import errors as E
from kafkalog import names
from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile, format_clean_shutdown
from kafkalog.checkpoint.leader_epoch import format_leader_epoch_checkpoint
from kafkalog.checkpoint.meta_properties import MetaProperties
from kafkalog.checkpoint.offset_checkpoint import format_offset_checkpoint
from kafkalog.checkpoint.partition_metadata import format_partition_metadata
from kafkalog.log.epoch_cache import LeaderEpochFileCache
from kafkalog.log.producer_snapshot import ProducerSnapshotEntry, java_hashmap_order
from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.manager.assignments import parse_expected
from kafkalog.records.reader import BatchReader, open_source, read_batches
from kafkalog.records.scan import scan_batches
from kafkalog.records.varint import encode_varint, encode_varlong
from kafkalog.verify import verify_partition

DIR_ID = names.random_directory_id()
UNIQUE = "0123456789abcdef0123456789abcdef"


def _raises(call: Callable[[], object], cls: type[E.KafkaLogError], builtin: type[Exception]) -> None:
    """``call()`` raises exactly ``cls`` (not merely a base), which is a KafkaLogError and a ``builtin``."""
    with pytest.raises(cls) as info:
        call()
    assert type(info.value) is cls
    assert isinstance(info.value, E.KafkaLogError)
    assert isinstance(info.value, builtin)
    assert "\n" not in str(info.value)


def test_new_classes_keep_the_builtin_bases() -> None:
    assert issubclass(E.InvalidArgumentError, E.KafkaLogError) and issubclass(E.InvalidArgumentError, ValueError)
    assert issubclass(E.InvalidArgumentTypeError, E.KafkaLogError)
    assert issubclass(E.InvalidArgumentTypeError, TypeError)
    assert E.InvalidArgumentError.__doc__ and E.InvalidArgumentTypeError.__doc__


# --- kafkalog.names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: names.offset_to_name(-1), id="offset_to_name-negative"),
        pytest.param(lambda: names.offset_to_name(1 << 63), id="offset_to_name-too-big"),
        pytest.param(lambda: names.offset_to_name(True), id="offset_to_name-bool"),
        pytest.param(lambda: names.file_name("/d", 0, "log"), id="file_name-suffix"),
        pytest.param(lambda: names.file_name("/d", -5, ".log"), id="file_name-offset"),
        pytest.param(lambda: names.offset_from_file_name("/d/.lock"), id="offset_from_file_name"),
        pytest.param(lambda: names.uuid_to_base64url(1 << 128), id="uuid_to_base64url-int"),
        pytest.param(lambda: names.uuid_to_base64url(b"\x00" * 15), id="uuid_to_base64url-length"),
        pytest.param(lambda: names.base64url_to_uuid_bytes("not-a-uuid"), id="base64url_to_uuid_bytes"),
        pytest.param(lambda: names.base64url_to_uuid_bytes("AAAAAAAAAAAAAAAAAAAAAB"), id="base64url-noncanonical"),
    ],
)
def test_names_invalid_argument(call: Callable[[], object]) -> None:
    _raises(call, E.InvalidArgumentError, ValueError)


def test_uuid_from_wrong_type() -> None:
    _raises(lambda: names.uuid_to_base64url("abc"), E.InvalidArgumentTypeError, TypeError)  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [names.future_dir_name, names.delete_dir_name, names.stray_dir_name])
def test_dir_name_bad_unique_id(make: Callable[..., str]) -> None:
    assert make("t", 0, unique_id=UNIQUE).startswith("t-0.")
    _raises(lambda: make("t", 0, unique_id="ABC"), E.InvalidPartitionDirError, ValueError)


# --- kafkalog.manager.assignments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param({f"t-0.{UNIQUE}-delete": DIR_ID}, id="not-a-topic-partition"),
        pytest.param([{"topic": "t", "partition": 0}], id="missing-directoryId"),
        pytest.param([{"topic": "t", "partition": -1, "directoryId": DIR_ID}], id="bad-partition"),
        pytest.param("t-0", id="not-object-or-list"),
        pytest.param({"t-0": 7}, id="dir-id-not-string"),
        pytest.param({"t-0": "bogus"}, id="dir-id-malformed"),
    ],
)
def test_parse_expected_bad_document(doc: object) -> None:
    _raises(lambda: parse_expected(doc), E.InvalidArgumentError, ValueError)


# --- kafkalog.checkpoint ----------------------------------------------------------------------------------------


def test_atomic_write_takes_bytes(tmp_path: Path) -> None:
    target = tmp_path / "f"
    _raises(lambda: atomic_write(target, "text"), E.InvalidArgumentTypeError, TypeError)  # type: ignore[arg-type]
    assert not target.exists()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: format_clean_shutdown(1 << 63), id="clean-shutdown-epoch"),
        pytest.param(lambda: format_clean_shutdown(1, version=True), id="clean-shutdown-version"),
        pytest.param(lambda: format_leader_epoch_checkpoint([(1 << 31, 0)]), id="leader-epoch-epoch"),
        pytest.param(lambda: format_leader_epoch_checkpoint([(0, 1 << 63)]), id="leader-epoch-offset"),
        pytest.param(lambda: format_offset_checkpoint({("t", -1): 0}), id="offset-checkpoint-partition"),
        pytest.param(lambda: format_offset_checkpoint({("t", 0): 1 << 63}), id="offset-checkpoint-offset"),
        pytest.param(lambda: format_partition_metadata(names.ZERO_UUID), id="partition-metadata-zero-uuid"),
        pytest.param(lambda: format_partition_metadata("nope"), id="partition-metadata-malformed"),
        pytest.param(lambda: MetaProperties(2), id="meta-properties-version"),
        pytest.param(lambda: MetaProperties(1, cluster_id="c"), id="meta-properties-v1-no-node"),
        pytest.param(lambda: MetaProperties(0, node_id=1 << 31), id="meta-properties-node-id"),
        pytest.param(lambda: MetaProperties(0, directory_id="nope"), id="meta-properties-directory-id"),
    ],
)
def test_checkpoint_invalid_argument(call: Callable[[], object]) -> None:
    _raises(call, E.InvalidArgumentError, ValueError)


def test_clean_shutdown_write_bad_epoch(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    _raises(lambda: marker.write(-(1 << 63) - 1, sync=False), E.InvalidArgumentError, ValueError)
    assert not marker.exists()


def test_offset_checkpoint_bad_topic_keeps_its_class() -> None:
    _raises(lambda: format_offset_checkpoint({("../x", 0): 0}), E.InvalidTopicError, ValueError)


# --- kafkalog.records -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: encode_varint(1 << 31), id="encode_varint"),
        pytest.param(lambda: encode_varlong(-(1 << 63) - 1), id="encode_varlong"),
        pytest.param(lambda: BatchReader(b"", position=1), id="BatchReader-position"),
        pytest.param(lambda: read_batches(b"\x00" * 8, position=-1), id="read_batches-position"),
        pytest.param(lambda: scan_batches(b"\x00" * 8, position=9), id="scan_batches-position"),
    ],
)
def test_records_invalid_argument(call: Callable[[], object]) -> None:
    _raises(call, E.InvalidArgumentError, ValueError)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: open_source(42), id="open_source"),
        pytest.param(lambda: read_batches(42), id="read_batches"),
        pytest.param(lambda: scan_batches(42), id="scan_batches"),
    ],
)
def test_records_wrong_source_type(call: Callable[[], object]) -> None:
    _raises(call, E.InvalidArgumentTypeError, TypeError)


# --- kafkalog.log -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: ProducerSnapshotEntry(1 << 63, 0, 0, 0, 0, 0), id="snapshot-entry-producer-id"),
        pytest.param(lambda: ProducerSnapshotEntry(1, 1 << 15, 0, 0, 0, 0), id="snapshot-entry-epoch"),
        pytest.param(lambda: java_hashmap_order([], capacity=24), id="java_hashmap_order-capacity"),
        pytest.param(lambda: LeaderEpochFileCache(None).assign(-1, 0), id="epoch-cache-assign-epoch"),
        pytest.param(lambda: LeaderEpochFileCache(None).assign(0, -1), id="epoch-cache-assign-offset"),
        pytest.param(lambda: LeaderEpochFileCache(None, entries=[(-2, 0)]), id="epoch-cache-init-entries"),
        pytest.param(lambda: LeaderEpochFileCache(None).assign_all([(0, -5)]), id="epoch-cache-assign_all"),
    ],
)
def test_log_invalid_argument(call: Callable[[], object]) -> None:
    _raises(call, E.InvalidArgumentError, ValueError)


def test_producer_state_update_no_producer_id(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, clock=lambda: 0)
    info = psm.prepare_update(-1)
    _raises(lambda: psm.update(info), E.InvalidArgumentError, ValueError)
    assert -1 not in psm.producers


# --- kafkalog.verify --------------------------------------------------------------------------------------------


def test_verify_partition_needs_segments() -> None:
    _raises(lambda: verify_partition([]), E.InvalidArgumentError, ValueError)

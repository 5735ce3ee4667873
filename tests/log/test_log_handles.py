"""A handle replaced by a KIP-113 move raises LogMovedError; partitions of a dir that fails before it can be
listed count in OfflineReplicaCount once the manager knows the placement; a missing leader-epoch-checkpoint is
created (empty) at load, as Kafka's CheckpointFile does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, LogMovedError
from kafkalog.log import Log
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager
from tests.conftest import GOLDEN, needs_golden
from tests.log.test_log_golden import _writable_copy
from tests.manager.test_jbod_move import _hook

CFG = LogConfig.from_properties({"segment.bytes": 2000, "index.interval.bytes": 200})


def test_a_handle_kept_across_a_replica_move_raises_log_moved(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        m.get_or_create_log("t", 0)
        src_dir = m.log_dir_of("t", 0)
        target = str(b) if src_dir == str(a) else str(a)
        for i in range(30):
            m.append("t", 0, [(f"{i}".encode(), b"v" * 50)])
        old = m.get_log("t", 0)
        futures = []

        def hook(key, step) -> None:  # noqa: ANN001 - the mover's step hook
            if step == "caught_up":
                futures.append(m.get_log("t", 0, is_future=True))

        _hook(m, hook)
        assert m.alter_replica_log_dir("t", 0, target, wait=True).state == "completed"
        (future,) = futures
        with pytest.raises(LogMovedError):
            future.read(0)  # the future handle was promoted: fetch the current log
        for call in (lambda: old.read(0), lambda: old.offset_for_timestamp(0), lambda: old.flush()):
            with pytest.raises(LogMovedError) as info:
                call()
            assert not isinstance(info.value, KafkaStorageError)
            assert info.value.new_dir == str(Path(target) / "t-0")
        new = m.get_log("t", 0)
        assert new is not old and [r.key for r in new.read(0)[0].records()][:1] == [b"0"]
        assert m.metrics()["OfflineReplicaCount"] == 0


def test_a_closed_log_still_raises_storage_error(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    log.close()
    with pytest.raises(KafkaStorageError):
        log.read(0)


def test_offline_replica_count_includes_a_dir_failing_at_startup(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        placed = {}
        for p in range(4):
            m.get_or_create_log("t", p)
            placed[("t", p)] = m.log_dir_of("t", p)
    failed = next(d for d in (str(a), str(b)) if list(placed.values()).count(d) >= 1)
    held = sorted(k for k, d in placed.items() if d == failed)
    (tmp_path / "dead").mkdir()
    Path(failed).rename(tmp_path / "dead" / "x")
    Path(failed).write_text("not a dir")  # listing fails: nothing on disk tells which partitions it held
    m = LogManager([a, b], log_config=CFG)
    m.expect_partitions(placed)
    events = []
    m.add_listener(events.append)
    m.startup()
    try:
        assert failed in m.offline_log_dirs
        assert m.metrics()["OfflineReplicaCount"] == len(held)
        assert m.offline_partitions()[failed] == tuple(held)
        assert [tuple(ev.partitions) for ev in (events or m.events)] == [tuple(held)]
    finally:
        m.shutdown()


def test_placement_learned_after_startup_counts_too(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.write_text("not a dir")
    with LogManager([a, b], log_config=CFG) as m:
        assert m.metrics()["OfflineReplicaCount"] == 0
        m.expect_partitions({("t", 0): str(b), ("t", 1): str(a)})
        assert m.metrics()["OfflineReplicaCount"] == 1  # t-1 is expected in a live dir: not offline
        assert m.offline_partitions()[str(b)] == (("t", 0),)


@needs_golden
def test_missing_leader_epoch_checkpoint_is_created_empty(tmp_path: Path) -> None:
    assert GOLDEN is not None
    d = _writable_copy(GOLDEN / "logdir" / "golden-segments-0", tmp_path / "golden-segments-0")
    (d / "leader-epoch-checkpoint").unlink()
    with Log.open(d, {"segment.bytes": 4096}) as log:
        assert (d / "leader-epoch-checkpoint").read_bytes() == b""  # Kafka's CheckpointFile: Files.createFile
        assert log.leader_epoch_cache.entries() == []
    # after an unclean load, recovery assigns the epochs found in the batches, as Kafka's would
    (d / "leader-epoch-checkpoint").unlink()
    with Log.open(d, {"segment.bytes": 4096}, clean_shutdown=False, recovery_point=0) as log:
        expected = (GOLDEN / "logdir" / "golden-segments-0" / "leader-epoch-checkpoint").read_text()
        assert (d / "leader-epoch-checkpoint").read_text() == expected


@needs_golden
def test_legacy_format_logs_get_no_epoch_checkpoint(tmp_path: Path) -> None:
    """Kafka keeps no leader-epoch cache for a log whose message.format.version predates v2 (the golden legacy
    dirs have no checkpoint file), so none is created."""
    assert GOLDEN is not None
    d = _writable_copy(GOLDEN / "legacy" / "logdir" / "legacy-v1-none-0", tmp_path / "legacy-v1-none-0")
    with Log.open(d, {"message.format.version": "0.10.2"}):
        pass
    assert not (d / "leader-epoch-checkpoint").exists()

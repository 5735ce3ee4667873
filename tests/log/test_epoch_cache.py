"""LeaderEpochFileCache: Kafka's assign / truncation / endOffsetFor rules and the checkpoint file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import CorruptCheckpointError
from kafkalog.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache


def _pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [tuple(e) for e in cache.entries()]


def test_assign_rules_and_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, higher offset: no change
    assert cache.assign(2, 10)
    assert cache.assign(2, 8)  # same latest epoch at a lower offset replaces it
    assert _pairs(cache) == [(0, 0), (2, 8)]
    assert path.read_text() == "0\n2\n0 0\n2 8\n"
    # a lower epoch or a start offset at/below existing ones truncates the conflicting tail
    assert cache.assign(1, 8)
    assert _pairs(cache) == [(0, 0), (1, 8)]
    assert _pairs(LeaderEpochFileCache(path)) == [(0, 0), (1, 8)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_truncation_from_end_and_start(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, start in [(0, 0), (1, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    assert cache.truncate_from_end(25) == [(4, 30)]
    assert _pairs(cache) == [(0, 0), (1, 10), (3, 20)]
    assert cache.truncate_from_end(100) == []
    cache.truncate_from_start(15)
    assert _pairs(cache) == [(1, 15), (3, 20)]
    cache.truncate_from_start(20)
    assert _pairs(cache) == [(3, 20)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n3 20\n"


def test_end_offset_for_and_epoch_for_offset(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(None)
    for epoch, start in [(1, 5), (3, 20), (6, 40)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(6, 99) == (6, 99)
    assert cache.end_offset_for(3, 99) == (3, 40)
    assert cache.end_offset_for(4, 99) == (3, 40)
    assert cache.end_offset_for(0, 99) == (0, 5)
    assert cache.end_offset_for(7, 99) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 99) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert [cache.epoch_for_offset(o) for o in (0, 5, 19, 20, 100)] == [None, 1, 1, 3, 6]
    assert cache.latest_epoch == 6 and cache.previous_epoch() == 3 and cache.next_epoch(3) == 6
    assert [tuple(e) for e in cache.epoch_entries_in_range(10, 40)] == [(1, 10), (3, 20)]


def test_malformed_checkpoint_raises(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n1 5 7\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochFileCache(path)

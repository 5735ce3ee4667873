"""A startup stopped by a process limit (EMFILE) is no dir's failure: the clean-shutdown markers stay, so the retry
loads as cleanly as the first try would have, and the operator reads one warning, not one per partition."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile
from kafkalog.errors import ResourceExhaustedError
from kafkalog.log.config import LogConfig
from kafkalog.manager import CheckStatus, LogManager

CFG = LogConfig.from_properties({"segment.bytes": 600, "index.interval.bytes": 100})
PROPS = {"sanity.check.all.logs.enabled": "false", "num.recovery.threads.per.data.dir": 2}
PARTITIONS = 30


def _make(dirs: list[Path], partitions: int = PARTITIONS) -> None:
    with LogManager(dirs, log_config=CFG, properties=PROPS) as m:
        for p in range(partitions):
            m.get_or_create_log("t", p)
            for i in range(12):
                m.append("t", p, [(b"k%d" % i, b"v" * 80)])
    for d in dirs:
        assert CleanShutdownFile(d).exists()


def _emfile_in_partitions(monkeypatch: pytest.MonkeyPatch, first: int) -> None:
    """Every open of a file inside partition ``t-N`` (N >= ``first``) fails with EMFILE, as under a descriptor
    limit that eviction cannot relieve."""
    real = os.open

    def fake(path: object, *a: object, **k: object) -> int:
        parent = os.path.basename(os.path.dirname(os.fspath(path)))  # type: ignore[arg-type]
        if parent.startswith("t-") and parent[2:].isdigit() and int(parent[2:]) >= first:
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(path))  # type: ignore[arg-type]
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake)


def test_emfile_at_startup_keeps_the_marker_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    _make(dirs)
    _emfile_in_partitions(monkeypatch, first=5)
    with caplog.at_level(logging.WARNING):
        m = LogManager(dirs, log_config=CFG, properties=PROPS)
        with pytest.raises(ResourceExhaustedError) as info:
            m.startup()
    assert info.value.errno == errno.EMFILE and info.value.retriable
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "process limit" in warnings[0].getMessage()
    assert m.offline_log_dirs == []
    for d in dirs:  # kept: the retry must not run a full unclean recovery because of a descriptor limit
        assert CleanShutdownFile(d).exists(), d
    monkeypatch.undo()

    with LogManager(dirs, log_config=CFG, properties=PROPS) as m:  # the retry, with descriptors to spare
        assert all(d.had_clean_shutdown for d in m._registry.dirs.values())
        states = m.sanity_check_states()
        assert len(states) == PARTITIONS
        # a clean (lazy) load: inactive segments wait for their check; an unclean one would have checked them all
        assert {s.status for s in states.values()} == {CheckStatus.PENDING}
        for p in range(PARTITIONS):
            log = m.get_log("t", p)
            keys = [r.key for b in m.read("t", p, 0, 1 << 20) for r in b.records()]
            assert log.log_end_offset == 12 and keys[:1] == [b"k0"]


def test_a_crash_during_load_still_counts_as_unclean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's rule stays (KAFKA-10471): the marker is deleted before loading, so a load that dies without the
    manager's orderly abort (here: a non-limit error) leaves no marker."""
    dirs = [tmp_path / "a"]
    _make(dirs, partitions=10)
    real = os.open

    def fake(path: object, *a: object, **k: object) -> int:
        if os.path.basename(os.path.dirname(os.fspath(path))) == "t-7":  # type: ignore[arg-type]
            raise RuntimeError("test: the process dies mid-load")
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", fake)
    with pytest.raises(RuntimeError):
        LogManager(dirs, log_config=CFG, properties=PROPS).startup()
    assert not CleanShutdownFile(dirs[0]).exists()

"""The one OSError funnel: each errno class, and what a LogManager does with it.

Disk errors take the dir offline (as before); process limits (EMFILE, ENFILE, ENOMEM, mmap's EAGAIN) raise the
typed, retriable ``ResourceExhaustedError`` and leave the dir online; bad input (a missing file in a dir that
exists, a refused symlink) is told apart from a vanished dir.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from kafkalog_cli.main import EXIT_USAGE
from kafkalog_cli.main import classify as cli_classify

from kafkalog.errors import KafkaStorageError, ResourceExhaustedError
from kafkalog.io.oserrors import OSErrorClass, classify, is_resource_exhaustion, resource_error
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager import LogManager
from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.sanity_checker import is_corruption

CFG = LogConfig.from_properties({"segment.bytes": 2000, "index.interval.bytes": 100})
BROKER = {"log.retention.check.interval.ms": 10**9, "log.flush.offset.checkpoint.interval.ms": 10**9,
          "log.flush.start.offset.checkpoint.interval.ms": 10**9}


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.ENOBUFS])
def test_process_limits_are_resource_errors(code: int) -> None:
    exc = OSError(code, os.strerror(code))
    assert classify(exc) is OSErrorClass.RESOURCE
    assert is_resource_exhaustion(exc)
    err = resource_error(exc, "opening a segment")
    assert isinstance(err, ResourceExhaustedError) and err.retriable and err.errno == code
    assert not isinstance(err, (OSError, KafkaStorageError))
    assert classify(err) is OSErrorClass.RESOURCE


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                                  errno.ESTALE, errno.EBADF])
def test_device_errors_are_disk_errors(code: int) -> None:
    assert classify(OSError(code, os.strerror(code))) is OSErrorClass.DISK
    assert classify(KafkaStorageError("wrapped").with_traceback(None)) is None  # no OSError behind it
    wrapped = KafkaStorageError("wrapped")
    wrapped.__cause__ = OSError(code, "x")
    assert classify(wrapped) is OSErrorClass.DISK


def test_unknown_errno_is_a_disk_error() -> None:
    assert classify(OSError(errno.EXDEV, "cross-device")) is OSErrorClass.DISK


@pytest.mark.parametrize("code", [errno.ELOOP, errno.ENAMETOOLONG, errno.EISDIR, errno.EEXIST, errno.EINVAL])
def test_bad_paths_are_input_errors(code: int) -> None:
    assert classify(OSError(code, os.strerror(code))) is OSErrorClass.INPUT


def test_missing_file_vs_vanished_dir(tmp_path: Path) -> None:
    missing = FileNotFoundError(errno.ENOENT, "no such file", str(tmp_path / "00.index"))
    assert classify(missing) is OSErrorClass.INPUT
    assert is_corruption(missing)  # Kafka's "needs recovery" signal
    gone = FileNotFoundError(errno.ENOENT, "no such file", str(tmp_path / "gone" / "00.index"))
    assert classify(gone) is OSErrorClass.DISK
    assert not is_corruption(gone)
    assert classify(FileNotFoundError("offset index missing")) is OSErrorClass.INPUT
    assert classify(ValueError("not I/O")) is None


def test_channel_report_keeps_dir_online_for_limits() -> None:
    ch = LogDirFailureChannel()
    err = ch.report("/d", OSError(errno.EMFILE, "Too many open files"), "reading")
    assert isinstance(err, ResourceExhaustedError)
    assert not ch.has_offline_dir("/d") and ch.drain() == []
    assert ch.report("/d", OSError(errno.EIO, "I/O error"), "reading") is None
    assert ch.has_offline_dir("/d") and ch.drain() == ["/d"]


def test_resource_exhaustion_is_not_corruption() -> None:
    assert not is_corruption(ResourceExhaustedError("x"))


def _fail_once(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """The next ``Log.append_as_leader`` raises ``OSError(code)``; later calls work."""
    real = Log.append_as_leader
    state = {"armed": True}

    def flaky(self: Log, *args: object, **kwargs: object) -> object:
        if state["armed"]:
            state["armed"] = False
            raise OSError(code, os.strerror(code))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Log, "append_as_leader", flaky)


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM])
def test_manager_limit_error_is_typed_and_retriable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    code: int) -> None:
    with LogManager([tmp_path / "a"], log_config=CFG, properties=BROKER) as m:
        m.get_or_create_log("t", 0)
        _fail_once(monkeypatch, code)
        with pytest.raises(ResourceExhaustedError) as info:
            m.append("t", 0, [(b"k", b"v")])
        assert info.value.errno == code
        assert m.offline_log_dirs == [] and m.events == []
        info2 = m.append("t", 0, [(b"k", b"v")])  # the same call succeeds once the limit is gone
        assert info2.first_offset == 0
        assert m.metrics()["OfflineLogDirectoryCount"] == 0


def test_manager_limit_error_on_a_direct_log_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Log handed out by the manager routes its errors through the same funnel (the storage hooks)."""
    with LogManager([tmp_path / "a"], log_config=CFG, properties=BROKER) as m:
        log = m.get_or_create_log("t", 0)
        real = Log._roll
        state = {"armed": True}

        def flaky_roll(self: Log, *args: object) -> object:
            if state["armed"]:
                state["armed"] = False
                raise OSError(errno.EMFILE, "Too many open files")
            return real(self, *args)

        monkeypatch.setattr(Log, "_roll", flaky_roll)
        log.append_as_leader([(b"k", b"v")])
        with pytest.raises(ResourceExhaustedError):
            log.roll()
        assert m.offline_log_dirs == []
        log.roll()
        assert len(log.segments) == 2


def test_manager_disk_error_still_takes_the_dir_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LogManager([tmp_path / "a", tmp_path / "b"], log_config=CFG, properties=BROKER) as m:
        m.get_or_create_log("t", 0)
        where = m.log_dir_of("t", 0)
        _fail_once(monkeypatch, errno.EIO)
        with pytest.raises(KafkaStorageError):
            m.append("t", 0, [(b"k", b"v")])
        assert m.offline_log_dirs == [where] and len(m.events) == 1


def test_checkpoint_write_hitting_a_limit_keeps_the_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Periodic work (checkpoints) logs a process limit and tries again next period; the dir stays online."""
    import kafkalog.manager.log_manager as lm

    with LogManager([tmp_path / "a"], log_config=CFG, properties=BROKER) as m:
        m.get_or_create_log("t", 0)

        def no_fds(*_a: object, **_k: object) -> None:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(lm, "write_offset_checkpoint", no_fds)
        m.checkpoint_recovery_offsets()
        assert m.offline_log_dirs == []
        monkeypatch.undo()
        m.checkpoint_recovery_offsets()
        assert (tmp_path / "a" / "recovery-point-offset-checkpoint").exists()


def test_cli_exit_code_for_a_process_limit() -> None:
    """A process limit is an I/O problem (exit 2), not corruption (exit 1)."""
    code, message = cli_classify(resource_error(OSError(errno.EMFILE, "Too many open files"), "reading"))
    assert code == EXIT_USAGE and message.startswith("resources exhausted")

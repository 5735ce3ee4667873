"""atomic_write: the target is never torn; a failed write leaves the old content and no stray tmp file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem_unittest import Patcher

from kafkalog.checkpoint import atomic as atomic_mod
from kafkalog.checkpoint import atomic_write, tmp_path_for, write_offset_checkpoint


def test_writes_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "cp"
    atomic_write(target, b"one")
    assert target.read_bytes() == b"one"
    atomic_write(target, b"two-longer")
    atomic_write(target, b"3")
    assert target.read_bytes() == b"3"
    assert not tmp_path_for(target).exists()
    assert tmp_path_for(target).name == "cp.tmp"


def test_stale_tmp_is_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "cp"
    tmp_path_for(target).write_bytes(b"garbage from a crash" * 100)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and not tmp_path_for(target).exists()


def test_crash_between_tmp_write_and_rename_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(target, {("t", 0): 5})
    old = target.read_bytes()

    def failing_replace(src: object, dst: object) -> None:
        assert Path(src).read_bytes().startswith(b"0\n1\nt 0 6")  # new content fully staged and synced
        raise OSError(errno.EIO, "simulated crash at rename")

    monkeypatch.setattr(atomic_mod.os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        write_offset_checkpoint(target, {("t", 0): 6})
    assert target.read_bytes() == old
    assert not tmp_path_for(target).exists()


def test_fsync_failure_propagates_and_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "fsync failed")

    monkeypatch.setattr(atomic_mod.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="fsync failed"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old" and not tmp_path_for(target).exists()
    atomic_write(target, b"unsynced", sync=False)  # sync=False never calls fsync
    assert target.read_bytes() == b"unsynced"


def test_parent_dir_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = atomic_mod.fsync_dir
    monkeypatch.setattr(atomic_mod, "fsync_dir", lambda d: (calls.append(str(d)), real(d)))
    atomic_write(tmp_path / "x", b"1")
    assert calls == [str(tmp_path)]


def test_missing_dir_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "nope" / "x", b"1")


def test_rejects_non_bytes(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        atomic_write(tmp_path / "x", "text")  # type: ignore[arg-type]


def test_disk_full_keeps_old_file() -> None:
    with Patcher() as patcher:
        fs = patcher.fs
        fs.create_dir("/logs")
        atomic_write("/logs/cp", b"old content")
        fs.set_disk_usage(30, "/logs")
        with pytest.raises(OSError) as info:
            atomic_write("/logs/cp", b"x" * 100)
        assert info.value.errno == errno.ENOSPC
        with open("/logs/cp", "rb") as f:
            assert f.read() == b"old content"
        assert not os.path.exists("/logs/cp.tmp")


def test_read_only_dir_raises_and_keeps_old_file() -> None:
    with Patcher(allow_root_user=False) as patcher:
        patcher.fs.create_dir("/logs")
        atomic_write("/logs/cp", b"old")
        os.chmod("/logs", 0o500)
        with pytest.raises(PermissionError):
            atomic_write("/logs/cp", b"new")
        with open("/logs/cp", "rb") as f:
            assert f.read() == b"old"

"""rewrite_in_place: derived files end up holding exactly the new bytes; identical ones are not written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.io.rewrite import rewrite_in_place


def test_creates_a_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000005.snapshot"
    assert rewrite_in_place(p, b"abc") is True
    assert p.read_bytes() == b"abc"


def test_identical_content_is_not_written(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"same bytes")
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    assert rewrite_in_place(p, memoryview(b"same bytes")) is False
    assert p.stat().st_mtime_ns == 1_000_000_000


@pytest.mark.parametrize("old", [b"", b"xy", b"xxxxxxxxxxxxxxxxxxxxxxxx", b"same length"])
def test_other_content_is_replaced_exactly(tmp_path: Path, old: bytes) -> None:
    p = tmp_path / "f"
    p.write_bytes(old)
    inode = p.stat().st_ino
    assert rewrite_in_place(p, b"new content") is True
    assert p.read_bytes() == b"new content"
    assert p.stat().st_ino == inode  # overwritten where it is, not replaced by another file


def test_missing_dir_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        rewrite_in_place(tmp_path / "gone" / "f", b"x")

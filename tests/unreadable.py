"""Files and dirs that cannot be read, for tests that run as root (where chmod 000 does not deny reads): a path
that is a symlink to itself fails with ELOOP for everyone, and an open refused in process stands for the EACCES the
kernel gives any other user."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

ELOOP = os.strerror(errno.ELOOP)


def make_loop(path: Path) -> Path:
    """Replace ``path`` (a file, or nothing) with a symlink to itself: every open or stat of it fails with ELOOP."""
    if path.exists() or path.is_symlink():
        path.unlink()
    os.symlink(path.name, path)
    return path


def deny_open(monkeypatch: pytest.MonkeyPatch, path: str | os.PathLike) -> str:
    """Make ``open()`` of ``path`` (by absolute path) raise PermissionError for the rest of the test; the path."""
    denied = os.path.abspath(os.fspath(path))
    real_open = open

    def refusing_open(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and os.path.abspath(os.fsdecode(file)) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing_open)
    return denied

"""The CLI on a log dir with far more segment files than its descriptor limit: ``verify``, ``dirs describe``,
``recover --dry-run``, ``recover`` and ``dump`` of the whole dir run in a child with ``RLIMIT_NOFILE`` 64 over 150 partitions x 20
segments (~12,000 segment files) and finish normally, with the results of an unlimited run."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layouts import copied_log_dir

PARTITIONS = 150
SEGMENTS = 20
NOFILE = 64


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-ulimit")
    return copied_log_dir(root, PARTITIONS, SEGMENTS, lambda s: [(b"k%d" % s, b"v" * 50), (b"k", b"w" * 30)],
                          index_interval=64)  # fmt: skip


def _stable(out: str) -> str:
    """The output without free/usable byte counts of the filesystem (other processes write meanwhile)."""
    return "\n".join(ln for ln in out.splitlines() if "Bytes:" not in ln)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def kafkalog(*args: str, limited: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from kafkalog_cli.main import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_limit if limited else None,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize(
    "args", [("verify",), ("dirs", "describe"), ("recover", "--dry-run"), ("recover",), ("dump", "--deep-iteration")]
)
def test_cli_under_a_low_descriptor_limit(log_dir: Path, args: tuple[str, ...]) -> None:
    limited = kafkalog(*args, str(log_dir))
    assert limited.returncode == 0, limited.stderr[-2000:]
    assert "Too many open files" not in limited.stdout + limited.stderr
    if args != ("recover",):  # recover changes nothing on a clean dir, but its second run reports that it ran
        free = kafkalog(*args, str(log_dir), limited=False)
        assert free.returncode == 0
        assert _stable(limited.stdout) == _stable(free.stdout)
    assert len(limited.stdout.splitlines()) >= PARTITIONS

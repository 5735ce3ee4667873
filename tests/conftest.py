"""Shared fixtures: where Kafka's golden files are, and fresh copies of them for tests that touch files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def golden_root() -> Path | None:
    """The golden folder (``KAFKALOG_GOLDEN``, default ``../shared/golden`` from the repo root), or None.

    Resolved, since the library reports the real paths of what it lists (``../shared`` may be a symlink)."""
    root = Path(os.environ.get("KAFKALOG_GOLDEN", REPO_ROOT.parent / "shared" / "golden"))
    return root.resolve() if (root / "README.md").is_file() else None


GOLDEN = golden_root()
needs_golden = pytest.mark.skipif(
    GOLDEN is None, reason="Kafka golden files not found: set KAFKALOG_GOLDEN or put them at ../shared/golden"
)


def golden_segment_logs() -> list[Path]:
    """Every ``.log`` under the golden root that holds record batches as Kafka wrote them: all of them but the
    Aiven tiered objects whose ``.rsm-manifest`` says they are compressed or encrypted chunk streams (those are
    read through ``kafkalog.archive.tiered``, tests/archive/test_tiered_aiven.py)."""
    if GOLDEN is None:
        return []
    out = []
    for p in sorted(GOLDEN.rglob("*.log")):
        manifest = p.with_suffix(".rsm-manifest")
        if manifest.is_file():
            m = json.loads(manifest.read_text())
            if m.get("compression") or m.get("encryption"):
                continue
        out.append(p)
    return out


def golden_cases() -> list[str]:
    """Partition dir names under golden/logdir (e.g. ``golden-none-0``); empty when golden is absent."""
    if GOLDEN is None:
        return []
    return sorted(p.name for p in (GOLDEN / "logdir").iterdir() if p.is_dir())


def legacy_cases() -> list[str]:
    if GOLDEN is None:
        return []
    return sorted(p.name for p in (GOLDEN / "legacy" / "logdir").iterdir() if p.is_dir())


def load_manifest(relpath: str) -> dict:
    """Load a manifest JSON relative to the golden root, e.g. ``manifests/golden-none-0.json``."""
    assert GOLDEN is not None
    return json.loads((GOLDEN / relpath).read_text())


@pytest.fixture
def golden() -> Path:
    """The read-only golden root; tests that modify files must use ``golden_copy``."""
    if GOLDEN is None:
        pytest.skip("Kafka golden files not found: set KAFKALOG_GOLDEN or put them at ../shared/golden")
    return GOLDEN


@pytest.fixture
def golden_copy(tmp_path: Path, golden: Path):
    """Copy a golden path (relative to the golden root) into tmp_path and return the copy."""

    def _copy(relpath: str) -> Path:
        src = golden / relpath
        dst = tmp_path / "golden-copy" / relpath
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        return dst

    return _copy


@pytest.fixture(scope="module")
def spark():
    """A local[2] session with the kafkalog DataSource registered, one per test module (stopped after it)."""
    from kafkalog.spark import get_session, register

    session = get_session("local[2]", "kafkalog-tests")
    register(session)
    yield session
    session.stop()

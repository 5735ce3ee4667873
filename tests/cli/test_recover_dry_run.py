"""``recover --dry-run`` predicts the real run: for every kind of damage below, after a clean and after an unclean
shutdown, the dry run's JSON equals the real run's (the same partitions, actions, errors, summary and exit code);
a real run on a log dir goes on past a partition it cannot recover and ends with its summary; and a partition
counts as ``changed`` exactly when the real run changed a byte of its files (or its checkpoint entries)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from tests.cli.test_cli_commands import tree_hash, writable
from tests.conftest import GOLDEN, needs_golden

pytestmark = needs_golden

PARTS = ("golden-segments-0", "golden-txn-0", "golden-idempotent-0")
SEG = "golden-segments-0"


def _flip(path: Path, at: float) -> None:
    b = bytearray(path.read_bytes())
    i = int(len(b) * at)
    b[i] ^= 0xFF
    path.write_bytes(bytes(b))


def _segments(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "none": lambda d: None,
    "truncate-tail": lambda d: (lambda p: p.write_bytes(p.read_bytes()[:-7]))(_segments(d)[-1]),
    "flip-middle-segment": lambda d: _flip(_segments(d)[len(_segments(d)) // 2], 0.5),
    "flip-active-segment": lambda d: _flip(_segments(d)[-1], 0.6),
    "zero-range": lambda d: (lambda p: p.write_bytes(p.read_bytes()[:100] + bytes(200) + p.read_bytes()[300:]))(
        _segments(d)[-2]),
    "garbage-appended": lambda d: (lambda p: p.write_bytes(p.read_bytes() + b"\x01garbage" * 9))(_segments(d)[-1]),
    "delete-index": lambda d: _segments(d)[-3].with_suffix(".index").unlink(),
    "corrupt-index": lambda d: (lambda p: p.write_bytes(b"\xff" * 8 + p.read_bytes()[8:]))(
        _segments(d)[1].with_suffix(".index")),
    "corrupt-timeindex": lambda d: (lambda p: p.write_bytes(b"\x00" * 12 + p.read_bytes()[12:]))(
        _segments(d)[2].with_suffix(".timeindex")),
    "delete-middle-segment": lambda d: [p.unlink() for p in d.glob(_segments(d)[4].stem + ".*")],
    "malformed-partition-metadata": lambda d: (d / "partition.metadata").write_text("garbage\n"),
    "malformed-epoch-checkpoint": lambda d: (d / "leader-epoch-checkpoint").write_text("0\n2\nx y\n"),
    "corrupt-snapshot": lambda d: _flip(sorted(d.glob("*.snapshot"))[-1], 0.5),
    "leftover-deleted": lambda d: shutil.copy(_segments(d)[0], d / (_segments(d)[0].name + ".deleted")),
    "leftover-cleaned": lambda d: shutil.copy(_segments(d)[0], d / (_segments(d)[0].name + ".cleaned")),
}


def _log_dir(root: Path, damage: str, clean: bool) -> Path:
    ld = root / "logdir"
    ld.mkdir(parents=True)
    for name in ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", *(() if not clean else (".kafka_cleanshutdown",))):
        shutil.copy(GOLDEN / "logdir" / name, ld / name)
    for p in PARTS:
        shutil.copytree(GOLDEN / "logdir" / p, ld / p)
    writable(ld)
    DAMAGE[damage](ld / SEG)
    return ld


def _json(r) -> list[dict]:
    return [json.loads(line) for line in r.stdout.splitlines()]


def _normal(objs: list[dict], root: Path) -> list[dict]:
    """Paths made relative, ``dryRun`` dropped, and salvage's ``quarantine`` (a dry run names the quarantine root,
    the real run the dir it made in it, stamped with the time)."""
    objs = [{k: v for k, v in o.items() if k not in ("dryRun", "quarantine")} for o in objs]
    return json.loads(json.dumps(objs).replace(str(root), "ROOT"))


@pytest.mark.parametrize("mode", [(), ("--salvage",)], ids=["kafka", "salvage"])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_dry_run_predicts_the_real_run(tmp_path: Path, damage: str, clean: bool, mode: tuple[str, ...]) -> None:
    dry_dir = _log_dir(tmp_path / "dry", damage, clean)
    real_dir = _log_dir(tmp_path / "real", damage, clean)
    before = tree_hash(dry_dir)
    stamps = {p: p.stat().st_mtime_ns for p in dry_dir.rglob("*")}
    dry = CliRunner().invoke(main, ["recover", *mode, "--dry-run", "--json", str(dry_dir)], catch_exceptions=False)
    # a dry run changes nothing, not even the time of a segment its trial load hard-linked, and leaves no scratch
    assert tree_hash(dry_dir) == before
    assert {p: p.stat().st_mtime_ns for p in dry_dir.rglob("*")} == stamps
    assert sorted(p.name for p in dry_dir.parent.iterdir()) == ["logdir"]
    ckpts = {n: (real_dir / n).read_bytes() for n in ("recovery-point-offset-checkpoint",
                                                      "replication-offset-checkpoint")}
    real_before = {p: tree_hash(real_dir / p) for p in PARTS}
    real = CliRunner().invoke(main, ["recover", *mode, "--json", str(real_dir)], catch_exceptions=False)
    d, r = _json(dry), _json(real)
    assert _normal(d, tmp_path / "dry") == _normal(r, tmp_path / "real")
    assert dry.exit_code == real.exit_code
    assert r[-1]["type"] == "summary" and r[-1]["exitCode"] == real.exit_code
    assert sorted(o["path"].rsplit("/", 1)[1] for o in r if o["type"] == "partition") == sorted(PARTS)
    clamped = {c["partition"] for o in r if o["type"] == "partition" for c in o.get("checkpoints", [])}
    for o in r:
        if o["type"] != "partition":
            continue
        name = o["path"].rsplit("/", 1)[1]
        changed = tree_hash(real_dir / name) != real_before[name] or name in clamped
        assert o["changed"] is changed, (name, o)
    assert r[-1]["changed"] == sum(o["changed"] for o in r if o["type"] == "partition")
    if not clamped:
        assert {n: (real_dir / n).read_bytes() for n in ckpts} == ckpts

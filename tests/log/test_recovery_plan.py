"""The loader's plan mode (``plan_recovery``) against the real loader, on Kafka-written dirs damaged at random.

Each run damages a golden partition with the harness of ``test_damage_golden``, asks for the plan (which must not
change a byte), then loads the dir for real: the plan must name the same truncated and deleted segments, the same
cut positions and the same log end offset as the load produced.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from kafkalog.errors import KafkaLogError
from kafkalog.log import Log, LogConfig
from kafkalog.log.recovery_plan import plan_recovery
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.log.test_damage_golden import RUNS, SEED, _cases, _damage
from tests.log.test_log_golden import _writable_copy

pytestmark = needs_golden


def flip_one_batch(dst: Path) -> tuple[Path, dict, dict, Path]:
    """The issue's damage on a copy of golden-segments-0 at ``dst``: one byte flipped in a batch payload of an
    inactive segment. Returns (partition dir, manifest, the damaged batch's manifest entry, its .log)."""
    assert GOLDEN is not None
    d = _writable_copy(GOLDEN / "logdir" / "golden-segments-0", dst)
    manifest = load_manifest("manifests/golden-segments-0.json")
    seg = manifest["segments"][3]
    bad = seg["log"]["batches"][2]
    path = d / f"{seg['baseOffset']:020d}.log"
    data = bytearray(path.read_bytes())
    data[bad["position"] + bad["sizeInBytes"] - 2] ^= 0x10
    path.write_bytes(bytes(data))
    return d, manifest, bad, path


def _tree(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def _config(scenario: dict) -> LogConfig:
    return LogConfig.from_properties({k: v for k, v in scenario["topicConfig"].items() if k != "message.format.version"})


@pytest.mark.parametrize("block", range(4))
def test_plan_matches_the_load_on_damaged_golden_dirs(tmp_path: Path, block: int) -> None:
    cases = _cases()
    compared = 0
    for run in range(block, RUNS // 2, 4):
        rng = random.Random(SEED * 1_000_003 + 11 + run)
        src, scenario, _records = rng.choice(cases)
        d = _writable_copy(src, tmp_path / f"run{run}" / src.name)
        damage = _damage(d, rng)
        clean = rng.random() < 0.5
        recovery_point = rng.choice([0, scenario.get("recoveryPoint") or 0])
        where = f"run {run} ({src.name}, {damage}, clean={clean}, recovery point {recovery_point})"
        before = _tree(d)
        try:
            plan = plan_recovery(d, _config(scenario), clean_shutdown=clean, recovery_point=recovery_point,
                                 look_everywhere=True)
        except (KafkaLogError, OSError):
            plan = None
        assert _tree(d) == before, f"{where}: the plan changed files"
        sizes = {p.name: p.stat().st_size for p in d.iterdir() if p.name.endswith(".log")}
        try:
            log = Log.open(d, _config(scenario), clean_shutdown=clean, recovery_point=recovery_point)
        except (KafkaLogError, OSError):
            shutil.rmtree(d.parent)
            continue  # the load refuses: nothing to compare the plan with
        try:
            assert plan is not None, f"{where}: the load succeeded where the plan failed"
            assert plan.log_end_after == log.log_end_offset, where
            loaded = [a for a in log.load_actions if a[0] in ("truncated", "deleted segment")]
            planned = [a for a in plan.actions if a[0] in ("truncated", "deleted segment")]
            assert sorted(planned) == sorted(loaded), where
            for cut in plan.truncations:
                assert os.path.getsize(d / cut.segment) == cut.position, where
                assert sizes[cut.segment] - cut.position == cut.bytes, where
            assert all(not (d / drop.segment).exists() for drop in plan.deleted), where
            assert plan.log_end_before >= plan.log_end_after
            compared += 1
        finally:
            log.close()
        shutil.rmtree(d.parent)
    assert compared > 0


def test_clean_shutdown_plan_shows_the_real_log_end_and_unseen_corruption(tmp_path: Path) -> None:
    d, manifest, bad, path = flip_one_batch(tmp_path / "golden-segments-0")
    plan = plan_recovery(d, _config(manifest["scenario"]), clean_shutdown=True, look_everywhere=True)
    end = manifest["scenario"]["logEndOffset"]
    assert (plan.log_end_before, plan.log_end_after) == (end, end)
    assert not plan.loses_data
    assert [(u.segment, u.position) for u in plan.unseen_corruption] == [(path.name, bad["position"])]
    full = plan_recovery(d, _config(manifest["scenario"]), clean_shutdown=False, recovery_point=0)
    assert full.truncations[0].segment == path.name and full.truncations[0].position == bad["position"]
    assert full.lost_ranges == [(bad["baseOffset"], end - 1)]
    assert full.offsets_lost == end - bad["baseOffset"]
    assert full.unseen_corruption == []


def _loader_cases() -> list[str]:
    """The loader cases Kafka loads (where it refuses there is no result to plan; kafkalog's rebuild of those is
    ``test_log_golden``'s)."""
    if GOLDEN is None:
        return []
    out = []
    for p in sorted((GOLDEN / "loader" / "manifests").glob("*.result.json")):
        if not json.loads(p.read_text()).get("kafkaException"):
            out.append(p.name[: -len(".result.json")])
    return out


@pytest.mark.parametrize("case", _loader_cases())
def test_plan_of_kafkas_loader_cases(tmp_path: Path, case: str) -> None:
    """Leftovers, an interrupted cleaner swap, orphan indexes, a corrupt snapshot, a log start beyond the log end:
    the plan's log end is Kafka's recorded result and its actions are those kafkalog's loader then takes."""
    result = load_manifest(f"loader/manifests/{case}.result.json")
    d = _writable_copy(GOLDEN / "loader" / "input" / f"{case}-0", tmp_path / f"{case}-0")
    args = result["loadArgs"]
    kw = {"clean_shutdown": args["hadCleanShutdown"], "recovery_point": args["recoveryPointCheckpoint"],
          "log_start_offset": args["logStartOffsetCheckpoint"]}
    config = _config({"topicConfig": result["topicConfig"]})
    before = _tree(d)
    plan = plan_recovery(d, config, **kw)
    assert _tree(d) == before
    assert plan.log_end_after == result["kafkaLoadResult"]["nextOffset"]
    with Log.open(d, config, **kw) as log:
        assert log.log_end_offset == plan.log_end_after
        loaded = {a for a in log.load_actions if not a[1].endswith((".snapshot", ".snapshot.deleted"))}
    planned = {a for a in plan.actions if not a[1].endswith((".snapshot", ".snapshot.deleted"))}
    assert planned == loaded


def test_the_plan_opens_nothing_for_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run works on a read-only mount: every file the plan opens is opened for reading only."""
    import builtins

    d, manifest, _bad, _path = flip_one_batch(tmp_path / "golden-segments-0")
    real_os_open, real_open = os.open, builtins.open
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def os_open(path, flags, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - os.open's signature
        assert not flags & writes, f"{path} opened for writing"
        return real_os_open(path, flags, *args, **kwargs)

    def py_open(file, mode="r", *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - open's signature
        assert not set(mode) & set("wax+"), f"{file} opened with mode {mode}"
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", py_open)
    for clean in (True, False):
        plan = plan_recovery(d, _config(manifest["scenario"]), clean_shutdown=clean, look_everywhere=True)
        assert plan.log_end_before == manifest["scenario"]["logEndOffset"]

"""Salvage recovery on Kafka-written partition dirs damaged at random (the harness of ``test_damage_golden``).

For every run: salvage keeps every batch the damage did not touch (byte for byte, compared with the golden
manifest) and every batch Kafka's own recovery keeps; the removed bytes are in the quarantine with a report, and
with the kept batches they make up the damaged file exactly; the salvaged dir passes ``kafkalog verify``; a second
recovery as after a crash (Kafka's, from offset 0) changes no file; and reading the log back serves only records
Kafka wrote.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError
from kafkalog.log import Log, LogConfig
from kafkalog.log.salvage import REPORT_FILE, default_quarantine_dir, salvage_partition
from kafkalog.records import read_batches
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.fuzz.test_fuzz_records import watchdog
from tests.log.test_damage_golden import RUNS, SEED, _cases, _damage, _open_and_read
from tests.log.test_log_golden import _writable_copy
from tests.log.test_recovery_plan import flip_one_batch

pytestmark = needs_golden


def _config(scenario: dict) -> LogConfig:
    return LogConfig.from_properties({k: v for k, v in scenario["topicConfig"].items() if k != "message.format.version"})


def _batches_on_disk(d: Path) -> set[str]:
    out = set()
    for p in d.glob("*.log"):
        with read_batches(p) as reader:
            out.update(hashlib.sha256(bytes(b.raw)).hexdigest() for b in reader)
    return out


def _tree(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def _untouched(src: Path, touched: dict[str, list[tuple[int, float]]]) -> tuple[set[str], set[str]]:
    """(batches the damage did not touch, every batch Kafka wrote), as sha256 of their bytes."""
    manifest = load_manifest(f"{'legacy/' if src.parent.parent.name == 'legacy' else ''}manifests/{src.name}.json")
    out, written = set(), set()
    for seg in manifest["segments"]:
        ranges = touched.get(f"{seg['baseOffset']:020d}.log", [])
        for b in seg["log"]["batches"]:
            written.add(b["sha256"])
            start, end = b["position"], b["position"] + b["sizeInBytes"]
            if b["crcValid"] and not any(a < end and start < z for a, z in ranges):
                out.add(b["sha256"])
    return out, written


def _salvage_run(tmp_path: Path, run: int) -> str:
    rng = random.Random(SEED * 1_000_003 + 23 + run)
    src, scenario, records = rng.choice(_cases())
    d = _writable_copy(src, tmp_path / f"run{run}" / "logdir" / src.name)
    touched: dict[str, list[tuple[int, float]]] = {}
    damage = _damage(d, rng, touched)
    where = f"run {run} ({src.name}, {damage})"
    damaged = {p.name: p.read_bytes() for p in d.glob("*.log")}
    config = _config(scenario)
    # Kafka's own recovery, on a copy: salvage keeps at least what it keeps.
    kafka_copy = shutil.copytree(d, tmp_path / f"run{run}" / "kafka" / src.name)
    try:
        Log.open(kafka_copy, config, clean_shutdown=False, recovery_point=0).close()
        kafka_kept = _batches_on_disk(kafka_copy)
    except Exception:  # noqa: BLE001 - a load Kafka's rules refuse keeps nothing to compare with
        kafka_kept = set()
    quarantine = tmp_path / f"run{run}" / "quarantine"
    before_salvage = _tree(d)
    try:
        report = salvage_partition(d, quarantine_dir=quarantine, config=config)
    except CorruptCheckpointError:
        assert any(x.endswith("partition.metadata") for x in damage), where  # the topic id is unreadable: refused before any write
        assert _tree(d) == before_salvage and not quarantine.exists(), where
        shutil.rmtree(tmp_path / f"run{run}")
        return where
    kept = _batches_on_disk(d)
    untouched, written = _untouched(src, touched)
    missing = untouched - kept
    assert not missing, f"{where}: {len(missing)} untouched batches not kept; removed {report.ranges}"
    # Kafka's recovery may keep a renumbered batch (its offset field is outside the CRC); salvage drops those,
    # and keeps every batch of Kafka's own bytes that Kafka's recovery keeps.
    assert kafka_kept & written <= kept, f"{where}: salvage lost batches Kafka's recovery keeps"
    assert not any(a in ("truncated", "deleted segment") for a, _f in report.reload_actions), where
    if report.changed:
        doc = json.loads((report.quarantine / REPORT_FILE).read_text())
        assert doc["logEndOffsetAfter"] == report.log_end_after
        for name in report.rewritten:  # kept batches + quarantined ranges = the damaged file, nothing else
            pieces = {r.position: (report.quarantine / r.quarantine_file).read_bytes()
                      for r in report.ranges if r.segment == name}
            with read_batches(d / name) as reader:
                rebuilt = [bytes(b.raw) for b in reader]
            original = damaged[name]
            pos, i = 0, 0
            while pos < len(original):
                if pos in pieces:
                    pos += len(pieces[pos])
                    continue
                assert original[pos : pos + len(rebuilt[i])] == rebuilt[i], where
                pos += len(rebuilt[i])
                i += 1
            assert i == len(rebuilt), where
    else:
        assert report.quarantine is None and not quarantine.exists()
    verified = CliRunner().invoke(main, ["verify", str(d)], catch_exceptions=False)
    assert verified.exit_code == 0, f"{where}: {verified.output}"
    before = _tree(d)
    with Log.open(d, config, clean_shutdown=False, recovery_point=0) as log:
        assert [a for a in log.load_actions if a[0] in ("truncated", "deleted segment")] == [], where
        assert log.log_end_offset == report.log_end_after, where
    assert _tree(d) == before, f"{where}: a second recovery changed files"
    with watchdog():
        outcome, wrong = _open_and_read(d, scenario, records, rng)
    assert wrong is None, f"{where} ({outcome}): {wrong}"
    shutil.rmtree(tmp_path / f"run{run}")
    return where


@pytest.mark.parametrize("block", range(6))
def test_salvage_keeps_every_untouched_batch(tmp_path: Path, block: int) -> None:
    for run in range(block, RUNS // 2, 6):
        _salvage_run(tmp_path, run)


def test_salvage_of_one_flipped_byte_keeps_the_later_segments(tmp_path: Path) -> None:
    """The issue's case: one byte flipped in an inactive segment of golden-segments-0. Kafka's recovery cuts there
    and deletes every later segment; salvage removes one batch."""
    d, manifest, bad, path = flip_one_batch(tmp_path / "logdir" / "golden-segments-0")
    dry = salvage_partition(d, dry_run=True, config=_config(manifest["scenario"]))
    assert not default_quarantine_dir(d).exists()
    assert [(r.segment, r.position, r.bytes, r.reasons) for r in dry.ranges] == [
        (path.name, bad["position"], bad["sizeInBytes"], ("crc",))]
    assert dry.lost_ranges == [(bad["baseOffset"], bad["lastOffset"])]
    end = manifest["scenario"]["logEndOffset"]
    assert (dry.log_end_before, dry.log_end_after) == (end, end)
    done = salvage_partition(d, config=_config(manifest["scenario"]))
    assert done.quarantine is not None and done.quarantine.parent.parent == default_quarantine_dir(d)
    assert done.rewritten == [path.name]
    assert len(list(d.glob("*.log"))) == len(manifest["segments"])


def test_quarantine_inside_the_log_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "logdir" / "t-0"
    Log.open(d).close()
    for bad in (d / "q", tmp_path / "logdir" / "quarantine", tmp_path / "logdir"):
        with pytest.raises(InvalidArgumentError):
            salvage_partition(d, quarantine_dir=bad)
    assert sorted(p.name for p in (tmp_path / "logdir").iterdir()) == ["t-0"]


class _Crash(BaseException):
    """Stands for the process dying at that instruction."""


@pytest.mark.parametrize("crash_at", [1, 2])
def test_a_crash_inside_the_segment_rewrite_leaves_a_dir_the_loader_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int) -> None:
    """Crash before the ``.cleaned`` -> ``.swap`` rename (1) or before the ``.swap`` -> ``.log`` one (2): the next
    load deletes the ``.cleaned`` file (the old segment stays whole, salvage can run again) or completes the swap
    (the segment holds exactly the kept batches), as Kafka's loader does with the cleaner's files."""
    import kafkalog.log.salvage as salvage_mod

    reference, manifest, _bad, path = flip_one_batch(tmp_path / "ref" / "logdir" / "golden-segments-0")
    config = _config(manifest["scenario"])
    salvage_partition(reference, quarantine_dir=tmp_path / "ref-q", config=config)
    d, _m, _b, _p = flip_one_batch(tmp_path / "crash" / "logdir" / "golden-segments-0")
    damaged = (d / path.name).read_bytes()
    real_replace = salvage_mod.os.replace
    doomed = ".cleaned" if crash_at == 1 else ".swap"

    def replace(src, dst):  # noqa: ANN001 - os.replace's signature
        if str(src).endswith(doomed):
            raise _Crash
        return real_replace(src, dst)

    monkeypatch.setattr(salvage_mod.os, "replace", replace)
    with pytest.raises(_Crash):
        salvage_partition(d, quarantine_dir=tmp_path / "q", config=config)
    monkeypatch.undo()
    left = sorted(p.name for p in d.iterdir() if p.name.startswith(path.name))
    assert left == ([path.name, path.name + ".cleaned"] if crash_at == 1 else [path.name, path.name + ".swap"])
    with Log.open(d, config, clean_shutdown=True) as log:
        assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap"))
        assert log.log_end_offset == manifest["scenario"]["logEndOffset"]
    if crash_at == 1:
        assert (d / path.name).read_bytes() == damaged  # untouched: salvage simply runs again
        salvage_partition(d, quarantine_dir=tmp_path / "q", config=config)
    assert (d / path.name).read_bytes() == (reference / path.name).read_bytes()


def _golden_segment(tmp_path: Path) -> tuple[Path, dict, dict, Path, LogConfig]:
    assert GOLDEN is not None
    d = _writable_copy(GOLDEN / "logdir" / "golden-segments-0", tmp_path / "logdir" / "golden-segments-0")
    manifest = load_manifest("manifests/golden-segments-0.json")
    seg = manifest["segments"][4]
    return d, manifest, seg, d / f"{seg['baseOffset']:020d}.log", _config(manifest["scenario"])


def test_a_zeroed_region_across_two_batches_costs_those_two(tmp_path: Path) -> None:
    """The header of the second batch is gone: salvage finds the next batch start by its CRC and reads on."""
    d, _manifest, seg, path, config = _golden_segment(tmp_path)
    a, b, c = seg["log"]["batches"][3:6]
    data = bytearray(path.read_bytes())
    start = b["position"] - 10
    data[start : b["position"] + 30] = bytes(b["position"] + 30 - start)
    path.write_bytes(bytes(data))
    report = salvage_partition(d, dry_run=True, config=config)
    (r,) = report.ranges
    assert (r.position, r.bytes) == (a["position"], c["position"] - a["position"])
    assert (r.first_offset, r.last_offset) == (a["baseOffset"], b["lastOffset"])
    assert report.log_end_after == report.log_end_before


def test_a_renumbered_batch_is_removed_and_its_neighbours_kept(tmp_path: Path) -> None:
    """A flipped bit in a batch's offset field (outside the CRC) moves it ahead of its successors: the batch goes
    (reason ``offsets``), the batches after it stay."""
    d, _manifest, seg, path, config = _golden_segment(tmp_path)
    moved = seg["log"]["batches"][2]
    data = bytearray(path.read_bytes())
    data[moved["position"] + 5] ^= 0x10  # base offset + 2^20
    path.write_bytes(bytes(data))
    report = salvage_partition(d, quarantine_dir=tmp_path / "q", config=config)
    (r,) = report.ranges
    assert r.reasons == ("offsets",) and (r.position, r.bytes) == (moved["position"], moved["sizeInBytes"])
    assert (r.first_offset, r.last_offset) == (moved["baseOffset"], moved["lastOffset"])
    kept = _batches_on_disk(d)
    assert all(b["sha256"] in kept for b in seg["log"]["batches"] if b is not moved)

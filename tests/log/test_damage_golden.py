"""Random damage to Kafka-written partition dirs: whatever kafkalog then opens and reads, it never serves a record
Kafka did not write.

Each run copies one golden partition (v2 and legacy), damages 1-3 of its files (truncate, flip a bit, zero a range,
append garbage, delete), opens it as a ``Log`` with a clean or unclean shutdown and a random recovery point, reads
it from the log start the way a consumer does, and closes it. Allowed outcomes: a ``kafkalog.errors`` exception,
or records whose offset, key, value and timestamp are exactly those in Kafka's manifest. Anything else (another
exception type, a wrong record, a hang) fails, with one exception named in ``_renumbered_last_batch``: the log's
last batch moved forward by bit flips in its offset field, which no file in the partition dir contradicts.
``KAFKALOG_DAMAGE_RUNS`` (default 300) and ``KAFKALOG_DAMAGE_SEED`` scale it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from kafkalog.errors import KafkaLogError
from kafkalog.log import Log, LogConfig
from tests.conftest import GOLDEN, needs_golden
from tests.fuzz.test_fuzz_records import watchdog
from tests.log.test_log_golden import _writable_copy

pytestmark = needs_golden

RUNS = int(os.environ.get("KAFKALOG_DAMAGE_RUNS", "300"))
SEED = int(os.environ.get("KAFKALOG_DAMAGE_SEED", "0"))
DAMAGE = ("truncate", "flip", "flip", "zero", "garbage", "delete")


def _cases() -> list[tuple[Path, dict, dict]]:
    """(partition dir, scenario, {offset: (key hex, value hex, timestamp)}) for every golden case with a manifest."""
    if GOLDEN is None:
        return []
    out = []
    for root in (GOLDEN, GOLDEN / "legacy"):
        for scenario in json.loads((root / "SCENARIOS.json").read_text())["scenarios"]:
            d = root / scenario["dir"]
            manifest = json.loads((root / "manifests" / f"{d.name}.json").read_text())
            records = {
                r["offset"]: (r["key"], r["value"], r["timestamp"])
                for seg in manifest["segments"] for b in seg["log"]["batches"] for r in b["records"]
            }
            out.append((d, scenario, records))
    return out


def _damage(d: Path, rng: random.Random, touched: dict[str, list[tuple[int, float]]] | None = None) -> list[str]:
    """Damage 1-3 files of ``d``; ``touched`` (when given) collects, per file name, the byte ranges [start, end)
    whose content changed or went (a deleted file: all of it; appended garbage changes no existing byte)."""
    done = []
    files = sorted(p for p in d.iterdir() if p.is_file())
    mark = (lambda name, a, b: touched.setdefault(name, []).append((a, b))) if touched is not None else \
        (lambda name, a, b: None)
    for _ in range(rng.randint(1, 3)):
        if not files:
            break
        f = rng.choice(files)
        data = bytearray(f.read_bytes())
        kind = rng.choice(DAMAGE)
        if kind == "delete":
            f.unlink()
            files.remove(f)
            mark(f.name, 0, float("inf"))
        elif kind == "truncate":
            cut = rng.randint(0, len(data))
            f.write_bytes(bytes(data[:cut]))
            mark(f.name, cut, float("inf"))
        elif kind == "garbage":
            f.write_bytes(bytes(data) + rng.randbytes(rng.randint(1, 200)))
        elif data and kind == "flip":
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
            f.write_bytes(bytes(data))
            mark(f.name, i, i + 1)
        elif data and kind == "zero":
            i = rng.randrange(len(data))
            n = min(rng.randint(1, 64), len(data) - i)
            data[i : i + n] = bytes(n)
            f.write_bytes(bytes(data))
            mark(f.name, i, i + n)
        done.append(f"{kind} {f.name}")
    return done


def _record_key(r) -> tuple:
    return (None if r.key is None else r.key.hex(), None if r.value is None else r.value.hex(), r.timestamp)


def _renumbered_last_batch(batch, log_end_offset: int, records: dict) -> int | None:
    """The one wrong serve this test accepts, or None: the log's *last* batch holding Kafka's records, every one
    moved forward by the same shift of at most three set bits (bit flips in its offset field, which no CRC
    covers). No later batch or segment contradicts such a batch, and its offsets make the log end, so nothing in
    the partition dir tells it apart from a real gap; Kafka's recovery keeps it too (docs/reliability.md)."""
    if batch.last_offset + 1 != log_end_offset:
        return None
    served = [(r.offset, _record_key(r)) for r in batch.records()]
    first_offset, first = served[0]
    for original in (o for o, rec in records.items() if rec == first and o < first_offset):
        shift = first_offset - original
        if bin(shift).count("1") <= 3 and all(records.get(o - shift) == rec for o, rec in served):
            return shift
    return None


def _open_and_read(d: Path, scenario: dict, records: dict, rng: random.Random) -> tuple[str, str | None]:
    """(what happened, the first wrong record or None)."""
    props = {k: v for k, v in scenario["topicConfig"].items() if k != "message.format.version"}
    clean = rng.random() < 0.5
    recovery_point = rng.choice([None, 0, scenario.get("recoveryPoint")])
    try:
        log = Log.open(d, LogConfig.from_properties(props), clean_shutdown=clean, recovery_point=recovery_point)
    except KafkaLogError as e:
        return f"open refused: {type(e).__name__}", None
    outcome = f"clean={clean} recovery_point={recovery_point}"
    try:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            batches = log.read(offset, 1 << 20)
            if not batches:
                break
            for batch in batches:
                for r in batch.records():
                    if r.offset < offset:
                        continue  # a compressed batch holds offsets before the one asked for
                    got = _record_key(r)
                    if records.get(r.offset) != got:
                        shift = _renumbered_last_batch(batch, log.log_end_offset, records)
                        if shift is not None:
                            return outcome + f", the log's last batch renumbered +{shift} (blind spot)", None
                        return outcome, f"offset {r.offset}: served {got}, Kafka wrote {records.get(r.offset)}"
            offset = batches[-1].last_offset + 1
    except KafkaLogError as e:
        outcome += f", read stopped: {type(e).__name__}"
    finally:
        try:
            log.close()
        except KafkaLogError as e:
            outcome += f", close: {type(e).__name__}"
    return outcome, None


@pytest.mark.parametrize("block", range(10))
def test_damaged_golden_partitions_never_serve_a_wrong_record(tmp_path: Path, block: int) -> None:
    cases = _cases()
    for run in range(block, RUNS, 10):
        rng = random.Random(SEED * 1_000_003 + run)
        src, scenario, records = rng.choice(cases)
        d = _writable_copy(src, tmp_path / f"run{run}" / src.name)  # golden files are read-only (0444)
        damage = _damage(d, rng)
        with watchdog():
            outcome, wrong = _open_and_read(d, scenario, records, rng)
        assert wrong is None, f"run {run} ({src.name}, {damage}, {outcome}): {wrong}"
        shutil.rmtree(d.parent)


def _manifest(src: Path) -> dict:
    root = src.parent.parent  # <golden>/logdir/<case> or <golden>/legacy/logdir/<case>
    return json.loads((root / "manifests" / f"{src.name}.json").read_text())


@pytest.mark.parametrize("block", range(4))
def test_bit_flips_in_batch_offsets_are_never_served(tmp_path: Path, block: int) -> None:
    """The offset field of a batch (v2 base offset, legacy message or wrapper offset) is outside every CRC: one
    flipped bit in it, in any batch but the log's last, never reaches a reader as a record Kafka did not write,
    after a clean or an unclean load. The log's last batch is left out: a forward jump there is contradicted by
    no file (Kafka serves it too; docs/reliability.md)."""
    cases = _cases()
    for run in range(block, RUNS // 2, 4):
        rng = random.Random(SEED * 1_000_003 + 7 + run)
        src, scenario, records = rng.choice(cases)
        segments = [s for s in _manifest(src)["segments"] if s["log"]["batches"]]
        choices = [(s, b) for s in segments for b in s["log"]["batches"]][:-1]
        seg, batch = rng.choice(choices)
        d = _writable_copy(src, tmp_path / f"run{run}" / src.name)
        log_file = d / f"{seg['baseOffset']:020d}.log"
        data = bytearray(log_file.read_bytes())
        bit = rng.randrange(40)
        data[batch["position"] + 7 - bit // 8] ^= 1 << (bit % 8)
        log_file.write_bytes(bytes(data))
        with watchdog():
            outcome, wrong = _open_and_read(d, scenario, records, rng)
        assert wrong is None, f"run {run} ({src.name}, batch at {seg['baseOffset']}+{batch['position']}, bit {bit}, " \
                              f"{outcome}): {wrong}"
        shutil.rmtree(d.parent)


def test_the_accepted_blind_spot_is_narrow() -> None:
    """``_renumbered_last_batch`` accepts only the log's last batch carrying Kafka's records shifted forward by
    the same few bits; anything else stays a failure of the tests above."""
    from types import SimpleNamespace

    def rec(offset: int, key: bytes) -> SimpleNamespace:
        return SimpleNamespace(offset=offset, key=key, value=b"v" + key, timestamp=100 + offset)

    def batch(*recs: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(last_offset=recs[-1].offset, records=lambda: list(recs))

    written = {o: (k.hex(), (b"v" + k).hex(), 100 + o) for o, k in enumerate([b"a", b"b", b"c", b"d"])}

    def moved(o: int, k: bytes) -> SimpleNamespace:  # Kafka's record at o, renumbered to o + 4
        r = rec(o, k)
        r.offset = o + 4
        return r

    last = batch(moved(2, b"c"), moved(3, b"d"))
    assert _renumbered_last_batch(last, 8, written) == 4
    assert _renumbered_last_batch(last, 9, written) is None  # not the log's last batch
    other = batch(moved(2, b"c"), rec(7, b"x"))
    assert _renumbered_last_batch(other, 8, written) is None  # a record Kafka never wrote
    far = rec(2, b"c")
    far.offset = 2 + 0b1111
    assert _renumbered_last_batch(batch(far), far.offset + 1, written) is None  # four bits moved

"""Crash consistency: torn writes (in process, cheap) and real kill -9 of a child appending through a LogManager.

Invariants after every restart: every flushed record is present and unchanged, nothing after the first invalid
byte is served (the log ends exactly at the first damaged or torn batch), offsets are contiguous and every segment
passes the strict index sanity check.

``KAFKALOG_CRASH_POINTS`` (default 320) is the total number of crash points; 1 in 16 is a real kill -9 of a child
process, the rest are torn-write cases. ``KAFKALOG_CRASH_POINTS=10000`` is the long run (see docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.log.log import Log
from kafkalog.manager.log_manager import LogManager
from tests.reliability.workload import (
    TOPIC,
    append_random,
    iter_partition_dirs,
    log_config,
    read_journal,
    tear,
    verify_log,
)

CRASH_POINTS = int(os.environ.get("KAFKALOG_CRASH_POINTS", "320"))
KILL_POINTS = max(8, CRASH_POINTS // 16)
TORN_KINDS = ("cut", "zero", "flip", "junk", "drop", "none")
TORN_PER_KIND = max(1, (CRASH_POINTS - KILL_POINTS) // len(TORN_KINDS))
SEED = int(os.environ.get("KAFKALOG_CRASH_SEED", "20240601"))
CHILD = Path(__file__).resolve().parents[1] / "reliability" / "crash_child.py"
MANAGER_PROPS = {
    "log.flush.offset.checkpoint.interval.ms": 3_600_000,
    "log.retention.check.interval.ms": 3_600_000,
    "node.id": 1,
    "cluster.id": "crash-harness-cluster0",
}


def run_torn_case(root: Path, seed: int, kind: str) -> dict:
    """Append random batches to a Log with random flushes, crash (handles dropped, nothing trimmed or written),
    tear the files after the recovery point, reopen unclean and check; then keep appending and check again."""
    rng = random.Random(seed)
    part = root / f"{TOPIC}-0"
    log = Log.open(part, log_config())
    flushed = 0
    for _ in range(rng.randint(3, 70)):
        append_random(log, TOPIC, 0, rng)
        r = rng.random()
        if r < 0.15:
            log.flush()
            flushed = log.recovery_point
        elif r < 0.18:
            log.roll()
    log.close_handlers()
    expect = tear(part, flushed, rng, kind)
    log = Log.open(part, log_config(), recovery_point=flushed, clean_shutdown=False)
    try:
        check = verify_log(log, TOPIC, 0, flushed=flushed, expect_end=expect)
        for _ in range(rng.randint(1, 5)):  # the recovered log keeps working
            append_random(log, TOPIC, 0, rng)
        verify_log(log, TOPIC, 0, flushed=flushed)
    finally:
        log.close()
    return {"end": check.log_end, "flushed": flushed}


@pytest.mark.parametrize("kind", TORN_KINDS)
def test_torn_writes(tmp_path: Path, kind: str) -> None:
    """``TORN_PER_KIND`` random cases of one kind of damage; a failure names its seed for replay."""
    for i in range(TORN_PER_KIND):
        seed = SEED * 1000 + TORN_KINDS.index(kind) * 100_000 + i
        try:
            run_torn_case(tmp_path / f"case-{i}", seed, kind)
        except BaseException as exc:
            raise AssertionError(f"torn-write case kind={kind} seed={seed} failed: {exc!r}") from exc


def _partition_ends(dirs: list[Path]) -> dict[int, tuple[Path, int]]:
    """Per partition: its dir and the recovery point its log dir checkpointed (0 when unreadable or absent)."""
    out = {}
    for part, p in iter_partition_dirs(dirs):
        try:
            ckpt = read_offset_checkpoint(part.parent / "recovery-point-offset-checkpoint")
        except Exception:  # noqa: BLE001 - torn or absent: recovery starts at 0
            ckpt = {}
        out[p] = (part, ckpt.get((TOPIC, p), 0))
    return out


def _spawn(cfg: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CHILD), json.dumps(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_kill9_during_appends(tmp_path: Path) -> None:
    """``KILL_POINTS`` cycles on the same two log dirs: a child appends to 4 partitions (flushes, checkpoints,
    rolls) and is killed with SIGKILL at a random moment (sometimes during its startup recovery); half the time
    the files after the checkpointed recovery point are also torn; a LogManager restart must recover exactly the
    valid prefix with every flushed record."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    journal = tmp_path / "journal"
    rng = random.Random(SEED)
    stats = {"kills": 0, "killed_before_ready": 0, "torn": 0}
    for cycle in range(KILL_POINTS):
        cfg = {"dirs": [str(d) for d in dirs], "seed": SEED + cycle, "partitions": 4, "journal": str(journal),
               "max_ops": 100_000}
        proc = _spawn(cfg)
        try:
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0.05, 0.6))  # may land during startup / recovery
                stats["killed_before_ready"] += 1
            else:
                line = proc.stdout.readline()
                if line.strip() != b"ready":
                    proc.kill()
                    raise AssertionError(f"child failed to start: {line!r} {proc.stderr.read().decode()[-3000:]}")
                time.sleep(rng.uniform(0.0, 0.5))
            if proc.poll() is not None:
                raise AssertionError(f"child exited early ({proc.returncode}): {proc.stderr.read().decode()[-3000:]}")
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        stats["kills"] += 1
        flushed = read_journal(journal)
        expect: dict[int, int | None] = {}
        for p, (part, ckpt) in _partition_ends(dirs).items():
            kind = rng.choice(["none", "none", "none", "cut", "zero", "flip", "junk", "drop"])
            if kind != "none":
                stats["torn"] += 1
            expect[p] = tear(part, ckpt, rng, kind)
        mgr = LogManager(dirs, log_config=log_config(), properties=MANAGER_PROPS)
        mgr.startup()
        try:
            for p in range(4):
                log = mgr.get_log(TOPIC, p)
                if log is None:
                    assert flushed.get(p, 0) == 0, f"cycle {cycle}: partition {p} with flushed records vanished"
                    continue
                verify_log(log, TOPIC, p, flushed=flushed.get(p, 0), expect_end=expect.get(p),
                           read=lambda off, p=p, mgr=mgr: mgr.read(TOPIC, p, off))
        except BaseException as exc:
            raise AssertionError(f"kill cycle {cycle} (seed {SEED + cycle}) failed: {exc!r}") from exc
        finally:
            mgr.shutdown()
        for d in dirs:  # leave the dirs unclean so the next child's startup runs recovery (and may be killed in it)
            (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
    print(f"kill -9 crash points: {stats}")


def _flip_base_offset(tmp_path: Path, bit: int) -> tuple[Log, int, int]:
    """10 batches, flushed up to batch 5's base offset, then bit ``bit`` of batch 5's baseOffset flipped (the
    8-byte offset is outside the CRC). Returns the reopened log, the flushed offset and batch 5's base."""
    import struct

    from kafkalog.records import read_batches

    part = tmp_path / f"{TOPIC}-0"
    log = Log.open(part, log_config())
    rng = random.Random(1)
    for _ in range(10):
        append_random(log, TOPIC, 0, rng)
    (seg,) = list(part.glob("*.log"))
    batches = list(read_batches(seg.read_bytes()))
    flushed = batches[5].base_offset
    log.flush(flushed)
    log.close_handlers()
    data = bytearray(seg.read_bytes())
    pos = batches[5].position
    struct.pack_into(">q", data, pos, struct.unpack_from(">q", data, pos)[0] ^ (1 << bit))
    seg.write_bytes(bytes(data))
    return Log.open(part, log_config(), recovery_point=flushed, clean_shutdown=False), flushed, batches[5].base_offset


def test_base_offset_flip_far_forward_is_cut(tmp_path: Path) -> None:
    """A flipped high bit in a batch's baseOffset (offset overflow) ends the log at that batch."""
    log, flushed, bad = _flip_base_offset(tmp_path, 40)
    try:
        verify_log(log, TOPIC, 0, flushed=flushed, expect_end=bad)
    finally:
        log.close()


def test_base_offset_flip_backwards_keeps_flushed_records(tmp_path: Path) -> None:
    log, flushed, bad = _flip_base_offset(tmp_path, 3)
    try:
        verify_log(log, TOPIC, 0, flushed=flushed, expect_end=bad)
    finally:
        log.close()


def test_base_offset_flip_by_one_is_cut(tmp_path: Path) -> None:
    log, flushed, bad = _flip_base_offset(tmp_path, 0)
    try:
        verify_log(log, TOPIC, 0, flushed=flushed, expect_end=bad)
    finally:
        log.close()

"""Concurrency: threads appending, reading, rolling, running retention, flushing/checkpointing and the background
sanity checker on the same partitions of one LogManager (and of a bare Log).

Invariants: every acknowledged append owns exactly the offsets it was given (no offset lost, none given twice,
ranges contiguous), the log holds exactly the acknowledged records from its start offset on, every read answers
whole CRC-valid batches with contiguous offsets (never a half-written batch), no thread dies of an exception,
and every segment passes the strict index check afterwards. ``KAFKALOG_CONCURRENCY_APPENDS`` scales the work.
"""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path
from typing import Any

from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager.log_manager import LogManager

APPENDS = int(os.environ.get("KAFKALOG_CONCURRENCY_APPENDS", "150"))
TOPIC = "conc"
PROPS = {"segment.bytes": 8192, "segment.index.bytes": 1024, "index.interval.bytes": 256}


def value_for(writer: str, seq: int, i: int) -> tuple[bytes, bytes]:
    key = f"{writer}/{seq}/{i}".encode()
    return key, key * (1 + (seq * 7 + i) % 9)


class Ledger:
    """Acknowledged appends: offset -> (key, value), filled by appender threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_offset: dict[int, tuple[bytes, bytes]] = {}
        self.errors: list[str] = []

    def ack(self, first: int, last: int, recs: list[tuple[bytes, bytes]]) -> None:
        with self.lock:
            if last - first + 1 != len(recs):
                self.errors.append(f"append of {len(recs)} records got offsets {first}..{last}")
            for off, rec in zip(range(first, last + 1), recs, strict=False):
                if off in self.by_offset:
                    self.errors.append(f"offset {off} given twice")
                self.by_offset[off] = rec


def check_read(batches: list[Any], errors: list[str], where: str) -> None:
    """A read answer: whole valid batches, offsets contiguous across them."""
    nxt = None
    for b in batches:
        if not b.is_valid():
            errors.append(f"{where}: served a batch with a bad CRC at {b.base_offset}")
        recs = b.records()
        if len(recs) != b.last_offset - b.base_offset + 1 or recs[0].offset != b.base_offset:
            errors.append(f"{where}: batch {b.base_offset}..{b.last_offset} holds {len(recs)} records")
        if nxt is not None and b.base_offset != nxt:
            errors.append(f"{where}: read jumped from {nxt} to {b.base_offset}")
        nxt = b.last_offset + 1


def run_threads(targets: list[tuple[str, Any]], stop: threading.Event, n_appenders: int) -> list[str]:
    """Start the threads; appenders (the first ``n_appenders``) run to completion, then the others are stopped."""
    errors: list[str] = []

    def wrap(name: str, fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001
                import traceback

                errors.append(f"thread {name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                stop.set()

        return run

    threads = [threading.Thread(target=wrap(n, f), name=n) for n, f in targets]
    for t in threads:
        t.start()
    for t in threads[:n_appenders]:
        t.join(timeout=300)
    stop.set()
    for t in threads:
        t.join(timeout=120)
        if t.is_alive():
            errors.append(f"thread {t.name} hung")
    return errors


def verify_against_ledger(log: Log, ledger: Ledger, read: Any) -> None:
    start, end = log.log_start_offset, log.log_end_offset
    assert set(ledger.by_offset) == set(range(end)), "acknowledged offsets are not exactly [0, log end)"
    off = start
    while off < end:
        batches = read(off)
        assert batches
        for b in batches:
            for r in b.records():
                if r.offset < off:
                    continue
                assert r.offset == off
                assert (r.key, r.value) == ledger.by_offset[off], f"record {off} is not what was acknowledged"
                off += 1
    for seg in log.segments.values():
        if seg.size == 0 and not seg.offset_index.file.exists():
            continue  # freshly rolled, never appended to: index not created yet (lazy, as Kafka)
        seg.sanity_check(strict=True)


def test_manager_threads(tmp_path: Path) -> None:
    """2 partitions x (2 appenders, 2 readers), a roller, retention, flush+checkpoints and repeated background
    sanity-checker runs over segments left pending by a lazy (KIP-263) startup."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    cfg = LogConfig.from_properties({**PROPS, "retention.bytes": 30000})
    broker = {"node.id": 1, "cluster.id": "concurrency-cluster00", "sanity.check.all.logs.enabled": False,
              "file.delete.delay.ms": 0, "log.retention.check.interval.ms": 3_600_000}
    ledgers = {p: Ledger() for p in range(2)}
    with LogManager(dirs, log_config=cfg, properties=broker) as mgr:  # some history: inactive segments
        for p in range(2):
            mgr.get_or_create_log(TOPIC, p)
            for seq in range(40):
                recs = [value_for("pre", seq, i) for i in range(5)]
                info = mgr.append(TOPIC, p, recs)
                ledgers[p].ack(info.first_offset, info.last_offset, recs)
    stop = threading.Event()
    read_errors: list[str] = []
    with LogManager(dirs, log_config=cfg, properties=broker) as mgr:

        def appender(p: int, name: str) -> Any:
            def run() -> None:
                rng = random.Random(name)
                for seq in range(APPENDS):
                    if stop.is_set():
                        return
                    recs = [value_for(name, seq, i) for i in range(rng.randint(1, 12))]
                    info = mgr.append(TOPIC, p, recs)
                    ledgers[p].ack(info.first_offset, info.last_offset, recs)

            return run

        def reader(p: int, name: str) -> Any:
            def run() -> None:
                rng = random.Random(name)
                log = mgr.get_log(TOPIC, p)
                while not stop.is_set():
                    off = rng.randint(max(0, log.log_start_offset - 5), log.log_end_offset)
                    try:
                        batches = mgr.read(TOPIC, p, off, rng.choice([100, 4096, 1 << 20]))
                    except OffsetOutOfRangeError:
                        continue  # retention moved the start past it
                    check_read(batches, read_errors, f"{TOPIC}-{p} read({off})")

            return run

        def roller() -> None:
            rng = random.Random("roll")
            while not stop.is_set():
                mgr.roll(TOPIC, rng.randint(0, 1))
                stop.wait(0.01)

        def retention() -> None:
            while not stop.is_set():
                for p in range(2):
                    mgr.delete_old_segments(TOPIC, p)
                mgr.delete_logs()
                stop.wait(0.02)

        def flusher() -> None:
            while not stop.is_set():
                for p in range(2):
                    mgr.flush(TOPIC, p)
                mgr.checkpoint_recovery_offsets()
                mgr.checkpoint_log_start_offsets()
                stop.wait(0.02)

        def checker() -> None:
            while not stop.is_set():
                mgr.start_sanity_checker().wait(30)
                stop.wait(0.01)

        targets = [(f"append-{p}-{k}", appender(p, f"w{p}{k}")) for p in range(2) for k in range(2)]
        n_app = len(targets)
        targets += [(f"read-{p}-{k}", reader(p, f"r{p}{k}")) for p in range(2) for k in range(2)]
        targets += [("roll", roller), ("retention", retention), ("flush", flusher), ("checker", checker)]
        errors = run_threads(targets, stop, n_app)
        assert errors == [], "\n".join(errors)
        assert read_errors == [], "\n".join(read_errors[:20])
        for p in range(2):
            assert ledgers[p].errors == []
            log = mgr.get_log(TOPIC, p)
            verify_against_ledger(log, ledgers[p], lambda off, p=p: mgr.read(TOPIC, p, off))
        assert mgr.offline_log_dirs == []
    with LogManager(dirs, log_config=cfg, properties=broker) as mgr:  # and it all comes back after a restart
        for p in range(2):
            verify_against_ledger(mgr.get_log(TOPIC, p), ledgers[p], lambda off, p=p, m=mgr: m.read(TOPIC, p, off))


def test_bare_log_threads(tmp_path: Path) -> None:
    """A bare Log shared by 3 appenders, 3 readers and a roller (Log's own lock; reads outside it)."""
    log = Log.open(tmp_path / f"{TOPIC}-0", LogConfig.from_properties(PROPS))
    ledger = Ledger()
    stop = threading.Event()
    read_errors: list[str] = []

    def appender(name: str) -> Any:
        def run() -> None:
            rng = random.Random(name)
            for seq in range(APPENDS):
                recs = [value_for(name, seq, i) for i in range(rng.randint(1, 12))]
                info = log.append_as_leader(recs)
                ledger.ack(info.first_offset, info.last_offset, recs)

        return run

    def reader(name: str) -> Any:
        def run() -> None:
            rng = random.Random(name)
            while not stop.is_set():
                off = rng.randint(0, log.log_end_offset)
                check_read(log.read(off, rng.choice([100, 4096])), read_errors, f"read({off})")

        return run

    def roller() -> None:
        while not stop.is_set():
            log.roll()
            stop.wait(0.005)

    targets = [(f"append-{k}", appender(f"w{k}")) for k in range(3)]
    targets += [(f"read-{k}", reader(f"r{k}")) for k in range(3)] + [("roll", roller)]
    try:
        errors = run_threads(targets, stop, 3)
        assert errors == [], "\n".join(errors)
        assert read_errors == [], "\n".join(read_errors[:20])
        assert ledger.errors == []
        verify_against_ledger(log, ledger, lambda off: log.read(off))
    finally:
        log.close()

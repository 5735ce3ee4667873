"""kafkalog.io.cpu_gate: how many threads run gated work at once, and io_wait handing a slot over while blocked."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkalog.errors import ConfigError, InvalidArgumentError
from kafkalog.io.cpu_gate import CpuGate, io_wait
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager
from kafkalog.manager.log_manager import BrokerConfig
from tests.threads import run_threads

WAIT = 10  # seconds; only reached when the gate is broken


def test_gate_admits_exactly_its_slots() -> None:
    gate = CpuGate(2)
    inside, peak, lock = [0], [0], threading.Lock()
    both_in = threading.Barrier(2, timeout=WAIT)  # two threads can be inside at the same time

    def work() -> None:
        with gate.held():
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            both_in.wait()  # 4 threads: two pairs, each pair inside together
            with lock:
                inside[0] -= 1

    assert not run_threads(lambda _: work(), 4, WAIT)
    assert peak[0] == 2


def test_io_wait_lends_the_slot_and_takes_it_back() -> None:
    gate = CpuGate(1)
    in_io = threading.Event()
    other_ran = threading.Event()
    order: list[str] = []

    def blocked_on_device() -> None:
        with gate.held():
            with io_wait():
                in_io.set()
                assert other_ran.wait(WAIT), "the slot was not lent while waiting on the device"
                order.append("io done")
            order.append("back in gate")

    def other() -> None:
        assert in_io.wait(WAIT)
        with gate.held():
            order.append("other")
        other_ran.set()

    t1 = threading.Thread(target=blocked_on_device)
    t2 = threading.Thread(target=other)
    t1.start(), t2.start()
    t1.join(WAIT), t2.join(WAIT)
    assert order == ["other", "io done", "back in gate"]
    # the slot is free again: a fresh holder gets it at once
    assert gate._sem.acquire(timeout=WAIT)


def test_io_wait_outside_a_gate_is_a_noop_and_held_is_reentrant() -> None:
    with io_wait():
        pass
    gate = CpuGate(1)
    with gate.held():
        with gate.held():  # the same thread again: no self-deadlock
            with io_wait():
                pass
    assert gate._sem.acquire(timeout=WAIT)  # every slot was given back


def test_an_exception_inside_gives_the_slot_back() -> None:
    gate = CpuGate(1)
    with pytest.raises(RuntimeError):
        with gate.held():
            raise RuntimeError("boom")
    assert gate._sem.acquire(timeout=WAIT)


@pytest.mark.parametrize("slots", [0, -1, 1.5, True, "2"])
def test_bad_slot_counts_are_refused(slots) -> None:
    with pytest.raises(InvalidArgumentError):
        CpuGate(slots)


def test_recovery_concurrency_key() -> None:
    assert BrokerConfig().recovery_concurrency == 1
    assert BrokerConfig.from_properties({"kafkalog.recovery.concurrency": "3"}).recovery_concurrency == 3
    for bad in (0, "x", -2):
        with pytest.raises(ConfigError):
            BrokerConfig.from_properties({"kafkalog.recovery.concurrency": bad})


@pytest.mark.parametrize("concurrency", [1, 2])
def test_startup_and_shutdown_load_at_most_concurrency_partitions_at_once(tmp_path: Path, monkeypatch,
                                                                          concurrency: int) -> None:
    cfg = LogConfig.from_properties({"segment.bytes": 600})
    dirs = [tmp_path / "a", tmp_path / "b"]
    with LogManager(dirs, log_config=cfg) as m:
        for p in range(12):
            m.get_or_create_log("t", p)
            m.append("t", p, [(b"k", b"v" * 200)] * 3)
    inside, peak, lock = [0], [0], threading.Lock()
    original = LogManager._open_log

    def counting_open(self, *a, **kw):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        try:
            threading.Event().wait(0.005)  # long enough for the other loaders to try to come in
            return original(self, *a, **kw)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(LogManager, "_open_log", counting_open)
    props = {"num.recovery.threads.per.data.dir": 4, "kafkalog.recovery.concurrency": concurrency}
    with LogManager(dirs, log_config=cfg, properties=props) as m:
        assert len(m.all_logs()) == 12
        assert all(lg.log_end_offset == 3 for lg in m.all_logs())
    assert 1 <= peak[0] <= concurrency

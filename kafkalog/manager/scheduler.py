"""Background housekeeping threads with a clean stop (Kafka's ``KafkaScheduler``, trimmed to what we need).

Tasks run on a small pool of daemon threads fed from one time-ordered heap. Periods are wall-clock intervals
(``time.monotonic``), not the manager's ``clock``: the clock decides *what* is due (retention, deletion delays),
the scheduler only decides *when to look*. ``shutdown()`` wakes every worker, waits for a running task to
finish and joins the threads, so nothing outlives the manager.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Scheduler", "ScheduledTask"]

_log = logging.getLogger(__name__)

# Kafka schedules nothing closer than this after start; also the floor for a period so a 0 cannot spin.
_MIN_PERIOD_S = 0.001


@dataclass(order=True)
class ScheduledTask:
    due: float
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    period_s: float | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)
    runs: int = field(compare=False, default=0)

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """Run named callables once or periodically on ``threads`` daemon threads until ``shutdown()``."""

    def __init__(self, *, threads: int = 1, name: str = "kafkalog-scheduler") -> None:
        self._threads_wanted = max(1, threads)
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._running = False

    @property
    def is_running(self) -> bool:
        return self._running

    def startup(self) -> None:
        with self._cond:
            if self._running:
                return
            self._running = True
            for i in range(self._threads_wanted):
                t = threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True)
                self._threads.append(t)
                t.start()

    def schedule(
        self, name: str, fn: Callable[[], object], *, delay_ms: float = 0, period_ms: float | None = None
    ) -> ScheduledTask:
        """Run ``fn`` after ``delay_ms`` and then every ``period_ms`` (None: once). Periods are not catch-up."""
        period_s = None if period_ms is None else max(_MIN_PERIOD_S, period_ms / 1000.0)
        task = ScheduledTask(time.monotonic() + max(0.0, delay_ms) / 1000.0, next(self._seq), name, fn, period_s)
        with self._cond:
            heapq.heappush(self._heap, task)
            self._cond.notify()
        return task

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Stop taking tasks, let running ones finish, join every thread."""
        with self._cond:
            self._running = False
            self._heap.clear()
            self._cond.notify_all()
            threads, self._threads = self._threads, []
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join(timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._running:
                        return
                    if self._heap and self._heap[0].cancelled:
                        heapq.heappop(self._heap)
                        continue
                    now = time.monotonic()
                    if self._heap and self._heap[0].due <= now:
                        task = heapq.heappop(self._heap)
                        break
                    # Periods above ~49 days (Kafka's Long.MaxValue defaults) must not overflow wait().
                    wait = min(self._heap[0].due - now, 3600.0) if self._heap else None
                    self._cond.wait(wait)
            try:
                task.fn()
            except Exception:  # a housekeeping task must never kill its thread
                _log.exception("scheduled task %s failed", task.name)
            task.runs += 1
            if task.period_s is not None and not task.cancelled:
                with self._cond:
                    if self._running:
                        task.due = time.monotonic() + task.period_s
                        heapq.heappush(self._heap, task)
                        self._cond.notify()

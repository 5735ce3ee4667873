"""``log.cleaner.io.max.bytes.per.second`` (Kafka's ``Throttler``): the cleaner reports the bytes it reads and
writes, and sleeps whenever its rate over the last check interval passes the limit."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]


class Throttler:
    """Keeps a byte rate at or below ``max_bytes_per_second`` (infinite: never sleeps), checked every
    ``check_interval_ms``; ``sleep`` is interruptible by a caller that passes an Event's ``wait``."""

    def __init__(self, max_bytes_per_second: float, *, check_interval_ms: int = 300,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.rate = float(max_bytes_per_second)
        self._interval_s = check_interval_ms / 1000.0
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0

    def __call__(self, nbytes: int) -> None:
        if math.isinf(self.rate) or nbytes <= 0:
            return
        with self._lock:
            self._observed += nbytes
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self._interval_s:
                return
            wanted = self._observed / self.rate  # seconds the observed bytes may take at the limit
            wait = wanted - elapsed
            self._period_start, self._observed = now, 0.0
        if wait > 0:
            self._sleep(wait)
            with self._lock:
                self._period_start = self._clock()

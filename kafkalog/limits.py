"""Java's fixed-width integer limits, as Kafka's formats and APIs use them (``Long.MAX_VALUE`` is Kafka's "no
limit" for offsets and timestamps), and the wall clock Kafka's ``Time.SYSTEM.milliseconds()`` reads.

One home, so every layer (records, checkpoints, segments, log, manager) compares against the same values.
"""

from __future__ import annotations

import time

__all__ = ["INT_MAX", "INT_MIN", "LONG_MAX", "LONG_MIN", "wall_clock_ms"]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock of segments, logs and producer state (tests pass their own)."""
    return time.time_ns() // 1_000_000

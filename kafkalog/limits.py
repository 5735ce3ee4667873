"""Java's fixed-width integer limits, as Kafka's formats and APIs use them (``Long.MAX_VALUE`` is Kafka's "no
limit" for offsets and timestamps), and the wall clock Kafka's ``Time.SYSTEM.milliseconds()`` reads.

One home, so every layer (records, checkpoints, segments, log, manager) compares against the same values.
"""

from __future__ import annotations

import time

__all__ = [
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "NUM_BATCHES_TO_RETAIN",
    "wall_clock_ms",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1

# Kafka's "none" values of a batch's producer fields and of a timestamp (RecordBatch.NO_PRODUCER_ID etc.).
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

# Producer state limits and defaults: batches remembered per producer for duplicate detection
# (ProducerStateEntry.NUM_BATCHES_TO_RETAIN), producer.id.expiration.ms, transaction.max.timeout.ms.
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock of segments, logs and producer state (tests pass their own)."""
    return time.time_ns() // 1_000_000

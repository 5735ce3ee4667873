"""Work in parallel, in order, within a memory bound: the bandwidth an object store gives one reader.

A GET waits a round trip for its first byte (20-50 ms on a real bucket, more across regions), so a reader that
asks for one range at a time is bound by latency, not bandwidth: 8 MiB every 25 ms is at most 320 MiB/s however
fast the store. Here a reader keeps up to ``parallelism`` ranges in flight while it consumes the earlier ones in
order (the next chunks are fetched while the current one decodes), and the process keeps at most
:data:`PROCESS_READS` in flight across all readers. Memory: at most ``parallelism`` x the range size per reader
(default 8 x 8 MiB = 64 MiB), and :data:`PROCESS_READS` x 8 MiB = 256 MiB for the process.

``KAFKALOG_READ_PARALLELISM`` sets the default per reader (1 turns the pipelining off). Work submitted from a
worker of the pool runs serially (no nesting, so no pool can wait on itself). The object reads built on it are
:mod:`kafkalog.archive.storage`'s (``iter_object_ranges``, ``fetch``), :mod:`kafkalog.archive.object_reads`'
``iter_objects`` and Aiven's chunk pipeline.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["PART_BYTES", "PROCESS_READS", "default_parallelism", "iter_parallel", "split_range"]

T = TypeVar("T")

#: bytes per ranged GET: large enough to amortize a request, small enough to bound memory
PART_BYTES = 8 << 20
#: ranged reads in flight in one process, all readers together
PROCESS_READS = 32
_THREAD_PREFIX = "kafkalog-read"
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def default_parallelism() -> int:
    """Ranges in flight per reader: ``KAFKALOG_READ_PARALLELISM`` or 8 (1..PROCESS_READS)."""
    raw = os.environ.get("KAFKALOG_READ_PARALLELISM", "")
    try:
        value = int(raw) if raw else 8
    except ValueError:
        value = 8
    return max(1, min(value, PROCESS_READS))


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=PROCESS_READS, thread_name_prefix=_THREAD_PREFIX)
        return _POOL


def _in_pool() -> bool:
    return threading.current_thread().name.startswith(_THREAD_PREFIX)


def iter_parallel(tasks: Iterable[Callable[[], T]], parallelism: int | None = None) -> Iterator[T]:
    """Run ``tasks`` with up to ``parallelism`` in flight and yield their results in order. An exception is
    raised where its task's result would have been yielded; closing the iterator cancels what has not started."""
    n = default_parallelism() if parallelism is None else max(1, parallelism)
    it = iter(tasks)
    if n == 1 or _in_pool():
        for task in it:
            yield task()
        return
    pool = _pool()
    window: deque[Future[T]] = deque()
    try:
        for task in it:
            window.append(pool.submit(task))
            if len(window) >= n:
                break
        while window:
            result = window.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                window.append(pool.submit(nxt))
            yield result
    finally:
        for fut in window:
            fut.cancel()


def split_range(start: int, end: int, part: int = PART_BYTES) -> list[tuple[int, int]]:
    """``[start, end)`` as consecutive ranges of at most ``part`` bytes."""
    return [(s, min(s + part, end)) for s in range(start, end, part)]

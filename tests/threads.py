"""Threads for tests that race the code under test against itself: each runs ``work(k)``, and what it raises is
collected for the test to assert on (an exception in a plain ``threading.Thread`` is only printed, and would not
fail the test)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def threads_running(
    work: Callable[[int], object], n: int, timeout: float | None = None
) -> Iterator[list[BaseException]]:
    """``n`` threads running ``work(0)`` .. ``work(n - 1)`` while the block runs (for a test that acts on them
    meanwhile); joined on leaving it, each for up to ``timeout`` seconds (one still running then fails the test).
    Yields the list of what they raised, filled in by the time the block is left."""
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            work(k)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    try:
        yield errors
    finally:
        for t in threads:
            t.join(timeout)
    hung = sum(t.is_alive() for t in threads)
    assert not hung, f"{hung} of {n} threads still running {timeout} s after the block"


def run_threads(work: Callable[[int], object], n: int, timeout: float | None = None) -> list[BaseException]:
    """Run ``work(0)`` .. ``work(n - 1)`` in ``n`` threads at once, wait for them all; what they raised."""
    with threads_running(work, n, timeout) as errors:
        pass
    return errors

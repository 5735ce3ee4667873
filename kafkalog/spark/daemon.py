"""PySpark's worker daemon, minus the traceback it prints when a session stops.

Spark 4.x (SPARK-54344) re-raises a failed flush in a forked worker, and the daemon prints its traceback. When a
session stops, the JVM closes the sockets of idle reused workers; each of them wakes up, fails to send its
end-of-stream, and prints a ``BrokenPipeError`` traceback on the driver's terminal although every task succeeded.
kafkalog's CLI promises no tracebacks, so ``DEFAULT_CONF`` points ``spark.python.daemon.module`` here.

This module runs the stock daemon unchanged except for two things: a worker whose socket the JVM has already
closed (``BrokenPipeError`` or ``ConnectionResetError``) exits at once, as SPARK-54344 wants, without printing
anything (the JVM has already given up on that socket, so there is nobody left to tell; any other error keeps
PySpark's behaviour); and a reused worker freezes its long-lived objects after its first task
(:func:`kafkalog.spark.worker_gc.freeze_once`), so the full collection the stock daemon runs between tasks does
not walk them.

Executors import it as ``python -m kafkalog.spark.daemon``; they need kafkalog installed anyway for the jobs.
"""

from __future__ import annotations

import os
from typing import Any

import pyspark.daemon as _stock

from kafkalog.spark.worker_gc import freeze_once

_stock_worker = _stock.worker


def worker(sock: Any, authenticated: bool) -> int:
    """PySpark's ``daemon.worker``; a socket the JVM closed ends the forked worker process quietly."""
    try:
        code = _stock_worker(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):
        # os._exit, as the stock daemon ends a worker: returning would free the worker's buffered socket files,
        # whose finalizers would try the failed flush again and print "Exception ignored" instead.
        os._exit(1)
    freeze_once()
    return code


def main() -> None:
    # manager() looks ``worker`` up in its module's globals when it forks a worker, so rebinding it there is enough.
    _stock.worker = worker
    _stock.manager()


if __name__ == "__main__":
    main()

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

Some workers run PySpark's daemon whatever ``spark.python.daemon.module`` says: Spark starts the planner workers of
a Python DataSource (``pyspark.sql.worker.create_data_source``, ``plan_data_source_read``, ...) with the hard-coded
``pyspark.daemon`` (``SparkEnv.createPythonWorker`` without a daemon module), and a cluster's task workers start
theirs before kafkalog is on their path. Those print the same traceback when their idle worker's socket is closed.
kafkalog code that runs in such a worker (the DataSource's constructor and ``reader()`` in the planner, the tasks)
calls :func:`quiet_stock_daemon`, which routes that worker's later tasks through the same quiet wrapper.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import pyspark.daemon as _stock

from kafkalog.spark.worker_gc import freeze_once

_stock_worker = _stock.worker


def _run_quietly(stock: Callable[[Any, bool], int], sock: Any, authenticated: bool) -> int:
    try:
        code = stock(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):
        # os._exit, as the stock daemon ends a worker: returning would free the worker's buffered socket files,
        # whose finalizers would try the failed flush again and print "Exception ignored" instead.
        os._exit(1)
    freeze_once()
    return code


def worker(sock: Any, authenticated: bool) -> int:
    """PySpark's ``daemon.worker``; a socket the JVM has already closed ends the forked worker process quietly."""
    return _run_quietly(_stock_worker, sock, authenticated)


def quiet_stock_daemon() -> bool:
    """In a worker forked by PySpark's own daemon (``python -m pyspark.daemon``, so its module is ``__main__``),
    run the worker's later tasks through :func:`worker`'s quiet wrapper; True when it did. Elsewhere (a driver, a
    script, a worker of :mod:`kafkalog.spark.daemon`) it does nothing.

    The daemon's forked child calls the ``worker`` of its module's globals for every task it serves, so rebinding
    it there takes effect from the next task on: the idle wait whose closed socket printed the traceback."""
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    stock = getattr(main_module, "worker", None)
    if getattr(spec, "name", None) != "pyspark.daemon" or not callable(stock) or getattr(stock, "quiet", False):
        return False
    quiet = functools.partial(_run_quietly, stock)
    quiet.quiet = True  # type: ignore[attr-defined]  # partial objects take attributes
    main_module.worker = quiet  # type: ignore[union-attr]
    return True


def main() -> None:
    # manager() looks ``worker`` up in its module's globals when it forks a worker, so rebinding it there is enough.
    _stock.worker = worker
    _stock.manager()


if __name__ == "__main__":
    main()

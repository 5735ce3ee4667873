"""PySpark's worker daemon, minus the traceback it prints when a session stops.

Spark 4.x (SPARK-54344) re-raises a failed flush in a forked worker, and the daemon prints its traceback. When a
session stops, the JVM closes the sockets of idle reused workers; each of them wakes up, fails to send its
end-of-stream, and prints a ``BrokenPipeError`` traceback on the driver's terminal although every task succeeded.
kafkalog's CLI promises no tracebacks, so ``DEFAULT_CONF`` points ``spark.python.daemon.module`` here.

This module runs the stock daemon unchanged except for two things: a worker whose socket the JVM has already
closed (``BrokenPipeError`` or ``ConnectionResetError``) exits at once, as SPARK-54344 wants, without printing
anything (the JVM has already given up on that socket, so there is nobody left to tell; any other error keeps
PySpark's behaviour); and a reused worker freezes its long-lived objects after its first task, and after a later
one that left many more (:func:`kafkalog.spark.worker_gc.freeze_survivors`), so the full collection the stock daemon
runs between tasks does not walk them.

Executors import it as ``python -m kafkalog.spark.daemon``; they need kafkalog installed anyway for the jobs.

Some workers run PySpark's daemon whatever ``spark.python.daemon.module`` says: Spark starts the planner workers of
a Python DataSource (``pyspark.sql.worker.create_data_source``, ``plan_data_source_read``, ...) with the hard-coded
``pyspark.daemon`` (``SparkEnv.createPythonWorker`` without a daemon module), and a cluster's task workers start
theirs before kafkalog is on their path. Those print the same traceback when their idle worker's socket is closed.
kafkalog code that runs in such a worker (the DataSource's constructor and ``reader()`` in the planner, the tasks)
calls :func:`quiet_stock_daemon`, which silences that worker's exit on a closed socket the same way.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import pyspark.daemon as _stock

from kafkalog.spark.worker_gc import freeze_survivors

_stock_worker = _stock.worker
#: what a worker's flush raises when the JVM has already closed its socket
_CLOSED = (BrokenPipeError, ConnectionResetError)


def worker(sock: Any, authenticated: bool) -> int:
    """PySpark's ``daemon.worker``; a socket the JVM has already closed ends the forked worker process quietly."""
    try:
        code = _stock_worker(sock, authenticated)
    except _CLOSED:
        # os._exit, as the stock daemon ends a worker: returning would free the worker's buffered socket files,
        # whose finalizers would try the failed flush again and print "Exception ignored" instead.
        os._exit(1)
    freeze_survivors()
    return code


class _QuietTraceback:
    """The ``traceback`` module for a forked worker's last words: a socket the JVM already closed prints nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def print_exc(*args: Any, **kwargs: Any) -> None:
        if not isinstance(sys.exc_info()[1], _CLOSED):
            traceback.print_exc(*args, **kwargs)


def quiet_stock_daemon() -> bool:
    """In a worker forked by PySpark's own daemon (``python -m pyspark.daemon``, so its module is ``__main__``),
    make the traceback of a socket the JVM already closed silent; True when it did. Elsewhere (a driver, a
    script, a worker of :mod:`kafkalog.spark.daemon`) it does nothing.

    The failed flush happens after the task's own code returned, in the daemon's ``worker`` (the task that runs
    this, when the JVM closed the socket first; or a later one), and reaches the forked child's
    ``except BaseException: traceback.print_exc(); os._exit(1)``, which looks ``traceback`` up in the daemon
    module's globals: rebinding it there silences exactly that exit, in this worker process only."""
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if getattr(spec, "name", None) != "pyspark.daemon" or not callable(getattr(main_module, "manager", None)):
        return False
    if isinstance(getattr(main_module, "traceback", None), _QuietTraceback):
        return False
    main_module.traceback = _QuietTraceback()  # type: ignore[union-attr]
    return True


def main() -> None:
    # manager() looks ``worker`` up in its module's globals when it forks a worker, so rebinding it there is enough.
    _stock.worker = worker
    _stock.manager()


if __name__ == "__main__":
    main()

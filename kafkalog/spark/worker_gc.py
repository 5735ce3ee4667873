"""One full collection, then ``gc.freeze()``, per Python worker process.

A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``); by then it holds
every module it uses (pyspark, pyarrow, numpy, pandas, kafkalog), and walking them all again is most of a short
task's Python cost. Frozen objects are skipped by later collections (reference counting still frees them); only
cycles among objects alive at the freeze stay uncollected. ``kafkalog.spark.daemon`` calls :func:`freeze_once`
after a worker's first task on local masters; a cluster's workers run PySpark's own daemon (kafkalog reaches them
later, as a shipped zip), so the DataSource's ``read`` and the validation tasks call :func:`freeze_worker_once` at
the start of their first task.
"""

from __future__ import annotations

import gc
import sys

_frozen = False


def freeze_once() -> None:
    """Collect once and freeze what is left; later calls in the same process do nothing."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()


def freeze_worker_once() -> None:
    """:func:`freeze_once` in a PySpark Python worker, nothing elsewhere: a driver or a script that calls the
    DataSource's reader in its own process keeps its collections (whatever it holds then would never be
    collected). PySpark's daemon imports ``pyspark.worker`` in a forked worker before it runs any task."""
    if "pyspark.worker" in sys.modules:
        freeze_once()


def fresh_worker_age() -> float:
    """In a PySpark worker that has not finished a task yet (nothing frozen: the daemon freezes after the first, the
    tasks at their start), the process's age: its fork, imports and the unpickling of the task's function. 0 in a
    reused worker and outside Spark. Call it before :func:`freeze_worker_once`."""
    if _frozen or "pyspark.worker" not in sys.modules:
        return 0.0
    from kafkalog.spark.timings import process_age

    return process_age() or 0.0

"""A full collection, then ``gc.freeze()``, in each Python worker: before its first task, and again once tasks have
left many more long-lived objects.

A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``); by then it holds
every module it uses (pyspark, pyarrow, numpy, pandas, kafkalog), and walking them all again is most of a short
task's Python cost. Frozen objects are skipped by later collections (reference counting still frees them); only
cycles among objects alive at the freeze stay uncollected. ``kafkalog.spark.daemon`` calls :func:`freeze_survivors`
after each task on local masters; a cluster's workers run PySpark's own daemon (kafkalog reaches them later, as a
shipped zip), so the DataSource's ``read`` and the validation tasks call :func:`freeze_worker` at the start of
each task. The first call freezes; a later one freezes again only when more than FREEZE_OVER objects are left
unfrozen (what a first task imported: its modules are long-lived too, and a worker that froze only before its first
DataSource task left ~34,000 such objects, ~15 ms of collecting after every later task).
"""

from __future__ import annotations

import gc
import sys

_frozen = False
#: unfrozen objects a worker may keep before a later call freezes them too (a task's own garbage is far fewer)
FREEZE_OVER = 5000


def freeze_survivors() -> None:
    """Collect and freeze what is left: on the first call, and on later ones when more than FREEZE_OVER objects
    are left unfrozen (what the tasks since imported); otherwise nothing (the count is one pass over the unfrozen
    objects, cheaper than the collection the daemon runs between tasks)."""
    global _frozen
    if _frozen and len(gc.get_objects()) <= FREEZE_OVER:
        return
    gc.collect()
    if _frozen and len(gc.get_objects()) <= FREEZE_OVER:
        return
    _frozen = True
    gc.freeze()


def freeze_worker() -> None:
    """:func:`freeze_survivors` in a PySpark Python worker, nothing elsewhere: a driver or a script that calls the
    DataSource's reader in its own process keeps its collections (whatever it holds then would never be
    collected). PySpark's daemon imports ``pyspark.worker`` in a forked worker before it runs any task."""
    if "pyspark.worker" in sys.modules:
        freeze_survivors()


def fresh_worker_age() -> float:
    """In a PySpark worker that has not finished a task yet (nothing frozen: the daemon freezes after the first, the
    tasks at their start), the process's age: its fork, imports and the unpickling of the task's function. 0 in a
    reused worker and outside Spark. Call it before :func:`freeze_worker`."""
    if _frozen or "pyspark.worker" not in sys.modules:
        return 0.0
    from kafkalog.spark.timings import process_age

    return process_age() or 0.0

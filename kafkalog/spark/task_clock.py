"""What the tasks of a Spark job say about their own time, summed on the driver through an accumulator.

The driver sees a job as one ``collect()``; the tasks know when they started and ended, how long their fresh
worker took to start (fork, imports, unpickling the function: the process's age when the function first runs),
and how long their work and their result's encoding took. With the wall-clock ends of the first and the last task
the driver splits the job into scheduling (until the first task runs), the tasks' span and the collection after
the last one (:func:`job_phases`). On a cluster the executors' clocks are other hosts': the split is approximate.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.accumulators import AccumulatorParam

from kafkalog.spark.worker_gc import fresh_worker_age

__all__ = ["ClockParam", "job_phases", "new_clock", "task_started"]



class ClockParam(AccumulatorParam):
    """Merges task reports: counts and seconds add up, ``first`` is the earliest start, ``last`` the latest end,
    ``*_max`` the largest."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:  # noqa: N802 (PySpark's name)
        out = dict(a)
        for k, v in b.items():
            if k == "first":
                out[k] = min(out.get(k, v), v)
            elif k == "last" or k.endswith("_max"):
                out[k] = max(out.get(k, v), v)
            else:
                out[k] = out.get(k, 0) + v
        return out


def new_clock(sc) -> Any:
    """An accumulator the tasks of one job add their :func:`task_started` reports to."""
    return sc.accumulator({}, ClockParam())


def task_started() -> dict:
    """A task's report so far: its start (wall clock), and its fresh worker's start-up (0 for a reused one; call
    it before the task's ``freeze_worker``)."""
    return {"tasks": 1, "first": time.time(), "worker_start_max": fresh_worker_age(), "work": 0.0, "encode": 0.0}


def job_phases(clock: dict, submitted: float, returned: float, cores: int) -> dict[str, float]:
    """A job's wall time (``submitted`` to ``returned``, ``time.time()`` on the driver) as consecutive phases,
    ``to_first_task`` + ``tasks`` + ``collect`` = the job, and what the tasks' own figures say inside them:
    ``worker_start`` (the slowest fresh worker's start-up), ``work_per_core`` and ``encode_per_core`` (the tasks'
    sums over the cores they had)."""
    if not clock.get("tasks"):
        return {"tasks_run": 0.0}
    first = min(max(clock["first"], submitted), returned)
    last = min(max(clock["last"], first), returned)
    used = max(1, min(cores, int(clock["tasks"])))
    return {
        "to_first_task": first - submitted,
        "tasks": last - first,
        "collect": returned - last,
        "tasks_run": float(clock["tasks"]),
        "worker_start": clock.get("worker_start_max", 0.0),
        "work_per_core": clock["work"] / used,
        "encode_per_core": clock["encode"] / used,
    }

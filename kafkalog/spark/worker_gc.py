"""One full collection, then ``gc.freeze()``, per Python worker process, called from kafkalog's own task code.

A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``); by then it holds
every module it uses (pyspark, pyarrow, numpy, pandas, kafkalog), and walking them all again is most of a short
task's Python cost. Frozen objects are skipped by later collections (reference counting still frees them); only
cycles among objects alive at the freeze stay uncollected. ``kafkalog.spark.daemon`` calls this after a worker's
first task on local masters; a cluster's workers run PySpark's own daemon (kafkalog reaches them later, as a
shipped zip), so the DataSource's ``read`` and the validation tasks call it too, at the start of their first task.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_once() -> None:
    """Collect once and freeze what is left; later calls in the same process do nothing."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.collect()
        gc.freeze()

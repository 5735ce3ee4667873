"""Imported by Spark itself, not by users: when a session first resolves a Python data source, PySpark's
``lookup_data_sources`` planner worker imports every top-level module whose name starts with ``pyspark_``.

That worker runs in PySpark's own daemon (``python -m pyspark.daemon pyspark.sql.worker.lookup_data_sources``, a
daemon of its own) and is the one planner worker in which no other kafkalog code runs, so nothing quiets the
``BrokenPipeError`` traceback it prints when the session stops and the JVM closes its socket. Importing this module
there does (:func:`kafkalog.spark.daemon.quiet_stock_daemon`; anywhere else it does nothing). It defines no
``DefaultSource``: the ``kafkalog`` format is registered by ``kafkalog.spark.register``, with its driver channel.
"""

try:
    from kafkalog.spark.daemon import quiet_stock_daemon
except ImportError:  # pyspark is not installed in this interpreter: there is no daemon to quiet
    pass
else:
    quiet_stock_daemon()

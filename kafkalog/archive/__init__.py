"""Where archives live: local dirs, object stores behind URLs, tiered-storage buckets.

:mod:`kafkalog.archive.storage` (pyarrow filesystems behind ``s3://``, ``gs://``, ``hdfs://`` ...),
:mod:`kafkalog.archive.discovery` (every segment under given roots, in Kafka's log-dir and LocalTieredStorage
layouts or Aiven's) and :mod:`kafkalog.archive.tiered` (objects as RemoteStorageManagers store them). It sits on
records, indexes and checkpoints, below the log layer, verification and Spark.
"""

"""The only place kafkalog opens, maps, reads, writes and syncs files, and reads what an ``OSError`` means.

Everything above (records, indexes, checkpoints, segments, logs) goes through :mod:`kafkalog.io.file_access`; the
bounded cache of open descriptors and mappings (:mod:`kafkalog.io.handle_cache`), the one reading of an ``OSError``
(:mod:`kafkalog.io.oserrors`), in-place rewrites of derived files (:mod:`kafkalog.io.rewrite`) and the CPU gate
recovery workers share (:mod:`kafkalog.io.cpu_gate`) sit beside it. Nothing here imports another kafkalog layer
but the foundations (``errors``, ``names``, ``limits``).
"""

"""The one home of verification: every rule that decides whether Kafka's files are sound, shared by
``kafkalog verify``, ``kafkalog dump``, ``kafkalog recover`` and the Spark job, so they give one verdict.

* :mod:`.log_file`: :func:`verify_log_file` -> :class:`LogFileReport` (with :class:`BatchReports`): one ``.log``.
* :mod:`.segment`: :func:`verify_segment` -> :class:`SegmentReport` (a Spark segment row): a discovered segment's
  ``.log`` and strict index checks; never raises.
* :mod:`.partition`: :func:`verify_partition` -> :class:`PartitionReport` (a Spark partition row): segments against
  each other, the log dir's offset checkpoints and the partition dir's metadata files.
* :mod:`.metadata`: leader epochs, ``partition.metadata``, producer snapshots, ``meta.properties``, offset
  checkpoints against the partition dirs present, loose files.
* :mod:`.index_match`: index entries against the log, every mismatch listed (what ``dump`` reports).
* :mod:`.findings`: :class:`Finding`, the one result type the CLI renders, :func:`describe_error` (what counts as
  corruption) and :class:`Tally` (counts and exit code); :mod:`.paths` runs all checks over operator-given paths.
* :mod:`.verdict`: :func:`summarize`, :func:`summary_fields` and :func:`exit_code` over Spark rows.

Names load on first access (:mod:`kafkalog._lazy`): the CLI's error classification imports ``findings``
alone, without the numpy-based checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from .findings import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, Finding, Tally, describe_error, error_finding, print_error
    from .index_match import OffsetIndexMatch, TimeIndexMatch, match_offset_index, match_time_index
    from .log_file import BatchReport, BatchReports, LogFileReport, verify_log_file
    from .metadata import PartitionFiles, check_file, check_log_dir, check_partition_files, read_checkpoint_offsets
    from .partition import PARTITION_FIELDS, PartitionReport, partition_finding, verify_partition
    from .paths import VerifyPlan, plan_paths, run_plan
    from .segment import SEGMENT_FIELDS, SegmentReport, segment_finding, verify_segment
    from .verdict import exit_code, summarize, summary_fields

_EXPORTS = {  # module -> the names it defines
    "kafkalog.verify.findings": (
        "EXIT_CORRUPT",
        "EXIT_OK",
        "EXIT_USAGE",
        "Finding",
        "Tally",
        "describe_error",
        "error_finding",
        "print_error",
    ),
    "kafkalog.verify.partition": ("PARTITION_FIELDS", "PartitionReport", "partition_finding", "verify_partition"),
    "kafkalog.verify.segment": ("SEGMENT_FIELDS", "SegmentReport", "segment_finding", "verify_segment"),
    "kafkalog.verify.log_file": ("BatchReport", "BatchReports", "LogFileReport", "verify_log_file"),
    "kafkalog.verify.index_match": ("OffsetIndexMatch", "TimeIndexMatch", "match_offset_index", "match_time_index"),
    "kafkalog.verify.metadata": (
        "PartitionFiles",
        "check_file",
        "check_log_dir",
        "check_partition_files",
        "read_checkpoint_offsets",
    ),
    "kafkalog.verify.paths": ("VerifyPlan", "plan_paths", "run_plan"),
    "kafkalog.verify.verdict": ("exit_code", "summarize", "summary_fields"),
}

__all__ = [
    "EXIT_CORRUPT",
    "EXIT_OK",
    "EXIT_USAGE",
    "PARTITION_FIELDS",
    "SEGMENT_FIELDS",
    "BatchReport",
    "BatchReports",
    "Finding",
    "LogFileReport",
    "OffsetIndexMatch",
    "PartitionFiles",
    "PartitionReport",
    "SegmentReport",
    "Tally",
    "TimeIndexMatch",
    "VerifyPlan",
    "check_file",
    "check_log_dir",
    "check_partition_files",
    "describe_error",
    "error_finding",
    "exit_code",
    "match_offset_index",
    "match_time_index",
    "partition_finding",
    "plan_paths",
    "print_error",
    "read_checkpoint_offsets",
    "run_plan",
    "segment_finding",
    "summarize",
    "summary_fields",
    "verify_log_file",
    "verify_partition",
    "verify_segment",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

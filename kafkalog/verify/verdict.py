"""The Spark job's verdict over many rows: :func:`summarize` (the text) and :func:`exit_code` (api.md's codes),
from segment and partition results (reports, dicts or pyspark Rows)."""

from __future__ import annotations

from collections.abc import Sequence

from .findings import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, row_value
from .partition import PARTITION_STATUS
from .segment import segment_status

__all__ = ["exit_code", "summarize", "summary_fields"]


def summarize(seg_rows: Sequence, part_rows: Sequence) -> str:
    """A short human summary of segment and partition results (reports, dicts or pyspark Rows)."""
    get = row_value
    n = len(seg_rows)
    by_status: dict[str, int] = {}
    for r in seg_rows:  # verify's verdicts, so the counts are verify's
        by_status[segment_status(r)] = by_status.get(segment_status(r), 0) + 1
    idx_bad = [r for r in seg_rows if get(r, "index_status") == "corrupt"]
    total = sum(get(r, "size_bytes") or 0 for r in seg_rows)
    invalid = sum(get(r, "invalid_bytes") or 0 for r in seg_rows)
    lines = [
        f"kafkalog archive validation: {n} segment(s), {len(part_rows)} partition dir(s), {total} bytes",
        "segments: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())),
        f"invalid bytes: {invalid}; corrupt indexes: {len(idx_bad)}",
    ]
    p_status: dict[str, int] = {}
    for r in part_rows:
        p_status[get(r, "status")] = p_status.get(get(r, "status"), 0) + 1
    lines.append("partitions: " + ", ".join(f"{k} {v}" for k, v in sorted(p_status.items())))
    bad = [r for r in seg_rows if segment_status(r) != "ok"]
    for r in bad[:20]:
        ranges = ", ".join(f"{p}+{s}" for p, s in (tuple(x) for x in get(r, "corrupt_ranges") or []))
        why = get(r, "error") or get(r, "index_error")
        lines.append(f"  {segment_status(r).upper()} {get(r, 'path')}: {why} [{ranges}]")
    for r in idx_bad[:20]:
        lines.append(f"  INDEX {get(r, 'path')}: {get(r, 'index_error')}")
    for r in part_rows:
        if get(r, "status") not in ("ok", "gap"):
            lines.append(f"  PARTITION {get(r, 'partition_dir')}: {'; '.join(get(r, 'problems') or [])}")
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more segment(s)")
    return "\n".join(lines) + "\n"


def exit_code(seg_rows: Sequence, part_rows: Sequence) -> int:
    """The exit code of a verification, by the rule of ``kafkalog verify`` and api.md (0 ok, 1 corruption, 2 usage
    or I/O error): 2 when any segment (its ``.log`` or an index) or partition is ``unreadable`` (an ``OSError``, or
    a tiered segment stored transformed: it could not be checked); else 1 when any segment is corrupt, any index is corrupt, or a
    partition is corrupt, overlaps or contradicts its checkpoints (gaps alone do not fail); else 0."""
    get = row_value
    segments = [segment_status(r) for r in seg_rows]
    if "error" in segments or any(get(r, "status") == "unreadable" for r in part_rows):
        return EXIT_USAGE
    if "corrupt" in segments:
        return EXIT_CORRUPT
    if any(get(r, "status") not in ("ok", "gap") for r in part_rows):
        return EXIT_CORRUPT
    return EXIT_OK


def summary_fields(seg_rows: Sequence, part_rows: Sequence) -> dict:
    """The verdict as ``kafkalog verify --json``'s summary object gives it (``ok``, ``exitCode``, ``bytesChecked``,
    ``counts`` by kind and status, ``notChecked``: the paths that could not be read), so both tools' JSON agree."""
    get = row_value
    counts: dict[str, dict[str, int]] = {}
    not_checked: list[str] = []
    for kind, rows, status_of, path in (
        ("segment", seg_rows, segment_status, "path"),
        ("partition", part_rows, lambda r: PARTITION_STATUS[get(r, "status")], "partition_dir"),
    ):
        for r in rows:
            status = status_of(r)
            counts.setdefault(kind, {}).setdefault(status, 0)
            counts[kind][status] += 1
            if status == "error":
                not_checked.append(get(r, path))
    code = exit_code(seg_rows, part_rows)
    return {
        "ok": code == EXIT_OK,
        "exitCode": code,
        "bytesChecked": sum(get(r, "size_bytes") or 0 for r in seg_rows),
        "counts": counts,
        "notChecked": not_checked,
    }

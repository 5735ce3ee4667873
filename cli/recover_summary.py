"""The closing summary of ``kafkalog recover``: the partitions' results added up, as one text line or one
``{"type": "summary", ...}`` object, so a script reads the verdict of a whole log dir without summing lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .errors import EXIT_OK
from .output import Event


class _Partition(Protocol):
    """What the summary reads of one partition's result (``cli.recover.PartitionRecovery``)."""

    dry_run: bool
    clean_shutdown: bool
    truncations: list[dict[str, Any]]
    deleted: list[dict[str, Any]]
    actions: list[dict[str, str]]
    checkpoints: list[dict[str, Any]]
    unseen: list[dict[str, Any]]
    salvage: dict[str, Any] | None

    @property
    def lost_data(self) -> bool: ...

    @property
    def offsets_lost(self) -> int: ...


@dataclass
class RecoverSummary(Event):
    """Totals over the partitions of one ``recover`` run. ``recovered`` counts partitions Kafka's recovery (or
    salvage) read, ``skipped`` those a clean shutdown exempts; byte and offset totals are what this run removed
    (or, with ``--dry-run``, would)."""

    dry_run: bool
    mode: str
    exit_code: int
    partitions: int = 0
    recovered: int = 0
    skipped: int = 0
    changed: int = 0
    lost_data: int = 0
    truncated_bytes: int = 0
    deleted_segments: int = 0
    deleted_bytes: int = 0
    salvaged_ranges: int = 0
    bytes_removed: int = 0
    offsets_lost: int = 0
    unseen_corruption: int = 0
    checkpoints_clamped: int = 0
    type = "summary"  # type: ignore[misc]

    @classmethod
    def of(cls, recs: list[_Partition], *, dry_run: bool, salvage: bool, exit_code: int) -> RecoverSummary:
        s = cls(dry_run, "salvage" if salvage else "kafka", exit_code, partitions=len(recs))
        for r in recs:
            s.skipped += r.clean_shutdown
            s.recovered += not r.clean_shutdown
            s.lost_data += r.lost_data
            s.offsets_lost += r.offsets_lost if r.salvage is None else r.salvage["offsetsLost"]
            s.unseen_corruption += bool(r.unseen)
            s.checkpoints_clamped += len(r.checkpoints)
            if r.salvage is None:
                s.truncated_bytes += sum(t["bytes"] for t in r.truncations)
                s.deleted_segments += len(r.deleted)
                s.deleted_bytes += sum(d["bytes"] for d in r.deleted)
                s.changed += bool(r.truncations or r.deleted or r.actions)
            else:
                ranges = r.salvage["ranges"]
                s.salvaged_ranges += len(ranges)
                s.bytes_removed += sum(x["bytes"] for x in ranges)
                s.changed += bool(ranges or r.salvage["rewritten"])
        s.bytes_removed += s.truncated_bytes + s.deleted_bytes
        return s

    def text(self) -> str:
        would = "would be " if self.dry_run else ""
        head = (f"Summary: {self.partitions} partition{'s' if self.partitions != 1 else ''}, {self.recovered} "
                f"recovered, {self.skipped} skipped (clean shutdown); {self.changed} {would}changed, "
                f"{self.lost_data} losing data")
        if self.mode == "salvage":
            removed = f"{self.salvaged_ranges} damaged ranges ({self.bytes_removed} bytes) {would}removed"
        else:
            removed = (f"{self.truncated_bytes} bytes {would}truncated, {self.deleted_segments} segments "
                       f"({self.deleted_bytes} bytes) {would}deleted")
        parts = [head, removed, f"{self.offsets_lost} offsets {would}lost"]
        if self.unseen_corruption:
            parts.append(f"{self.unseen_corruption} with corruption recovery does not read")
        if self.checkpoints_clamped:
            parts.append(f"{self.checkpoints_clamped} checkpoint entries {would}clamped")
        return "; ".join(parts)

    def fields(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "mode": self.mode,
            "partitions": self.partitions,
            "recovered": self.recovered,
            "skippedCleanShutdown": self.skipped,
            "changed": self.changed,
            "withDataLost": self.lost_data,
            "truncatedBytes": self.truncated_bytes,
            "deletedSegments": self.deleted_segments,
            "deletedBytes": self.deleted_bytes,
            "salvagedRanges": self.salvaged_ranges,
            "bytesRemoved": self.bytes_removed,
            "offsetsLost": self.offsets_lost,
            "unseenCorruption": self.unseen_corruption,
            "checkpointsClamped": self.checkpoints_clamped,
            "exitCode": self.exit_code,
            "ok": self.exit_code == EXIT_OK,
        }

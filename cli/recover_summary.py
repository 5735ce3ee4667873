"""The closing summary of ``kafkalog recover``: the partitions' results added up, as one text line or one
``{"type": "summary", ...}`` object, so a script reads the verdict of a whole log dir without summing lines."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
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
    changed_files: list[str]
    error: str | None
    exit_code: int

    @property
    def changed(self) -> bool: ...

    @property
    def lost_data(self) -> bool: ...

    @property
    def offsets_lost(self) -> int: ...


#: The summary's counters, in JSON order.
COUNTS = ("partitions", "recovered", "skippedCleanShutdown", "changed", "filesChanged", "withDataLost",
          "truncatedBytes", "deletedSegments", "deletedBytes", "salvagedRanges", "bytesRemoved", "offsetsLost",
          "unseenCorruption", "checkpointsClamped", "errors", "refusedDirs")  # fmt: skip


@dataclass
class RecoverSummary(Event):
    """Totals over the partitions of one ``recover`` run (``COUNTS``). ``recovered`` counts partitions Kafka's
    recovery (or salvage) read, ``skippedCleanShutdown`` those a clean shutdown exempts; byte and offset totals are
    what this run removed (or, with ``--dry-run``, would)."""

    dry_run: bool
    mode: str
    exit_code: int
    n: Counter[str] = field(default_factory=Counter)
    type = "summary"  # type: ignore[misc]

    @classmethod
    def of(cls, recs: list[_Partition], *, dry_run: bool, salvage: bool, exit_code: int,
           refused: int = 0) -> RecoverSummary:
        s = cls(dry_run, "salvage" if salvage else "kafka", exit_code)
        n = s.n
        n["partitions"] = len(recs)
        n["refusedDirs"] = refused
        for r in recs:
            if r.error is not None:
                n["errors"] += 1
                continue
            n["changed"] += r.changed
            n["filesChanged"] += len(r.changed_files)
            n["skippedCleanShutdown"] += r.clean_shutdown
            n["recovered"] += not r.clean_shutdown
            n["withDataLost"] += r.lost_data
            n["offsetsLost"] += r.offsets_lost if r.salvage is None else r.salvage["offsetsLost"]
            n["unseenCorruption"] += bool(r.unseen)
            n["checkpointsClamped"] += len(r.checkpoints)
            if r.salvage is None:
                n["truncatedBytes"] += sum(t["bytes"] for t in r.truncations)
                n["deletedSegments"] += len(r.deleted)
                n["deletedBytes"] += sum(d["bytes"] for d in r.deleted)
            else:
                ranges = r.salvage["ranges"]
                n["salvagedRanges"] += len(ranges)
                n["bytesRemoved"] += sum(x["bytes"] for x in ranges)
        n["bytesRemoved"] += n["truncatedBytes"] + n["deletedBytes"]
        return s

    def text(self) -> str:
        n, would = self.n, "would be " if self.dry_run else ""
        head = (f"Summary: {n['partitions']} partition{'s' if n['partitions'] != 1 else ''}, {n['recovered']} "
                f"recovered, {n['skippedCleanShutdown']} skipped (clean shutdown); {n['changed']} {would}changed "
                f"({n['filesChanged']} files), "
                f"{n['withDataLost']} losing data")
        if self.mode == "salvage":
            removed = f"{n['salvagedRanges']} damaged ranges ({n['bytesRemoved']} bytes) {would}removed"
        else:
            removed = (f"{n['truncatedBytes']} bytes {would}truncated, {n['deletedSegments']} segments "
                       f"({n['deletedBytes']} bytes) {would}deleted")
        parts = [head, removed, f"{n['offsetsLost']} offsets {would}lost"]
        if n["unseenCorruption"]:
            parts.append(f"{n['unseenCorruption']} with corruption recovery does not read")
        if n["checkpointsClamped"]:
            parts.append(f"{n['checkpointsClamped']} checkpoint entries {would}clamped")
        if n["errors"]:
            parts.append(f"{n['errors']} not recovered (error)")
        if n["refusedDirs"]:
            parts.append(f"{n['refusedDirs']} dirs Kafka refuses at startup")
        return "; ".join(parts)

    def fields(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "mode": self.mode, **{k: self.n[k] for k in COUNTS},
                "exitCode": self.exit_code, "ok": self.exit_code == EXIT_OK}

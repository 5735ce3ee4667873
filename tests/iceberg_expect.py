"""What a Kafka consumer gets from a partition, computed from Kafka's own dump of its batches (a golden manifest
or ``kafka-oracle dump``: the same layout), and what an Iceberg table holds, for the iceberg sync tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Row = tuple  # (topic, partition, offset, timestamp ms or None, key hex, value hex, headers)


def manifest_batches(manifest: dict, bases: set[int] | None = None) -> list[dict]:
    """The batches of a manifest's segments (only the segments whose base offsets are in ``bases`` when given)."""
    out = []
    for seg in manifest["segments"]:
        log = seg["log"]
        base = log.get("baseOffset", seg.get("baseOffset"))
        if bases is not None and base not in bases:
            continue
        out.extend(log["batches"])
    return out


def consumer_view(batches: list[dict], topic: str, partition: int, isolation: str = "read_committed",
                  start: int = 0) -> list[Row]:  # fmt: skip
    """Kafka's fetch rules over the batches in log order: no control records; read_committed also drops the
    records of aborted transactions (the outcome is the producer's next marker) and everything at or past the
    first offset of a transaction with no marker (the last stable offset)."""
    outcome: dict[int, str] = {}  # batch index -> COMMIT / ABORT / OPEN
    pending: dict[int, list[int]] = {}
    lso = None
    for i, b in enumerate(batches):
        pid = b["producerId"]
        if b["isTransactional"] and b["isControl"]:
            kind = b["records"][0].get("controlType")
            for j in pending.pop(pid, []):
                outcome[j] = kind
        elif b["isTransactional"]:
            pending.setdefault(pid, []).append(i)
    for idxs in pending.values():
        first = batches[idxs[0]]["baseOffset"]
        lso = first if lso is None else min(lso, first)
        for j in idxs:
            outcome[j] = "OPEN"
    rows = []
    for i, b in enumerate(batches):
        if b["isControl"]:
            continue
        if isolation == "read_committed" and outcome.get(i) == "ABORT":
            continue
        for r in b["records"]:
            if r["offset"] < start:
                continue
            if isolation == "read_committed" and lso is not None and r["offset"] >= lso:
                continue
            ts = r["timestamp"] if r["timestamp"] >= 0 else None
            if b["timestampType"] == "LogAppendTime":
                ts = b["maxTimestamp"]
            headers = tuple((h["key"], h["value"]) for h in r["headers"])
            rows.append((topic, partition, r["offset"], ts, r["key"], r["value"], headers))
    return rows


def table_rows(table: Any) -> list[Row]:
    """Every row of an Iceberg table in the same shape, sorted by (topic, partition, offset)."""
    data = table.scan().to_arrow().to_pylist()
    out = []
    for d in data:
        ts = d["timestamp"]
        ms = None if ts is None else (ts - _EPOCH) // timedelta(milliseconds=1)
        assert ts is None or ts.microsecond % 1000 == 0, ts
        headers = tuple((h["key"], None if h["value"] is None else h["value"].hex()) for h in d["headers"] or [])
        out.append((d["topic"], d["partition"], d["offset"], ms, None if d["key"] is None else d["key"].hex(),
                    None if d["value"] is None else d["value"].hex(), headers))  # fmt: skip
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def stable_end(batches: list[dict]) -> int:
    """Where a read_committed consumer stops: the first offset of the earliest transaction with no marker, else
    the offset after the last batch."""
    open_first: dict[int, int] = {}
    for b in batches:
        if b["isTransactional"] and b["isControl"]:
            open_first.pop(b["producerId"], None)
        elif b["isTransactional"]:
            open_first.setdefault(b["producerId"], b["baseOffset"])
    return min(open_first.values()) if open_first else batches[-1]["lastOffset"] + 1

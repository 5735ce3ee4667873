"""Files a killed sync left in the table's location, and the lock that makes removing them safe.

A sync writes its data files (and pyiceberg its manifests, manifest list and metadata file) before the catalog
commit; a sync killed in between leaves those files in the table's location, referenced by no snapshot. They are
invisible to readers (Iceberg reads only what a snapshot references) but take space. A file is an orphan when no
snapshot, manifest or metadata log entry of the table references it.

Removing orphans is safe only when no other sync is writing files it is about to commit. On a local warehouse
(the embedded ``--warehouse DIR``, or a ``file://`` one) every sync holds ``DIR/.kafkalog-NAMESPACE.TABLE.lock``
(``fcntl``) for its whole run, so a sync that holds it knows every unreferenced file is a dead run's: it removes
them before it writes (the "next sync" of the issue). Elsewhere (an object store, another host's writers)
``clean_orphans=True`` removes only orphans older than :data:`ORPHAN_MIN_AGE`, Iceberg's own rule for its
``remove_orphan_files``: a file that old belongs to no sync still running.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["ORPHAN_MIN_AGE", "clean_orphans", "referenced_files", "sync_lock"]

#: an unreferenced file younger than this may belong to a sync still running (where no lock tells)
ORPHAN_MIN_AGE = 3600.0
#: seconds a file's mtime may precede the commit time of the snapshot it was written after (clock granularity)
_CLOCK_SLACK = 2.0


@contextlib.contextmanager
def sync_lock(warehouse_dir: str | None, table: str) -> Iterator[bool]:
    """Hold the table's sync lock in a local warehouse for the block (waits for another sync to finish); yields
    whether a lock is held (False: not a local warehouse)."""
    if warehouse_dir is None or not os.path.isdir(warehouse_dir):
        yield False
        return
    import fcntl

    path = os.path.join(warehouse_dir, f".kafkalog-{table}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # closing releases the lock; a killed process's lock goes with it


def _path(location: str) -> str:
    return location[len("file://"):] if location.startswith("file://") else location


def referenced_files(table: Any) -> set[str]:
    """Every file the table's metadata references: metadata files (current and logged), each snapshot's manifest
    list, manifests and data/delete files (deleted entries too: an older snapshot still reads them)."""
    io = table.io
    meta = table.metadata
    out = {_path(table.metadata_location)}
    out.update(_path(entry.metadata_file) for entry in meta.metadata_log)
    for stats in (*getattr(meta, "statistics", ()), *getattr(meta, "partition_statistics", ())):
        out.add(_path(stats.statistics_path))
    seen: set[str] = set()  # an append's manifest list repeats every earlier manifest: each is read once
    for snap in meta.snapshots:
        out.add(_path(snap.manifest_list))
        for manifest in snap.manifests(io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            out.add(_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                out.add(_path(entry.data_file.file_path))
    return out


def _recent_files(table: Any, snap: Any, since: float) -> set[str]:
    """Files the table references that may be as recent as ``since``: every metadata file and manifest list (no
    read needed), the current snapshot's manifests, and the data files of those added by snapshots committed
    after ``since`` (the last commits, not the history)."""
    meta = table.metadata
    out = {_path(table.metadata_location)}
    out.update(_path(entry.metadata_file) for entry in meta.metadata_log)
    out.update(_path(s.manifest_list) for s in meta.snapshots)
    recent = {s.snapshot_id for s in meta.snapshots if s.timestamp_ms / 1000 >= since - _CLOCK_SLACK}
    for manifest in snap.manifests(table.io):
        out.add(_path(manifest.manifest_path))
        if manifest.added_snapshot_id in recent:
            out.update(_path(e.data_file.file_path) for e in manifest.fetch_manifest_entry(table.io))
    return out


def clean_orphans(table: Any, *, min_age: float = ORPHAN_MIN_AGE, locked: bool = False) -> list[str]:
    """Remove the table's unreferenced files at least ``min_age`` seconds old; return their paths. Only a local
    table location is cleaned (the list of a remote one is left to Iceberg's own maintenance jobs).

    ``locked``: the caller holds the sync lock, so every orphan was written after the current snapshot was
    committed (the runs are serialized); when no file is that recent the table's manifests are not read at all,
    and a sync's cost does not grow with the table's history."""
    root = _path(table.location())
    if "://" in root or not os.path.isdir(root):
        return []
    now = time.time()
    snap = table.current_snapshot()
    since = snap.timestamp_ms / 1000 - _CLOCK_SLACK if locked and snap is not None else None
    current = _path(table.metadata_location)
    candidates = []
    for sub in ("data", "metadata"):
        for dirpath, _dirs, names in os.walk(os.path.join(root, sub)):
            for name in names:
                path = os.path.join(dirpath, name)
                if path == current or not name.endswith((".parquet", ".avro", ".metadata.json")):
                    continue
                try:
                    mtime = os.stat(path).st_mtime
                except FileNotFoundError:
                    continue
                if now - mtime >= min_age and (since is None or mtime >= since):
                    candidates.append(path)
    if candidates and snap is not None:  # the files of the last commits themselves are the usual recent ones
        recent = _recent_files(table, snap, since if since is not None else 0.0)
        candidates = [p for p in candidates if p not in recent]
    if not candidates:
        return []
    keep = referenced_files(table)
    removed: list[str] = []
    for path in candidates:
        if path in keep:
            continue
        try:
            os.remove(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed

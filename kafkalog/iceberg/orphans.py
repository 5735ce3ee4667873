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
    for snap in meta.snapshots:
        out.add(_path(snap.manifest_list))
        for manifest in snap.manifests(io):
            out.add(_path(manifest.manifest_path))
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                out.add(_path(entry.data_file.file_path))
    return out


def clean_orphans(table: Any, *, min_age: float = ORPHAN_MIN_AGE) -> list[str]:
    """Remove the table's unreferenced files at least ``min_age`` seconds old; return their paths. Only a local
    table location is cleaned (the list of a remote one is left to Iceberg's own maintenance jobs)."""
    root = _path(table.location())
    if "://" in root or not os.path.isdir(root):
        return []
    keep = referenced_files(table)
    now = time.time()
    removed: list[str] = []
    for sub in ("data", "metadata"):
        for dirpath, _dirs, names in os.walk(os.path.join(root, sub)):
            for name in names:
                path = os.path.join(dirpath, name)
                if path in keep or not name.endswith((".parquet", ".avro", ".metadata.json")):
                    continue
                try:
                    if now - os.stat(path).st_mtime < min_age:
                        continue
                    os.remove(path)
                except FileNotFoundError:
                    continue
                removed.append(path)
    return removed

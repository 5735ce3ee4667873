"""One log dir as the manager sees it: path, lock, ``meta.properties`` / directory id, online state.

Kafka spreads this over ``LogManager`` (``createAndValidateLogDirs``, ``lockLogDirs``) and
``MetaPropertiesEnsemble`` (the cross-dir agreement on ``cluster.id`` / ``node.id`` and the generated
``directory.id``). Keeping it in one small class lets the manager treat a dir as a unit that is either live or
offline, and gives KIP-113 moves (issue 9) one place to look up a dir by path or id.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.checkpoint.meta_properties import (
    META_PROPERTIES_FILENAME,
    MetaProperties,
    generate_directory_id,
    read_meta_properties,
    write_meta_properties,
)
from kafkalog.errors import ConfigError, InconsistentMetadataError
from kafkalog.manager.lock import DirLock

_V = TypeVar("_V", str, int)

__all__ = ["LogDir", "normalize_dirs", "reconcile_meta_properties"]

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class LogDir:
    """Per-dir state. ``path`` is absolute and normalised (the key used everywhere in the manager)."""

    path: str
    lock: DirLock | None = None
    meta: MetaProperties | None = None
    online: bool = True
    #: True once every partition dir was loaded without an error: only then is the clean-shutdown marker written.
    loaded_fully: bool = False
    #: The clean-shutdown marker was present at startup.
    had_clean_shutdown: bool = False
    offline_cause: BaseException | None = None
    #: Partitions this dir held when it went offline (or listed at startup when it could not load).
    offline_partitions: tuple[tuple[str, int], ...] = ()
    #: Paths of ``-stray`` partition dirs found at startup (left alone, reported).
    stray_dirs: list[str] = field(default_factory=list)
    mutex: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def directory_id(self) -> str | None:
        return None if self.meta is None else self.meta.directory_id

    @property
    def meta_path(self) -> str:
        return os.path.join(self.path, META_PROPERTIES_FILENAME)

    def ensure_exists(self) -> None:
        """Kafka's ``createAndValidateLogDirs`` for one dir: create it (and make that durable), then check it is
        a readable directory. Raises OSError (the dir goes offline) on any failure."""
        if not os.path.exists(self.path):
            _log.info("log dir %s not found, creating it", self.path)
            os.makedirs(self.path, exist_ok=True)
            fsync_dir(os.path.dirname(self.path) or "/")
        if not os.path.isdir(self.path):
            raise NotADirectoryError(f"{self.path} is not a directory")
        if not os.access(self.path, os.R_OK | os.X_OK):
            raise PermissionError(f"{self.path} is not a readable log directory")

    def take_lock(self) -> None:
        self.lock = DirLock.acquire(self.path)

    def release_lock(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def read_meta(self) -> MetaProperties | None:
        """The dir's ``meta.properties``, or None when the file does not exist yet."""
        try:
            return read_meta_properties(self.meta_path)
        except FileNotFoundError:
            return None


def normalize_dirs(log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """Absolute, normalised paths; a single path or a comma-separated ``log.dirs`` string is accepted.

    Duplicates (the same real path reached twice, e.g. through a symlink) are refused, as Kafka does.
    """
    if isinstance(log_dirs, (str, os.PathLike)):
        items = [p for p in os.fspath(log_dirs).split(",") if p.strip()]
    else:
        items = [os.fspath(p) for p in log_dirs]
    if not items:
        raise ConfigError("at least one log dir is needed")
    out: list[str] = []
    seen: dict[str, str] = {}
    for raw in items:
        path = os.path.abspath(os.path.normpath(raw.strip()))
        real = os.path.realpath(path)
        if real in seen:
            raise ConfigError(f"duplicate log directory found: {seen[real]} and {path} are the same directory")
        seen[real] = path
        out.append(path)
    return out


def _agreed(key: str, values: dict[str, _V], configured: _V | None, shown: str | None) -> _V | None:
    """The one value of ``key`` the dirs (and the configuration, ``shown`` in messages) agree on, or None when
    none says; InconsistentMetadataError when they disagree."""
    if configured is not None:
        bad = {d: v for d, v in values.items() if v != configured}
        if bad:
            raise InconsistentMetadataError(f"{key} {shown} configured but log dirs say {bad}")
    if len(set(values.values())) > 1:
        raise InconsistentMetadataError(f"log dirs disagree on {key}: {values}")
    return configured if configured is not None else next(iter(values.values()), None)


def reconcile_meta_properties(
    found: dict[str, MetaProperties | None], *, cluster_id: str | None, node_id: int | None
) -> dict[str, MetaProperties]:
    """Decide every live dir's ``meta.properties`` (Kafka's ``MetaPropertiesEnsemble`` verification).

    All dirs and the configured ``cluster.id`` / ``node.id`` must agree (else InconsistentMetadataError); a dir
    without the file, or without a ``directory.id``, gets a fresh random id (never a reserved one); directory
    ids must be unique and not reserved. Returns only the entries that must be (re)written or kept, per dir.
    """
    clusters = {d: m.cluster_id for d, m in found.items() if m is not None and m.cluster_id is not None}
    nodes = {d: m.node_id for d, m in found.items() if m is not None and m.node_id is not None}
    the_cluster = _agreed("cluster.id", clusters, cluster_id, None if cluster_id is None else repr(cluster_id))
    the_node = _agreed("node.id", nodes, node_id, None if node_id is None else str(node_id))

    ids_seen: dict[str, str] = {}
    result: dict[str, MetaProperties] = {}
    for d, m in found.items():
        if m is not None and m.directory_id is not None:
            if m.has_reserved_directory_id:
                raise InconsistentMetadataError(f"{d}: meta.properties has a reserved directory.id {m.directory_id}")
            if m.directory_id in ids_seen:
                raise InconsistentMetadataError(
                    f"duplicate directory.id {m.directory_id} in {ids_seen[m.directory_id]} and {d}"
                )
            ids_seen[m.directory_id] = d
    for d, m in found.items():
        if m is not None and m.directory_id is not None:
            result[d] = m
            continue
        dir_id = generate_directory_id()
        while dir_id in ids_seen:  # astronomically unlikely; cheap to rule out
            dir_id = generate_directory_id()
        ids_seen[dir_id] = d
        if m is not None:
            result[d] = MetaProperties(m.version, m.cluster_id, m.node_id, dir_id)
        elif the_cluster is not None and the_node is not None:
            result[d] = MetaProperties(1, the_cluster, the_node, dir_id)
        else:  # not formatted for KRaft: keep what is known, as a version-0 file would
            result[d] = MetaProperties(0, the_cluster, the_node, dir_id)
    return result


def write_meta(log_dir: LogDir, meta: MetaProperties) -> None:
    """Persist ``meta`` atomically (OSError propagates: the dir goes offline)."""
    write_meta_properties(log_dir.meta_path, meta)
    log_dir.meta = meta

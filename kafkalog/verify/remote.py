"""Verification of segments and partitions that live behind a URL (``s3://``, ``gs://``, ``hdfs://``).

The checks are :mod:`kafkalog.verify`'s, unchanged. A remote segment is checked over its bytes as they are fetched
(:mod:`kafkalog.verify.stream`), no copy made; a partition's checks read its small files (checkpoints, metadata,
producer snapshots), which are copied into a private scratch dir with :mod:`kafkalog.archive.storage` and reported
under the remote URL. Plain paths pass straight through, so callers need no ``if remote`` of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem, discover_segments
from kafkalog.verify import PartitionReport, SegmentReport, verify_partition, verify_segment

__all__ = [
    "CHECKPOINT_FILES",
    "remote_plan",
    "localized",
    "verify_partition_at",
    "verify_segment_at",
]

#: log-dir files a partition's checks read besides its own dir
CHECKPOINT_FILES = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    ".kafka_cleanshutdown",
)


def verify_segment_at(
    item: SegmentItem,
    *,
    index_check: bool = True,
    options: Mapping[str, Any] | None = None,
    deep: bool = False,
    rsm: Any = None,
) -> SegmentReport:
    """:func:`kafkalog.verify.verify_segment` for a local or remote segment; never raises.

    A remote segment (and an Aiven tiered-storage one, read with ``rsm``, :class:`kafkalog.archive.tiered.RsmConfig`)
    is checked over its bytes as they are fetched (:mod:`kafkalog.verify.stream`), no copy made. A remote object
    that cannot be read (missing, denied, connection lost) gives ``status="unreadable"`` with an error naming the
    object, as an ``OSError`` does for a local file. ``deep`` also decodes every record of the valid prefix
    (:func:`kafkalog.verify.record_check.check_records`); a mismatch makes the segment ``corrupt``.
    """
    return verify_segment(item, index_check=index_check, rsm=rsm, options=options, deep=deep)


def verify_partition_at(
    segments: Iterable[SegmentReport | dict | Any], options: Mapping[str, Any] | None = None
) -> PartitionReport:
    """:func:`kafkalog.verify.verify_partition` for a local or remote partition dir: a remote one's log-dir
    checkpoints and its own metadata files (``leader-epoch-checkpoint``, ``partition.metadata``, ``*.snapshot``:
    one listing of the dir) are fetched, so the checks are the same as on local disk."""
    rows = list(segments)
    pdir = _get(rows[0], "partition_dir") if rows else None
    if not pdir or not storage.is_remote(pdir):
        return verify_partition(rows)
    logdir = storage.dirname(pdir)
    base = storage.dirname(logdir)
    with storage.scratch_dir() as root:
        storage.stage_files([storage.join(logdir, n) for n in CHECKPOINT_FILES[:3]], root, base, options)
        storage.stage_files([e.url for e in storage.list_tree(pdir, options) if _partition_file(e.url)], root, base,
                            options)  # fmt: skip
        local_pdir = storage.mirror_path(pdir, root, base)
        os.makedirs(local_pdir, exist_ok=True)
        moved = [{**_as_dict(r), "partition_dir": local_pdir} for r in rows]
        rep = verify_partition(moved)
    return dataclasses.replace(rep, partition_dir=pdir)


#: a segment's objects a streamed check reads where they lie (never copied)
_SEGMENT_OBJECTS = (".log", ".index", ".timeindex", ".txnindex", ".indexes")
#: naming one of these checks its segment (as for local paths)
_SIBLINGS = (".index", ".timeindex", ".txnindex", ".snapshot")


@contextlib.contextmanager
def remote_plan(paths: Iterable[str], options: Mapping[str, Any] | None = None) -> Iterator[tuple[Any, dict[str, str]]]:
    """:func:`kafkalog.verify.plan_paths` of local paths and URLs together, and ``{local copy: URL}`` for output.

    A URL's segments stay where they are: ``run_plan`` checks them over their fetched bytes
    (:mod:`kafkalog.verify.stream`). Only the small files its partition and log-dir checks read (offset
    checkpoints, ``leader-epoch-checkpoint``, ``partition.metadata``, producer snapshots, loose files) are copied,
    into a scratch dir that lives until the block ends. Raises StorageError (an OSError naming the object) when a
    URL cannot be listed or read."""
    from kafkalog.errors import NothingToCheckError
    from kafkalog.verify.paths import plan_paths

    args: list[str] = []
    shown: dict[str, str] = {}
    items: list[SegmentItem] = []
    stand_ins: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for p in paths:
            if not storage.is_remote(p):
                args.append(storage.local_path(p))
                if args[-1] != p:  # a file: URL is reported as given
                    shown[args[-1]] = p
                continue
            root = stack.enter_context(storage.scratch_dir())
            local, found = _stage_small_files(p, options, root, shown, stand_ins)
            items += found
            if local is not None:
                args.append(local)
        plan = plan_paths(args)
        # a copy holding no segment of its own is no "nothing found" when its URL's segments stay remote
        mirrors = {m for m in shown if m in args} if items else set()
        plan.errors = [e for e in plan.errors
                       if not (e.path in mirrors and isinstance(e.exception, NothingToCheckError))]  # fmt: skip
        plan.segments = sorted(plan.segments + items, key=lambda s: (s.partition_dir, s.base_offset))
        plan.partition_dirs |= set(stand_ins.values())
        plan.stand_ins, plan.options = stand_ins, dict(options or {})
        yield plan, shown


def _stage_small_files(url: str, options: Mapping[str, Any] | None, root: str, shown: dict[str, str],
                       stand_ins: dict[str, str]) -> tuple[str | None, list[SegmentItem]]:  # fmt: skip
    """Copy what ``url`` holds besides its segments' data objects under ``root``; return the local path to plan
    (None when ``url`` names one segment) and the segments, which stay remote. Adds the copies' dirs to
    ``shown`` (copy -> URL) and each segment's partition dir to ``stand_ins`` (URL -> copy)."""
    entries = storage.list_tree(url, options)
    url = url.rstrip("/")
    single = len(entries) == 1 and entries[0].url == url
    pdir = storage.dirname(url) if single else url
    logdir = storage.dirname(pdir)
    base = storage.dirname(logdir)
    for d in (logdir, pdir, url):
        shown[storage.mirror_path(d, root, base)] = d
    target = url
    if single:
        stem, dot, suffix = url.rpartition(".")
        if "." + suffix in _SIBLINGS and storage.stat_size(stem + ".log", options) >= 0:
            target = stem + ".log"
    items = discover_segments(target, options=options) if not single or target.endswith(".log") else []
    skip = {i.sibling(s) for i in items for s in _SEGMENT_OBJECTS}
    if single:
        stem = storage.basename(target).rpartition(".")[0]
        names = [e.url for e in storage.list_tree(pdir, options) if storage.basename(e.url).startswith(stem + ".")]
        wanted = names if items else [url]
    else:
        wanted = [e.url for e in entries]
    storage.stage_files([u for u in wanted if u not in skip], root, base, options)
    storage.stage_files([storage.join(logdir, n) for n in CHECKPOINT_FILES], root, base, options)
    for item in items:
        here = storage.mirror_path(item.partition_dir, root, base)
        os.makedirs(here, exist_ok=True)
        shown[here] = item.partition_dir
        stand_ins[item.partition_dir] = here
    local = storage.mirror_path(url, root, base)
    if items and single:
        return None, items
    if not single:
        os.makedirs(local, exist_ok=True)
    return local, items


@contextlib.contextmanager
def localized(url: str, options: Mapping[str, Any] | None = None) -> Iterator[str]:
    """A local path holding a copy of ``url``'s data (for a caller that reads files; ``kafkalog dump`` streams
    segments instead, cli/dump_remote.py).

    A local path is yielded as is. A remote segment file comes with its sibling index files; a remote partition
    dir with every object in it and its log dir's checkpoint files. The copy lives until the block ends.
    """
    if not storage.is_remote(url):
        yield storage.local_path(url)
        return
    entries = storage.list_tree(url, options)
    single = len(entries) == 1 and entries[0].url == url.rstrip("/")
    pdir = storage.dirname(url) if single else url.rstrip("/")
    logdir = storage.dirname(pdir)
    base = storage.dirname(logdir)
    with storage.scratch_dir() as root:
        if single:  # one object: take its segment siblings
            stem = storage.basename(url).rpartition(".")[0]
            siblings = [e.url for e in storage.list_tree(pdir, options) if storage.basename(e.url).startswith(stem + ".")]
            storage.stage_files(siblings or [url], root, base, options)
        else:
            storage.stage_files([e.url for e in entries], root, base, options)
        storage.stage_files([storage.join(logdir, n) for n in CHECKPOINT_FILES], root, base, options)
        local = storage.mirror_path(url.rstrip("/"), root, base)
        os.makedirs(local if not single else os.path.dirname(local), exist_ok=True)
        yield local


def _partition_file(url: str) -> bool:
    """A partition dir's metadata file (what :func:`kafkalog.verify.check_partition_files` reads)."""
    name = storage.basename(url)
    return name in ("leader-epoch-checkpoint", "partition.metadata") or name.endswith(".snapshot")


def _get(r: Any, name: str) -> Any:
    return r[name] if isinstance(r, dict) else getattr(r, name)


def _as_dict(r: Any) -> dict:
    names = ("partition_dir", "topic", "partition", "base_offset", "first_offset", "last_offset", "status")
    return {n: _get(r, n) for n in names}

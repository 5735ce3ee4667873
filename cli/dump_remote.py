"""What ``kafkalog dump`` reads a URL (``s3://``, ``gs://``, ...) or an Aiven tiered-storage segment from, with no
copy of a segment's data on disk.

A URL's ``.log`` objects are read in one pass over their ranged GETs (:class:`kafkalog.verify.stream_log.RemoteLog`),
its ``.index``/``.timeindex``/``.txnindex`` objects are fetched whole into memory (at most ``segment.index.bytes``
each); an Aiven segment's ``.log`` is restored chunk group by chunk group as it is read
(:class:`~kafkalog.verify.stream_log.AivenLog`). Only the small files (producer snapshots, checkpoints,
``partition.metadata``, KRaft snapshots; an Aiven segment's indexes out of its ``.indexes``) are written to a private
scratch dir. Every file to dump gets a name under that scratch dir as the copy would have had, so the output
(``Dumping ...``, Kafka's end-of-run reports) is the one of the local files with the URL in place of the dir; the
names of the streamed ones map to their sources in ``streamed``, and ``kafkalog dump`` reads those instead of a file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.names import file_kind

__all__ = ["IndexObject", "dump_paths"]

#: kinds read where they lie: the log in one pass, the indexes into memory
_LOG_KINDS = ("log",)
_INDEX_KINDS = ("index", "timeindex", "txnindex")


class IndexObject:
    """An index object behind a URL, fetched whole into memory when dumped."""

    def __init__(self, url: str, options: Mapping[str, Any] | None) -> None:
        self.url = url
        self.options = options

    def data(self) -> bytes:
        return storage.read_range(self.url, 0, None, self.options)


@contextlib.contextmanager
def dump_paths(paths: list[str], options: Mapping[str, Any] | None, rsm: Any,
               streamed: dict[str, Any]) -> Iterator[tuple[list[str], dict[str, str]]]:  # fmt: skip
    """The local names to dump for ``paths`` (a local path as is; a URL's or an Aiven segment's under a scratch dir
    that lives until the block ends) and ``{scratch name: URL}`` for output; fills ``streamed`` (scratch name ->
    :class:`~kafkalog.verify.stream_log.LogSource`, :class:`IndexObject`, or the URL of an object of no Kafka kind).
    Raises StorageError (an OSError naming the object) when a URL cannot be listed or read, TieredConfigError when
    an Aiven segment's key is missing or wrong."""
    out: list[str] = []
    shown: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for p in paths:
            remote = storage.is_remote(p)
            local = p if remote else storage.local_path(p)
            aiven = _aiven_items(local, options)
            if aiven:
                out.append(_aiven(local, aiven, options, rsm, stack.enter_context(storage.scratch_dir()), streamed))
            elif remote:
                out.append(_remote(p, options, stack.enter_context(storage.scratch_dir()), streamed))
                shown[out[-1]] = p
            else:
                if local != p:  # a file: URL is reported as given
                    shown[local] = p
                out.append(local)
        yield out, shown


def _remote(url: str, options: Mapping[str, Any] | None, root: str, streamed: dict[str, Any]) -> str:
    """Name the objects of ``url`` under ``root`` where a copy would put them (:func:`storage.mirror_path`): the
    segments' objects as streamed sources, the small files copied. Returns the name standing for ``url``."""
    entries = storage.list_tree(url, options)
    top = url.rstrip("/")
    single = len(entries) == 1 and entries[0].url == top
    pdir = storage.dirname(top) if single else top
    base = storage.dirname(storage.dirname(pdir))
    if single:  # one object: its segment's siblings come with it (an index is checked against its .log)
        stem = storage.basename(top).rpartition(".")[0]
        urls = [e.url for e in storage.list_tree(pdir, options) if storage.basename(e.url).startswith(stem + ".")]
        urls = urls or [top]
    else:
        urls = [e.url for e in entries]
    small: list[str] = []
    for u in urls:
        kind = file_kind(storage.basename(u))[0]
        name = storage.mirror_path(u, root, base)
        if kind in _LOG_KINDS:
            from kafkalog.verify.stream_log import RemoteLog

            streamed[name] = RemoteLog(u, options)
        elif kind in _INDEX_KINDS:
            streamed[name] = IndexObject(u, options)
        elif kind != "unknown" and (u == top or not single):  # a named object's other siblings are not read
            small.append(u)
        elif u == top:  # named, of no Kafka kind: reported as ignored, never copied
            streamed[name] = u
    storage.stage_files(small, root, base, options)
    local = storage.mirror_path(top, root, base)
    os.makedirs(os.path.dirname(local) if single else local, exist_ok=True)
    return local


def _aiven_items(path: str, options: Mapping[str, Any] | None) -> list[Any]:
    """The Aiven segments ``path`` names: a ``.log`` object beside its ``.rsm-manifest``, or those under a dir."""
    from kafkalog.archive.tiered import is_aiven_item

    if storage.is_remote(path):
        top = path.rstrip("/")
        if top.endswith(".log"):
            if storage.stat_size(top[: -len(".log")] + ".rsm-manifest", options) < 0:
                return []
        elif storage.stat_size(top, options) >= 0:
            return []
    elif os.path.isfile(path):
        if not (path.endswith(".log") and os.path.exists(path[: -len(".log")] + ".rsm-manifest")):
            return []
    elif not os.path.isdir(path):
        return []
    return [i for i in discover_segments(path, options=options) if is_aiven_item(i)]


def _aiven(path: str, items: list[Any], options: Mapping[str, Any] | None, rsm: Any, root: str,
           streamed: dict[str, Any]) -> str:  # fmt: skip
    """Each Aiven segment of ``path`` at its place under ``root`` (``<topic dir>/<partition>/``, as a restore
    writes it): the indexes out of its ``.indexes`` written there, its ``.log`` streamed. Returns the name standing
    for ``path`` (the ``.log`` of a single segment, else ``root``)."""
    from kafkalog.archive.tiered import AivenSegment, materialize, open_ahead
    from kafkalog.verify.stream_log import AivenLog

    single = path.rstrip("/").endswith(".log")
    top = path if storage.is_remote(path) else os.path.realpath(path)

    def opener(item: Any) -> tuple[Any, AivenSegment]:
        dest = root
        if not single:  # each partition dir at its place below the dir given
            parent = storage.dirname(storage.dirname(item.partition_dir))
            rel = _relative(parent, top)
            dest = os.path.normpath(os.path.join(root, rel))
        seg = AivenSegment.open(item.path, rsm=rsm, options=options, object_size=item.size_bytes)
        return materialize(item, dest, rsm=rsm, options=options, with_log=False, segment=seg), seg

    last = ""
    # the next segments' manifests and indexes fetched while one is written out; every segment stays open (its
    # manifest) until the dump reads it, so no chunk is fetched ahead
    for _, opened, error in open_ahead(items, opener, prefetch=False):
        if error is not None:
            raise error
        restored, seg = opened
        streamed[restored.path] = AivenLog(seg)
        last = restored.path
    return last if single else root


def _relative(path: str, top: str) -> str:
    if storage.is_remote(path):
        return path[len(top.rstrip("/")) :].strip("/") if path.startswith(top.rstrip("/")) else ""
    return os.path.relpath(path, top)


def walk_key(top: str) -> Callable[[str], list[tuple[int, str]]]:
    """Sort key of the files below ``top`` in :func:`kafkalog.archive.discovery.kafka_files`' order (``os.walk``:
    names sorted within a dir, a dir's own files before its subdirs), for names not all on disk."""

    def key(path: str) -> list[tuple[int, str]]:
        parts = os.path.relpath(path, top).split(os.sep)
        return [(1, d) for d in parts[:-1]] + [(0, parts[-1])]

    return key

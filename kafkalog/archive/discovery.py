"""Find every segment under roots, cheaply: names and ``stat`` only, no file contents.

Used by ``kafkalog verify`` and by the Spark job's driver (:mod:`kafkalog.spark.validate`), which packs the
:class:`SegmentItem` list into tasks; nothing here needs Spark.

A root may be a Kafka log dir, a partition dir, a single ``.log`` file, or any tree of those (backups of several
brokers, dated snapshots). Three layouts are recognised:

* ``local``: a broker's partition dir ``<topic>-<partition>`` (optionally ``.<uuid>-future|-delete|-stray``) holding
  ``<20-digit base offset>.log`` with sibling ``.index``/``.timeindex``/``.txnindex``.
* ``tiered``: Kafka's LocalTieredStorage (the reference RemoteStorageManager used by Kafka's tiered-storage tests):
  ``<topic>-<partition>-<topic id, 22 base64url chars>/<20 digits>-<segment id, 22 chars>.log`` with the same
  sibling suffixes plus ``.leader_epoch_checkpoint`` and ``.snapshot``.
* ``tiered-aiven``: Aiven's tiered-storage-for-apache-kafka object layout copied to disk:
  ``<topic>-<topic id>/<partition>/<20 digits>-<segment id>.log`` with ``.indexes`` (all indexes in one blob,
  described by ``.rsm-manifest``). The ``.log`` is validated when it is stored untransformed; indexes are not.

Local paths and ``file://`` URLs are walked with ``os``; any other URL (``s3://``, ``gs://``, ``hdfs://``) is listed
through :mod:`kafkalog.archive.storage` (one recursive listing per root, sizes included), and the items keep their URLs:
readers fetch the byte ranges they need through the same module.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field

from kafkalog.archive import storage
from kafkalog.errors import InvalidArgumentError, NothingToCheckError
from kafkalog.names import TEMP_SUFFIXES, file_kind

__all__ = ["TEMP_SUFFIXES", "RemoteObject", "SegmentItem", "discover_segments", "kafka_files", "list_remote_objects",
           "nothing_found"]


_TOPIC = r"[a-zA-Z0-9._-]{1,249}"
_LOCAL_DIR = re.compile(rf"^(?P<topic>{_TOPIC})-(?P<partition>\d+)(?:\.(?P<uuid>[0-9a-f]{{32}})-(?P<state>future|delete|stray))?$")
_TIERED_DIR = re.compile(rf"^(?P<topic>{_TOPIC})-(?P<partition>\d+)-(?P<topic_id>[A-Za-z0-9_-]{{22}})$")
_AIVEN_TOPIC_DIR = re.compile(rf"^(?P<topic>{_TOPIC})-(?P<topic_id>[A-Za-z0-9_-]{{22}})$")
_LOCAL_LOG = re.compile(r"^(?P<offset>\d{20})\.log$")
_TIERED_LOG = re.compile(r"^(?P<offset>\d{20})-(?P<segment_id>[A-Za-z0-9_-]{22})\.log$")
_TIERED_OBJECT = re.compile(r"^(?P<offset>\d{20})-(?P<segment_id>[A-Za-z0-9_-]{22})\.(?P<suffix>[a-z_-]+)$")


@dataclass(frozen=True)
class SegmentItem:
    """One unit of work: a segment and the facts about its siblings that a task needs without listing the dir."""

    path: str
    partition_dir: str
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    layout: str = "local"  # local | tiered | tiered-aiven
    dir_state: str = "live"  # live | future | delete | stray
    index_size: int = -1  # -1: file absent
    timeindex_size: int = -1
    txnindex_size: int = -1
    extra_files: tuple[str, ...] = field(default=())  # e.g. ".indexes", ".rsm-manifest" for tiered-aiven
    is_last: bool = False  # the highest base offset in its partition dir (Kafka's active segment)

    def sibling(self, suffix: str) -> str:
        """Path of a sibling file (``.index``, ``.timeindex``, ``.txnindex``, ...)."""
        return self.path[: -len(".log")] + suffix

    def to_dict(self) -> dict:
        return asdict(self)


def _size(path: str) -> int:
    """The file's size; -1 when it is absent (other ``OSError``s propagate)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return -1


def _size_or_present(path: str) -> int:
    """:func:`_size`, but a file that is there and cannot be stat'ed (a symlink loop, a permission) counts as
    present (0): a check that opens it meets the same error and reports it for that file alone."""
    try:
        return _size(path)
    except OSError:
        return 0


def _classify_dir(dirpath: str) -> tuple[str, str, int, str] | None:
    """(layout, topic, partition, state) for a partition dir name, or None when the dir is not one."""
    name = storage.basename(dirpath)
    m = _TIERED_DIR.match(name)
    if m and not _LOCAL_DIR.match(name):
        return "tiered", m["topic"], int(m["partition"]), "live"
    m = _LOCAL_DIR.match(name)
    if m:
        return "local", m["topic"], int(m["partition"]), m["state"] or "live"
    if name.isascii() and name.isdigit():
        parent = storage.basename(storage.dirname(dirpath))
        pm = _AIVEN_TOPIC_DIR.match(parent)
        if pm:
            return "tiered-aiven", pm["topic"], int(name), "live"
    return None


def _segments_in_dir(
    dirpath: str, filenames: Iterable[str], size_of: Callable[[str], int] = _size
) -> Iterator[SegmentItem]:
    """The segments among ``filenames`` of one dir (``size_of(path)``: a file's size, -1 when absent)."""
    names = set(filenames)
    path_of = storage.join if storage.is_remote(dirpath) else os.path.join
    classified = _classify_dir(dirpath)
    for name in sorted(names):
        local = _LOCAL_LOG.match(name)
        tiered = None if local else _TIERED_LOG.match(name)
        if not (local or tiered):
            continue
        path = path_of(dirpath, name)
        stem = name[: -len(".log")]
        if classified is None:
            layout, topic, partition, state = ("local" if local else "tiered"), "", -1, "live"
        else:
            layout, topic, partition, state = classified
            if local and layout != "local":
                layout = "local"
        extra = tuple(s for s in (".indexes", ".rsm-manifest") if stem + s in names)
        if tiered and extra:
            layout = "tiered-aiven"
        yield SegmentItem(
            path=path,
            partition_dir=dirpath,
            topic=topic,
            partition=partition,
            base_offset=int((local or tiered)["offset"]),
            size_bytes=size_of(path),
            layout=layout,
            dir_state=state,
            index_size=size_of(path_of(dirpath, stem + ".index")) if stem + ".index" in names else -1,
            timeindex_size=size_of(path_of(dirpath, stem + ".timeindex")) if stem + ".timeindex" in names else -1,
            txnindex_size=size_of(path_of(dirpath, stem + ".txnindex")) if stem + ".txnindex" in names else -1,
            extra_files=extra,
        )


def _discover_remote(root: str, options: Mapping[str, str] | None) -> list[SegmentItem]:
    """Segments under a remote root from one recursive listing (a single ``.log`` URL: its dir's listing)."""
    entries = storage.list_tree(root, options)
    single = len(entries) == 1 and entries[0].url == root.rstrip("/")
    if single:
        entries = storage.list_tree(storage.dirname(root), options)
    sizes = {e.url: e.size for e in entries}
    by_dir: dict[str, list[str]] = {}
    for e in entries:
        by_dir.setdefault(storage.dirname(e.url), []).append(storage.basename(e.url))
    found: list[SegmentItem] = []
    for dirpath in sorted(by_dir):
        found.extend(_segments_in_dir(dirpath, by_dir[dirpath], lambda p: sizes.get(p, -1)))
    if single:
        found = [s for s in found if s.path == root]
        if not found:
            raise InvalidArgumentError(f"{root}: not a segment file (<20-digit offset>.log)")
    return found


@dataclass(frozen=True)
class RemoteObject:
    """One object of a tiered-storage bucket, named as its RemoteStorageManager names it: LocalTieredStorage's
    ``<topic>-<partition>-<topic id>/<offset>-<segment id>.<suffix>`` or Aiven's
    ``<topic>-<topic id>/<partition>/<offset>-<segment id>.<suffix>`` (``suffix``: ``log``, ``index``, ...)."""

    path: str
    size: int
    layout: str  # tiered | tiered-aiven
    topic: str
    topic_id: str
    partition: int
    base_offset: int
    segment_id: str
    suffix: str


def list_remote_objects(root: str | os.PathLike, options: Mapping[str, str] | None = None
                        ) -> tuple[list[RemoteObject], list[tuple[str, int]]]:
    """Every object under a bucket ``root`` (a local dir or a URL, one recursive listing): those named as a
    RemoteStorageManager names segment objects, and (path, size) of every other object."""
    raw = os.fspath(root)
    if storage.is_remote(raw):
        entries = [(e.url, e.size) for e in storage.list_tree(raw, options)]
    else:
        top = storage.local_path(raw)
        os.stat(top)  # the OS's reason for a root that is not there
        entries = []
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            entries.extend((os.path.join(dirpath, n), _size(os.path.join(dirpath, n))) for n in sorted(filenames))
    objects: list[RemoteObject] = []
    other: list[tuple[str, int]] = []
    for path, size in entries:
        m = _TIERED_OBJECT.match(storage.basename(path))
        dirpath = storage.dirname(path)
        classified = _classify_dir(dirpath) if m else None
        if classified is None or classified[0] not in ("tiered", "tiered-aiven"):
            other.append((path, size))
            continue
        layout, topic, partition, _ = classified
        name = storage.basename(dirpath if layout == "tiered" else storage.dirname(dirpath))
        topic_id = name[-22:]
        objects.append(RemoteObject(path, size, layout, topic, topic_id, partition, int(m["offset"]),
                                    m["segment_id"], m["suffix"]))
    return objects, other


def nothing_found(root: str | os.PathLike) -> NothingToCheckError:
    """The error for a root that holds no Kafka segment: every check that must not pass on nothing
    (``kafkalog verify``, the Spark validation job) raises this one."""
    return NothingToCheckError("no Kafka log files found: nothing checked", path=os.fspath(root))


def discover_segments(
    roots: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    options: Mapping[str, str] | None = None,
    on_error: Callable[[OSError], None] | None = None,
    require: bool = False,
    key_prefix: str = "",
) -> list[SegmentItem]:
    """Every segment under ``roots``, sorted by (partition dir, base offset); duplicates (overlapping roots) once.

    Symlinked dirs are not followed (archives often link back to their parents); a root given as a symlink is.
    Remote roots (``s3://...``) are listed through :mod:`kafkalog.archive.storage` with ``options`` (credentials,
    endpoint; default: the AWS environment). A root that cannot be read raises its ``OSError`` (ENOENT, ELOOP,
    EACCES: the OS's reason); a file that is not a segment raises InvalidArgumentError; a failed remote listing a
    ``storage.StorageError``. With ``on_error``, a checker's view: below a root, a dir that cannot be listed and a
    partition dir name that does not resolve (a dangling symlink, a symlink loop) go to ``on_error``, and a segment
    file that cannot be stat'ed is listed (size 0) for its check to report; without it, unlistable dirs are passed
    over (as ``os.walk`` does) and a file that cannot be stat'ed raises its ``OSError``.
    ``require``: a root holding no segment raises :func:`nothing_found`'s NothingToCheckError.
    ``key_prefix`` is Aiven's ``key.prefix``: where it does not end in ``/`` it is glued to the topic dir's name
    (``pfx-orders-<topic id>``), and the topic is what follows it.
    """
    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    seen: set[str] = set()
    items: list[SegmentItem] = []
    for raw in roots:
        root = os.fspath(raw) if storage.is_remote(raw) else os.path.realpath(storage.local_path(raw))
        if storage.is_remote(root):
            found = _discover_remote(root, options)
        elif os.path.isfile(root):
            dirpath, name = os.path.split(root)
            found = list(_segments_in_dir(dirpath, os.listdir(dirpath)))
            found = [s for s in found if os.path.basename(s.path) == name]
            if not found:
                raise InvalidArgumentError(f"{os.fspath(raw)}: not a segment file (<20-digit offset>.log)")
        elif os.path.isdir(root):
            found = []
            size_of = _size if on_error is None else _size_or_present
            for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=False):
                dirnames.sort()
                found.extend(_segments_in_dir(dirpath, filenames, size_of))
                if on_error is not None:
                    _report_broken_dirs(dirpath, filenames, on_error)
        else:
            os.stat(storage.local_path(raw))  # raises the OS's reason: ENOENT, ELOOP, EACCES, ENOTDIR
            raise InvalidArgumentError(f"{os.fspath(raw)}: not a file or directory")
        if require and not found:
            raise nothing_found(raw)
        for item in found:
            if item.path not in seen:
                seen.add(item.path)
                items.append(item)
    glued = key_prefix.rpartition("/")[2]
    if glued:
        items = [_strip_glued_prefix(i, glued) for i in items]
    items.sort(key=lambda s: (s.partition_dir, s.base_offset))
    for i, item in enumerate(items):
        if i + 1 == len(items) or items[i + 1].partition_dir != item.partition_dir:
            items[i] = dataclasses.replace(item, is_last=True)
    return items


def _strip_glued_prefix(item: SegmentItem, glued: str) -> SegmentItem:
    """An Aiven item whose topic dir starts with the tail of the key prefix, with the topic after it."""
    name = storage.basename(storage.dirname(item.partition_dir))
    m = _AIVEN_TOPIC_DIR.match(name[len(glued) :]) if name.startswith(glued) else None
    if item.layout != "tiered-aiven" or m is None:
        return item
    return dataclasses.replace(item, topic=m["topic"])


def _report_broken_dirs(dirpath: str, filenames: Iterable[str], on_error: Callable[[OSError], None]) -> None:
    """A name that ``os.walk`` lists as a file but that is named like a partition dir and is a symlink that does not
    resolve (dangling, or a loop): a partition dir that cannot be read, reported with the OS's reason."""
    for name in filenames:
        if _LOCAL_DIR.match(name) or _TIERED_DIR.match(name):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                try:
                    os.stat(path)
                except OSError as exc:
                    on_error(exc)


def kafka_files(root: str | os.PathLike) -> Iterator[str]:
    """Every file below ``root`` that Kafka's tools read (segments, indexes, snapshots, checkpoints, metadata), in
    the order an operator's ``kafka-dump-log.sh --files dir/*`` takes them: names sorted within a dir, a dir's own
    files before its subdirs. Lazy (a 2,000-partition dir yields its first file at once) and name-only: no file is
    opened. Locks and foreign files are passed over; symlinked dirs below ``root`` are not followed, as in
    :func:`discover_segments`."""
    for dirpath, dirnames, filenames in os.walk(os.fspath(root), followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            if file_kind(name)[0] != "unknown":
                yield os.path.join(dirpath, name)

"""Reads of whole remote objects that a reader opens ahead or keeps open, over :mod:`kafkalog.archive.storage`.

On a bucket every open is a round trip (pyarrow sends a HEAD for the size before any GET, and its Python API
cannot open an object with a size known from a listing). :func:`iter_objects` opens an archive's objects ahead in
the read pool (:mod:`kafkalog.archive.ranged_reads`), so no round trip waits between two objects;
:func:`keep_open` keeps an object that its reader knows unchanged open for its next ranged reads
(:func:`kafkalog.archive.storage.read_range`), so they send their GET alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kafkalog.archive.ranged_reads import PART_BYTES, default_parallelism, iter_parallel, split_range
from kafkalog.archive.storage import (  # the open objects and their registry are the storage module's own
    _KEPT,
    _KEPT_LOCK,
    _KEPT_OBJECTS,
    _KEPT_SECONDS,
    StorageError,
    _kept_key,
    _Object,
    forget_kept,
    is_remote,
)

__all__ = ["iter_objects", "keep_open", "release"]


def iter_objects(urls: Iterable[str], options: Mapping[str, Any] | None = None, *,
                 parallelism: int | None = None, part: int = PART_BYTES) -> Iterator[tuple[str, bytearray]]:
    """Each whole object of ``urls``, in order, as ``(url, bytes)``: the parts of this object and of the next
    ones are fetched in parallel while the caller works on the current one (an archive read end to end).

    The objects are opened (a HEAD each on S3: their sizes) ``parallelism`` ahead in the read pool, so the next
    object's first parts are asked for while this one's last parts are in flight, with no round trip between
    them. Memory: the parts in flight (``parallelism`` x ``part``) and the object being assembled; an open object
    holds no data. An object that cannot be opened raises where its bytes would have come."""
    n = default_parallelism() if parallelism is None else max(1, parallelism)

    def open_one(url: str) -> _Object | BaseException:
        try:
            return _Object(url, options)
        except StorageError as exc:  # raised in order, by the first part's task
            return exc

    def fail(exc: BaseException) -> tuple[str, int, int, bytes]:
        raise exc

    def parts() -> Iterator[Callable[[], tuple[str, int, int, bytes]]]:
        for obj in iter_parallel(((lambda url=url: open_one(url)) for url in urls), n):
            if isinstance(obj, BaseException):
                yield lambda exc=obj: fail(exc)
                continue
            for s, e in split_range(0, obj.size, part) or [(0, 0)]:  # the object closes with its last part's task
                yield lambda obj=obj, s=s, e=e: (obj.url, obj.size, s, obj.read(s, e) if e > s else b"")

    current: bytearray | None = None
    for url, size, s, data in iter_parallel(parts(), n):
        if s == 0:
            current = bytearray(size)
        assert current is not None
        current[s : s + len(data)] = data
        if s + len(data) >= size:
            yield url, current
            current = None


def keep_open(url: str, options: Mapping[str, Any] | None, size: int) -> bool:
    """Open the remote object ``url`` now (its HEAD on S3) and keep it open, so that the reads of it within
    ``size`` bytes (:func:`~kafkalog.archive.storage.read_range`) send their GET alone (a round trip saved per read
    on a real bucket) until :func:`release`. For a reader that knows the object does not change while it reads it (an Aiven segment's
    ``.log``, written once under a unique segment id, whose manifest states its size): a reopened object of
    another size is not kept (the reads then open it each time, as without). False when nothing is kept
    (local files, errors, another size). Kept objects hold no data."""
    if not is_remote(url):
        return False
    key = _kept_key(url, options)
    with _KEPT_LOCK:
        hit = _KEPT.get(key)
        if hit is not None and hit[1].size == size and time.monotonic() - hit[0] <= _KEPT_SECONDS:
            return True  # kept already (by another task of the same reader)
    try:
        obj = _Object(url, options)
    except StorageError:
        return False
    if obj.size != size:
        return False
    with _KEPT_LOCK:
        _KEPT[key] = (time.monotonic(), obj)
        _KEPT.move_to_end(key)
        while len(_KEPT) > _KEPT_OBJECTS:
            _KEPT.popitem(last=False)
    return True


def release(url: str, options: Mapping[str, Any] | None) -> None:
    """Stop keeping ``url`` open (:func:`keep_open`): its next reads open it again."""
    forget_kept(url, options)

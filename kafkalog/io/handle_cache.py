"""A bounded cache of open segment files and index mappings (RocksDB's ``max_open_files`` + table cache).

Kafka keeps every segment's ``.log`` descriptor and index mappings for as long as the segment exists, so a broker
with many partitions runs into ``ulimit -n``. kafkalog keeps at most ``capacity`` of them open per cache: each
``.log`` descriptor, index mapping (Python's ``mmap`` holds a duplicate descriptor) and transaction-index write
handle is one *handle*; when one more opens and the cache is full, the least recently used handles are closed
(CLOCK: an owner used since the last sweep gets a second chance). Owners reopen on the next use, invisibly.

Nothing in use is ever closed: an owner is evicted only when its own lock can be taken without waiting (no
other thread is inside it) and it is not marked busy (its own thread is not inside a region that keeps using the
handle while opening another). An owner that is always busy is skipped: the cache then runs over its capacity
rather than fail a caller.

Running out anyway (EMFILE/ENFILE/ENOMEM from an open or a map, because something else in the process holds
descriptors) makes :meth:`HandleCache.call` evict half of what it holds and retry once; a second failure raises
:class:`~kafkalog.errors.ResourceExhaustedError`, which is retriable and never takes a log dir offline.

A cache of its own serves a ``LogManager`` given ``kafkalog.max.open.files`` or a ``Log`` opened with
``max_open_files=N``; every other manager, Log and segment shares the process-wide :func:`default_cache`, sized a
quarter of the soft ``RLIMIT_NOFILE``, so two managers without the property keep one bound, not two.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, TypeVar

from kafkalog.errors import ConfigError
from kafkalog.io.oserrors import is_resource_exhaustion, resource_error

try:
    import resource as _resource
except ImportError:  # not on POSIX
    _resource = None  # type: ignore[assignment]

__all__ = ["HandleCache", "HandleOwner", "default_cache", "default_max_open_files"]

_T = TypeVar("_T")

#: The share of the soft RLIMIT_NOFILE a cache takes by default: the rest is for sockets, checkpoints, producer
#: snapshots, transient maps of ``.log`` files being read, and whatever else the process opens.
DEFAULT_SHARE = 4
_MIN_DEFAULT = 16
_MAX_DEFAULT = 1 << 16


class HandleOwner(Protocol):
    """What the cache asks of an object holding one handle."""

    _handle_used: bool

    def _evict_handles(self) -> bool:
        """Close the handle unless it is in use; True when it is closed (or was)."""


def default_max_open_files() -> int:
    """A quarter of the soft ``RLIMIT_NOFILE`` (16 at least, 65,536 at most)."""
    if _resource is None:
        return 1024
    soft, _hard = _resource.getrlimit(_resource.RLIMIT_NOFILE)
    if soft == _resource.RLIM_INFINITY or soft <= 0:
        return _MAX_DEFAULT
    return max(_MIN_DEFAULT, min(_MAX_DEFAULT, soft // DEFAULT_SHARE))


class HandleCache:
    """At most ``capacity`` open handles among the owners registered with it (see the module docstring)."""

    def __init__(self, max_open_files: int | None = None) -> None:
        n = default_max_open_files() if max_open_files is None else max_open_files
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"max open files must be a positive integer, got {max_open_files!r}")
        self._capacity = n
        self._lock = threading.Lock()
        # Weak references, oldest first: the cache never keeps an owner (and its descriptor) alive; an owner
        # collected without closing is closed by the collector and leaves here through ``_dead``.
        self._owners: OrderedDict[int, weakref.ref[HandleOwner]] = OrderedDict()
        self._dead: list[tuple[int, weakref.ref[HandleOwner]]] = []  # appended by weakref callbacks (any thread)
        self.evictions = 0  # handles closed to stay under the capacity or to relieve EMFILE
        self.retries = 0  # opens retried after a process limit
        self.peak = 0  # most handles open at once

    @property
    def capacity(self) -> int:
        return self._capacity

    def __bool__(self) -> bool:
        return True  # an empty cache is still a cache (``cache or default_cache()``)

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._owners)

    def _purge(self) -> None:
        """Drop entries of collected owners (caller holds the lock). The weakref callback only appends to a
        list: it may run inside a garbage collection on a thread that holds this lock."""
        while self._dead:
            key, ref = self._dead.pop()
            if self._owners.get(key) is ref:
                del self._owners[key]

    def __repr__(self) -> str:
        return f"HandleCache(open={len(self._owners)}, capacity={self._capacity}, evictions={self.evictions})"

    # --- registration (called by the owners) -----------------------------------------------------------------

    def add(self, owner: HandleOwner) -> None:
        """``owner`` just opened its handle; close others if that goes over the capacity."""
        owner._handle_used = True
        key = id(owner)
        dead = self._dead
        ref = weakref.ref(owner, lambda r, k=key: dead.append((k, r)))
        with self._lock:
            self._purge()
            self._owners[key] = ref
            n = len(self._owners)
            if n > self.peak:
                self.peak = n
        if n > self._capacity:
            self._shrink(self._capacity, keep=owner)

    def discard(self, owner: HandleOwner) -> None:
        """``owner`` closed its handle."""
        with self._lock:
            self._owners.pop(id(owner), None)

    # --- eviction ------------------------------------------------------------------------------------------------

    def _shrink(self, target: int, keep: HandleOwner | None = None) -> int:
        """Close handles, oldest unused first, until at most ``target`` stay open (or only busy ones are left).
        The cache lock is never held while an owner is asked, so owners may call back into the cache."""
        closed = 0
        budget = 2 * len(self._owners) + 2  # each owner gets its second chance at most once per call
        while budget > 0:
            budget -= 1
            with self._lock:
                self._purge()
                if len(self._owners) <= target:
                    break
                key, ref = next(iter(self._owners.items()))
                owner = ref()
                if owner is None:  # collected; its callback has not run yet
                    del self._owners[key]
                    continue
                if owner is keep or owner._handle_used:
                    if owner is not keep:
                        owner._handle_used = False
                    self._owners.move_to_end(key)
                    continue
                del self._owners[key]
            if owner._evict_handles():
                closed += 1
            else:  # in use right now: keep it, as the most recent
                with self._lock:
                    self._owners[key] = ref
            del owner
        if closed:
            with self._lock:
                self.evictions += closed
        return closed

    def relieve(self) -> int:
        """The process ran out of descriptors or memory: close half of the handles held (every unused one when
        fewer than 8 are open). Returns how many were closed."""
        n = len(self)
        return self._shrink(n // 2 if n >= 8 else 0)

    def clear(self) -> int:
        """Close every handle not in use (tests, and callers about to fork or to hand descriptors back)."""
        return self._shrink(0)

    def call(self, fn: Callable[[], _T], what: str = "") -> _T:
        """``fn()`` (an open or a map); on a process limit relieve the cache and retry once, then raise
        :class:`~kafkalog.errors.ResourceExhaustedError`. Other errors propagate unchanged."""
        try:
            return fn()
        except OSError as exc:
            if not is_resource_exhaustion(exc):
                raise
        self.relieve()
        with self._lock:
            self.retries += 1
        try:
            return fn()
        except OSError as exc:
            if not is_resource_exhaustion(exc):
                raise
            raise resource_error(exc, what) from exc


_default: HandleCache | None = None
_default_lock = threading.Lock()


def default_cache() -> HandleCache:
    """The process-wide cache of owners given no cache of their own (made on first use)."""
    global _default
    cache = _default
    if cache is None:
        with _default_lock:
            cache = _default
            if cache is None:
                cache = _default = HandleCache()
    return cache

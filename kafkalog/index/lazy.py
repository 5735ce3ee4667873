"""LazyIndexes: a segment's three index objects, made on first use (Kafka's ``LazyIndex``, KIP-263).

A lazily loaded partition never touches its inactive segments' indexes, so listing a segment must not pay for
building three index objects. Kafka wraps each index in a ``LazyIndex`` holder; here the owner's first read of
``_offset_index``, ``_time_index`` or ``_txn_index`` builds all three, so every later use is a plain attribute
read with no holder to go through (the hot paths read them per append and per fetch).
"""

from __future__ import annotations

from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex
from kafkalog.index.txn_index import TransactionIndex
from kafkalog.io.handle_cache import HandleCache

LAZY_INDEX_ATTRS = frozenset({"_offset_index", "_time_index", "_txn_index"})


def _has_attr(obj: object, name: str) -> bool:
    """``name`` is set on ``obj`` itself, asked without ``__getattr__`` (which would build the lazy indexes) and
    without ``obj.__dict__`` (which would turn the instance's compact attribute storage into a real dict)."""
    try:
        object.__getattribute__(obj, name)
    except AttributeError:
        return False
    return True


class LazyIndexes:
    """Mixin for the owner of a segment's indexes. The owner sets ``_stem`` (the files' path without suffix),
    ``_suffix``, ``_base_offset``, ``_handles``, ``_read_only`` and ``max_index_size`` in its ``__init__``;
    the index attributes appear on first use."""

    _indexes_built = False  # set by _make_indexes: asking is an attribute read, not a failed lookup
    _stem: str
    _suffix: str
    _base_offset: int
    _handles: HandleCache | None
    _read_only: bool
    max_index_size: int
    _offset_index: OffsetIndex
    _time_index: TimeIndex
    _txn_index: TransactionIndex

    def __getattr__(self, name: str):
        # Only reached when normal lookup fails: the first use of an index attribute builds all three.
        if name in LAZY_INDEX_ATTRS and _has_attr(self, "_stem"):
            self._make_indexes()
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _make_indexes(self) -> None:
        stem, suffix, base, handles = self._stem, self._suffix, self._base_offset, self._handles
        w = not self._read_only
        self._offset_index = OffsetIndex(stem + ".index" + suffix, base, max_index_size=self.max_index_size,
                                         writable=w, handles=handles)
        self._time_index = TimeIndex(stem + ".timeindex" + suffix, base, max_index_size=self.max_index_size,
                                     writable=w, handles=handles)
        self._txn_index = TransactionIndex(stem + ".txnindex" + suffix, base, writable=w, handles=handles)
        self._indexes_built = True

    def _indexes_made(self) -> bool:
        """False while no index object exists (a lazily loaded segment nobody used): closing, releasing or
        suspending it then has nothing to do for the indexes, and must not build three objects to find out."""
        return self._indexes_built

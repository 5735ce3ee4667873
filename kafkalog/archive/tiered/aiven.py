"""Segments stored by Aiven's tiered-storage-for-apache-kafka RemoteStorageManager: read back byte for byte.

The plugin uploads each segment as three objects under ``<key.prefix><topic>-<topic id>/<partition>/<20-digit
base offset>-<segment id>``: ``.log`` (the segment cut into ``chunk.size`` chunks, each optionally zstd-compressed,
then optionally AES-256-GCM-encrypted as 12-byte IV + ciphertext + 16-byte tag with the manifest's AAD),
``.indexes`` (offset, time, producer-snapshot, leader-epoch and transaction indexes one after the other, each
encrypted as one chunk, never compressed) and ``.rsm-manifest`` (:mod:`kafkalog.archive.tiered.manifest`). The AES data
key is wrapped with the key pair's RSA public key (OAEP, SHA3-512 for the digest and MGF1, as BouncyCastle's
``OAEPWithSHA3-512AndMGF1Padding``).

:class:`AivenSegment` serves what the plugin's ``fetchLogSegment``/``fetchIndex`` serve: a byte range of the
original segment, fetched as one ranged read of just the chunks that cover it, and any index. Objects are reached
through :mod:`kafkalog.archive.storage` (local paths, ``file://``, ``s3://``, ...). :func:`materialize` writes a segment
out as plain local files (``.log`` and the index files, named as Kafka's LocalTieredStorage names them), so the
verification and scans that read local files run on it unchanged.

Nothing is silent: a chunk that fails its tag or decompresses to the wrong size is a
:class:`~kafkalog.errors.CorruptTieredObjectError` naming the object and chunk (or, where the caller asks for it,
a zero-filled range reported in ``damage``, so a scan loses only the batches in that chunk); an encrypted object
without a configuration, or with a key that does not unwrap its data key, is a
:class:`~kafkalog.errors.TieredConfigError`.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kafkalog.archive import object_reads, storage
from kafkalog.archive.ranged_reads import iter_parallel
from kafkalog.archive.tiered.manifest import SegmentManifest, parse_manifest
from kafkalog.archive.tiered.rsm_config import RsmConfig
from kafkalog.errors import (
    CorruptRecordError,
    CorruptTieredObjectError,
    KafkaLogError,
    TieredConfigError,
)
from kafkalog.records.compression import CompressionType, decompress, decompress_into

__all__ = ["AivenSegment", "ChunkDamage", "is_aiven_item", "materialize", "open_ahead", "read_manifest",
           "LOCAL_INDEX_SUFFIXES", "OPEN_AHEAD"]  # fmt: skip

IV_SIZE = 12
TAG_SIZE = 16
#: the most transformed bytes one ranged read asks for (several chunks per request, memory bounded)
READ_BYTES = 8 << 20
#: the most original bytes one task restores: compressed chunks of several MiB each make a task of their own, so
#: they decompress in parallel (one ranged read of 8 MiB stored can hold 30 MiB of zstd-compressed text)
DECODE_BYTES = 4 << 20
#: the largest manifest read (real ones are a few KiB)
MAX_MANIFEST = 16 << 20
#: the smallest untransformed range of a local object :meth:`AivenSegment.read` maps instead of copying
MAP_FROM = 1 << 20
#: Aiven segments opened ahead of the one being read (:func:`open_ahead`)
OPEN_AHEAD = 2
#: manifest index name -> suffix of the local file it becomes (Kafka's LocalTieredStorage names)
LOCAL_INDEX_SUFFIXES = {
    "offset": ".index",
    "timestamp": ".timeindex",
    "transaction": ".txnindex",
    "producerSnapshot": ".snapshot",
    "leaderEpoch": ".leader_epoch_checkpoint",
}


@dataclass(frozen=True)
class ChunkDamage:
    """A chunk that could not be restored: its id, where its bytes belong in the original segment, and why."""

    chunk: int
    position: int
    size: int
    reason: str


def is_aiven_item(item: Any) -> bool:
    """Whether a discovered segment is an Aiven object set (its ``.log`` comes with an ``.rsm-manifest``)."""
    return getattr(item, "layout", "") == "tiered-aiven" and ".rsm-manifest" in getattr(item, "extra_files", ())


def _stem(log_url: str) -> str:
    return log_url[: -len(".log")] if log_url.endswith(".log") else log_url


class AivenSegment:
    """One uploaded segment: its manifest, its unwrapped data key, and ranged reads of its objects."""

    def __init__(self, log_url: str, manifest: SegmentManifest, *, data_key: bytes | None,
                 options: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        self.log_url = log_url
        self.manifest = manifest
        self.options = options
        #: the stored bytes of the first chunks, fetched ahead (:meth:`prefetch`): (their object offset, bytes)
        self._head: tuple[int, bytes] | None = None
        self._aes = None
        if data_key is not None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aes = AESGCM(data_key)

    # ------------------------------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, log_url: str, *, rsm: RsmConfig | None = None, options: Mapping[str, Any] | None = None,
             object_size: int | None = None) -> AivenSegment:  # fmt: skip
        """Read the manifest beside ``log_url`` and check it against the object (``object_size``: its size when
        the caller listed it, else one stat, sent with the manifest's GET). Raises ObjectNotFoundError/StorageError (OSErrors) for I/O,
        CorruptTieredObjectError for a bad manifest, TieredConfigError/TieredKeyError for the key."""
        manifest_url = _stem(log_url) + ".rsm-manifest"
        if (object_size is None or object_size < 0) and storage.is_remote(log_url):
            # the manifest GET and the HEAD in flight together (a local stat costs less than a hand-off to the pool)
            got = list(iter_parallel([lambda: read_manifest(manifest_url, options),
                                      lambda: storage.stat_size(log_url, options)], 2))  # fmt: skip
            manifest, size = got[0], got[1]
        elif object_size is None or object_size < 0:
            manifest, size = read_manifest(manifest_url, options), storage.stat_size(log_url, options)
        else:
            manifest, size = read_manifest(manifest_url, options), object_size
        if size < 0:
            raise storage.ObjectNotFoundError(f"{log_url}: no such object")
        if size != manifest.chunk_index.transformed_total:
            raise CorruptTieredObjectError(
                f"object is {size} bytes, its manifest's chunk index says {manifest.chunk_index.transformed_total}",
                obj=log_url,
            )
        if manifest.encrypted and manifest.chunk_index.kind == "fixed":
            overhead = IV_SIZE + TAG_SIZE
            ci = manifest.chunk_index
            if len(ci) and (ci.transformed_size != ci.original_size + overhead).any():
                raise CorruptTieredObjectError("manifest's fixed chunk sizes do not fit AES-GCM chunks", obj=log_url)
        return cls(log_url, manifest, data_key=_unwrap(manifest, rsm, log_url), options=options)

    @classmethod
    def open_item(cls, item: Any, *, rsm: RsmConfig | None = None,
                  options: Mapping[str, Any] | None = None) -> AivenSegment:  # fmt: skip
        """:meth:`open` for a listed segment (:class:`kafkalog.archive.discovery.SegmentItem`): the size its
        listing gave spares the ``.log``'s HEAD."""
        return cls.open(item.path, rsm=rsm, options=options, object_size=item.size_bytes)

    def prefetch(self, limit: int = READ_BYTES, fetched: bytes | None = None) -> None:
        """Fetch the stored bytes of the first chunks now (whole chunks, at most ``limit`` bytes, one ranged read),
        so a read of the segment's start does not wait a round trip for them: :func:`open_ahead` calls it while
        the previous segment is read. ``fetched``: the object's first bytes, read already (:func:`open_ahead` reads
        them beside the manifest), kept up to the last whole chunk in them instead of a GET. Kept while the
        segment is (``limit`` bytes). A failed read is not an error here: the read that needs the bytes fetches
        them again and reports it. Untransformed chunks of a local object are not fetched ahead: there is no round
        trip to hide, and :meth:`read` maps them or copies them from the page cache straight into place, where
        bytes fetched ahead would cost a read and a second copy."""
        ci = self.manifest.chunk_index
        if self._head is not None or not len(ci):
            return
        if not storage.is_remote(self.log_url) and self._stored_as_is(0, len(ci)):
            return  # mapped or read straight from the page cache: a fetch ahead would only add a copy
        ends = ci.transformed_position + ci.transformed_size
        t0 = int(ci.transformed_position[0])
        if fetched is not None:
            limit = min(limit, len(fetched) - t0)
        k = int(np.searchsorted(ends, t0 + limit, side="right"))
        if k == 0:
            return
        t1 = int(ends[k - 1])
        if fetched is not None:
            self._head = (t0, memoryview(fetched)[t0:t1])
            return
        try:
            blob = _read(self.log_url, t0, t1, self.options)
        except OSError:
            return
        if len(blob) == t1 - t0:
            self._head = (t0, blob)

    @property
    def size(self) -> int:
        """The original segment's size in bytes."""
        return self.manifest.chunk_index.original_file_size

    # ---------------------------------------------------------------------------------------------------- reads

    def _detransform(self, data: bytes | memoryview, chunk: int,
                     into: memoryview | None = None) -> bytes | bytearray | memoryview:  # fmt: skip
        """One chunk as stored -> its original bytes (decrypt, then decompress), checked against the index. Runs
        in the read pool's threads: AES-GCM (``cryptography``) and zstd (``zstandard``, ``cramjam``) release the
        GIL, so chunks restore on every core. The ciphertext is decrypted from the fetched buffer, the last
        transform writes into ``into`` (the chunk's place in the caller's buffer; returned when used) or a buffer
        of the manifest's size: no copies besides the transforms."""
        ci = self.manifest.chunk_index
        want = int(ci.original_size[chunk])
        if into is not None and len(into) != want:
            into = None
        if self._aes is not None:
            from cryptography.exceptions import InvalidTag

            if len(data) < IV_SIZE + TAG_SIZE:
                raise self._damage(chunk, "is shorter than an AES-GCM IV and tag")
            view = memoryview(data)
            plain_into = into is not None and not self.manifest.compression and len(view) - IV_SIZE - TAG_SIZE == want
            try:
                if plain_into and hasattr(self._aes, "decrypt_into"):  # cryptography >= 45
                    self._aes.decrypt_into(view[:IV_SIZE], view[IV_SIZE:], self.manifest.aad, into)
                    return into
                data = self._aes.decrypt(view[:IV_SIZE], view[IV_SIZE:], self.manifest.aad)
            except InvalidTag:
                raise self._damage(chunk, "fails its AES-GCM tag") from None
        if self.manifest.compression:
            out = into if into is not None else bytearray(want)
            try:
                n = decompress_into(CompressionType.ZSTD, data, out, max_size=want) if want else None
                # None: the payload does not fit ``want`` bytes or does not decode; decompress says which
                data = out if n == want else decompress(CompressionType.ZSTD, data, max_size=want)
            except CorruptRecordError as exc:
                raise self._damage(chunk, f"does not decompress: {exc}") from None
        if len(data) != want:
            raise self._damage(chunk, f"holds {len(data)} bytes, its manifest says {want}")
        return data

    def _damage(self, chunk: int, reason: str) -> CorruptTieredObjectError:
        ci = self.manifest.chunk_index
        pos, size = int(ci.original_position[chunk]), int(ci.original_size[chunk])
        tpos, tsize = int(ci.transformed_position[chunk]), int(ci.transformed_size[chunk])
        return CorruptTieredObjectError(
            f"chunk {chunk} (object bytes {tpos}-{tpos + tsize}, segment bytes {pos}-{pos + size}) {reason}",
            obj=self.log_url, chunk=chunk, original_range=(pos, size),
        )  # fmt: skip

    def iter_range(self, start: int = 0, end: int | None = None, *,
                   damage: list[ChunkDamage] | None = None) -> Iterator[bytes | memoryview]:  # fmt: skip
        """The original bytes ``[start, end)`` in pieces, reading only the chunks that cover them (one ranged read
        per :data:`READ_BYTES` of transformed chunks, several in flight: :mod:`kafkalog.archive.ranged_reads`). A bad chunk
        raises CorruptTieredObjectError, unless ``damage`` is a list: then its bytes come back as zeros and a
        :class:`ChunkDamage` is appended."""
        end = self.size if end is None else min(end, self.size)
        for pieces, bad in self._restore(start, end, damage is not None, None):
            if damage is not None:
                damage.extend(bad)
            yield from pieces

    def _restore(self, start: int, end: int, keep_going: bool,
                 into: memoryview | None) -> Iterator[tuple[list[memoryview], list[ChunkDamage]]]:  # fmt: skip
        """The restore tasks of ``[start, end)`` run in the read pool, results in order: chunks ``[i, j)`` per task,
        at most :data:`READ_BYTES` stored and :data:`DECODE_BYTES` original (large compressed chunks restore in
        parallel). With ``into`` (a buffer for ``[start, end)``) the chunks are restored in place."""
        ci = self.manifest.chunk_index
        ids = ci.chunks_for_range(max(start, 0), end)
        groups = []
        i = ids.start
        while i < ids.stop:
            j = i + 1
            t0, o0 = int(ci.transformed_position[i]), int(ci.original_position[i])
            while (j < ids.stop and int(ci.transformed_position[j] + ci.transformed_size[j]) - t0 <= READ_BYTES
                   and int(ci.original_position[j] + ci.original_size[j]) - o0 <= DECODE_BYTES):  # fmt: skip
                j += 1
            groups.append((i, j))
            i = j
        # the next groups are fetched, decrypted and decompressed while the caller consumes this one
        yield from iter_parallel(lambda i=i, j=j: self._group(i, j, start, end, keep_going, into) for i, j in groups)

    def _group(self, i: int, j: int, start: int, end: int, keep_going: bool,
               into: memoryview | None = None) -> tuple[list[memoryview], list[ChunkDamage]]:  # fmt: skip
        """Chunks ``[i, j)``: one ranged read, each chunk detransformed and cut to ``[start, end)``: returned as
        pieces, or written at its place in ``into`` (a whole chunk decrypted or decompressed straight there)."""
        ci = self.manifest.chunk_index
        t0 = int(ci.transformed_position[i])
        t1 = int(ci.transformed_position[j - 1] + ci.transformed_size[j - 1])
        if into is not None and self._stored_as_is(i, j):
            return self._read_in_place(i, j, start, end, into)
        head = self._head
        if head is not None and head[0] <= t0 and t1 <= head[0] + len(head[1]):
            blob = memoryview(head[1])[t0 - head[0] : t1 - head[0]]
        else:
            blob = memoryview(_read(self.log_url, t0, t1, self.options))
        if len(blob) != t1 - t0:
            raise CorruptTieredObjectError(f"object ends at byte {t0 + len(blob)}, its manifest says {t1}",
                                           obj=self.log_url)  # fmt: skip
        pieces: list[memoryview] = []
        bad: list[ChunkDamage] = []
        for c in range(i, j):
            off = int(ci.transformed_position[c]) - t0
            opos, osize = int(ci.original_position[c]), int(ci.original_size[c])
            lo, hi = max(start - opos, 0), min(end - opos, osize)
            dest = None if into is None else into[opos + lo - start : opos + hi - start]
            try:
                plain = self._detransform(blob[off : off + int(ci.transformed_size[c])], c,
                                          into=dest if lo == 0 and hi == osize else None)  # fmt: skip
            except CorruptTieredObjectError as exc:
                if not keep_going:
                    raise
                pos, size = exc.original_range or (0, 0)
                bad.append(ChunkDamage(c, pos, size, str(exc)))
                plain = bytes(size)
            if dest is None:
                pieces.append(memoryview(plain)[lo:hi])  # no copy: the caller copies once, into its buffer or file
            elif plain is not dest:
                dest[:] = memoryview(plain)[lo:hi]
        return pieces, bad

    def _stored_as_is(self, i: int, j: int) -> bool:
        """Whether chunks ``[i, j)`` are stored untransformed at their original positions (no compression, no
        encryption, each as large as the manifest says): their original bytes are the object's bytes there."""
        if self._aes is not None or self.manifest.compression:
            return False
        ci = self.manifest.chunk_index
        return bool(ci.transformed_position[i] == ci.original_position[i]
                    and (ci.transformed_size[i:j] == ci.original_size[i:j]).all())  # fmt: skip

    def _read_in_place(self, i: int, j: int, start: int, end: int,
                       into: memoryview) -> tuple[list[memoryview], list[ChunkDamage]]:  # fmt: skip
        """Untransformed chunks ``[i, j)`` cut to ``[start, end)``: read straight into their place in ``into`` (one
        copy, from the store or the page cache into the result), or copied there from the bytes prefetched."""
        ci = self.manifest.chunk_index
        lo = max(start, int(ci.original_position[i]))
        hi = min(end, int(ci.original_position[j - 1] + ci.original_size[j - 1]))
        dest = into[lo - start : hi - start]
        head = self._head
        if head is not None and head[0] <= lo and hi <= head[0] + len(head[1]):
            dest[:] = memoryview(head[1])[lo - head[0] : hi - head[0]]
            return [], []
        try:
            got = storage.read_range_into(self.log_url, lo, dest, self.options)
        except FileNotFoundError:
            raise storage.ObjectNotFoundError(f"{self.log_url}: no such object") from None
        if got != hi - lo:
            raise CorruptTieredObjectError(f"object ends at byte {lo + got}, its manifest says {hi}", obj=self.log_url)
        return [], []

    def read(self, start: int = 0, end: int | None = None, *,
             damage: list[ChunkDamage] | None = None) -> bytearray | memoryview:  # fmt: skip
        """The original bytes ``[start, end)`` (``fetchLogSegment(start, end - 1)``) in one buffer, each chunk
        restored (by the read pool's threads) straight into its place. Untransformed chunks of a local object (a
        bucket in a local dir) of at least :data:`MAP_FROM` bytes come back as a read-only view of the file's own
        pages, mapped as a local ``.log`` is (:func:`kafkalog.records.reader.open_source`): no copy at all."""
        end = self.size if end is None else min(end, self.size)
        start = max(start, 0)
        if end - start >= MAP_FROM:
            view = self._mapped(start, end)
            if view is not None:
                return view
        out = _unfilled(max(0, end - start))
        for _, bad in self._restore(start, end, damage is not None, memoryview(out)):
            if damage is not None:
                damage.extend(bad)
        return out

    def _mapped(self, start: int, end: int) -> memoryview | None:
        """``[start, end)`` of a local object stored as is, as a view of a read-only map of just that range (pages
        prefaulted from the page cache, ``MAP_POPULATE``); None where it is remote, transformed or cannot be
        mapped. A cut object is the CorruptTieredObjectError a read would raise, a missing one ObjectNotFoundError.
        As with a mapped local ``.log``, the file must not be truncated while the view is used."""
        ci = self.manifest.chunk_index
        ids = ci.chunks_for_range(start, end)
        if storage.is_remote(self.log_url) or not len(ids) or not self._stored_as_is(ids.start, ids.stop):
            return None
        try:
            with open(storage.local_path(self.log_url), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < end:
                    raise CorruptTieredObjectError(f"object ends at byte {size}, its manifest says {end}",
                                                   obj=self.log_url)  # fmt: skip
                base = start - start % mmap.ALLOCATIONGRANULARITY
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                mm = mmap.mmap(f.fileno(), end - base, flags=flags, prot=mmap.PROT_READ, offset=base)
        except FileNotFoundError:
            raise storage.ObjectNotFoundError(f"{self.log_url}: no such object") from None
        except (OSError, ValueError):  # a filesystem that cannot map: copy instead
            return None
        return memoryview(mm)[start - base :]

    def fetch(self, dest: str, start: int = 0, end: int | None = None, *,
              damage: list[ChunkDamage] | None = None) -> int:  # fmt: skip
        """Write the original bytes ``[start, end)`` to the local file ``dest``; return how many."""
        written = 0
        with open(dest, "wb") as out:
            for piece in self.iter_range(start, end, damage=damage):
                out.write(piece)
                written += len(piece)
        return written

    def index(self, name: str) -> bytes | None:
        """One index as the plugin's ``fetchIndex`` returns it (manifest names: ``offset``, ``timestamp``,
        ``producerSnapshot``, ``leaderEpoch``, ``transaction``); None when the segment has none."""
        return self.indexes([name]).get(name)

    def indexes(self, names: list[str] | None = None) -> dict[str, bytes]:
        """The indexes ``names`` (default: all the manifest lists) from one ranged read of ``.indexes``."""
        parts = {n: self.manifest.indexes[n] for n in (names or self.manifest.indexes) if n in self.manifest.indexes}
        if not parts:
            return {}
        url = _stem(self.log_url) + ".indexes"
        lo = min(p for p, _ in parts.values())
        hi = max(p + s for p, s in parts.values())
        blob = _read(url, lo, hi, self.options)
        if len(blob) != hi - lo:
            raise CorruptTieredObjectError(f"object ends at byte {lo + len(blob)}, its manifest says {hi}", obj=url)
        out: dict[str, bytes] = {}
        for name, (pos, size) in parts.items():
            data = blob[pos - lo : pos - lo + size]
            if self._aes is not None:
                from cryptography.exceptions import InvalidTag

                try:
                    data = self._aes.decrypt(data[:IV_SIZE], data[IV_SIZE:], self.manifest.aad)
                except (InvalidTag, ValueError):
                    raise CorruptTieredObjectError(f"index {name} (object bytes {pos}-{pos + size}) fails its "
                                                   "AES-GCM tag", obj=url) from None  # fmt: skip
            out[name] = data
        return out


def _unfilled(n: int) -> bytearray:
    """A bytearray of ``n`` bytes left as allocated, not zeroed: :meth:`AivenSegment.read` writes every byte of it
    (the chunks are contiguous by construction and each is checked to restore to its exact size, a bad one written
    as zeros), and ``bytearray(n)`` would zero it in the caller's thread before the first chunk is fetched, the one
    serial step of a read (2-11 ms per 16 MiB). Its pages are then touched first by the pool's threads as they
    restore into them, as transparent huge pages where the kernel gives them (:func:`_advise_huge`).
    ``bytearray(n)`` where ``ctypes`` cannot reach CPython's allocator."""
    if n >= _UNFILLED_FROM and _NEW_BYTEARRAY is not None:
        buf = _NEW_BYTEARRAY(None, n)
        if n >= _HUGE_FROM:
            _advise_huge(buf)
        return buf
    return bytearray(n)


def _advise_huge(buf: bytearray) -> None:
    """Ask for transparent huge pages under ``buf`` (``madvise(MADV_HUGEPAGE)`` before its first touch): a large
    result is freshly mapped memory, and faulting it in 4 KiB at a time is the largest cost of a read from a
    local-dir bucket (a 32 MiB buffer: 25-31 ms in 4 KiB faults, 5-6 ms in 2 MiB ones, load 12). A no-op where
    the kernel has no THP (or ``never``) or libc has no ``madvise``."""
    if _MADVISE is None or not len(buf):
        return
    try:
        import ctypes

        addr = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
        lo, hi = addr & ~(_PAGE - 1), (addr + len(buf) + _PAGE - 1) & ~(_PAGE - 1)
        _MADVISE(lo, hi - lo, _MADV_HUGEPAGE)
    except (ValueError, TypeError, OSError):
        pass


def _new_bytearray() -> Any:
    try:
        import ctypes

        fn = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except (ImportError, AttributeError):  # not CPython
        return None
    fn.restype = ctypes.py_object
    fn.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
    return fn


def _madvise() -> Any:
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (ImportError, AttributeError, OSError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


#: below this a zeroed buffer costs next to nothing
_UNFILLED_FROM = 1 << 20
_NEW_BYTEARRAY = _new_bytearray()
#: buffers from this size on ask for huge pages (they span at least one aligned 2 MiB page)
_HUGE_FROM = 4 << 20
_MADVISE = _madvise()
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 14)
_PAGE = mmap.PAGESIZE


def open_ahead(items: Iterable[Any], opener: Callable[[Any], Any], ahead: int = OPEN_AHEAD, *, prefetch: bool = True,
               options: Mapping[str, Any] | None = None) -> Iterator[tuple[Any, Any, BaseException | None]]:  # fmt: skip
    """``(item, opener(item), None)`` for each item in order, or ``(item, None, error)`` where the opener raised
    (an OSError or a kafkalog error: the caller reports it for that item; anything else is raised). Up to
    ``ahead`` items are opened in the read pool while the caller reads the current one, so a segment's round trips
    overlap the previous segment's reads instead of following them: the manifest's read
    (:meth:`AivenSegment.open`; with the object's size from a listing, no HEAD of the ``.log``), the key unwrap,
    then the GET of its first chunks (:meth:`AivenSegment.prefetch`). The ``.log`` is kept open
    (:func:`kafkalog.archive.object_reads.keep_open`) until the caller moves on to the next item, so its chunk GETs
    send no HEAD; for items that carry their URL and listed size (``path``, ``size_bytes``: a
    :class:`~kafkalog.archive.discovery.SegmentItem`) and when the opener's storage ``options`` are given here
    (``{}``: the environment's), that open is in flight together with the manifest's. Memory: ``ahead + 1`` opened segments, each its manifest (chunk index, a
    few KiB per GiB of segment, at most :data:`MAX_MANIFEST`), data key and first :data:`READ_BYTES` of stored
    chunks (with the default ahead, 3 x 8 MiB); ``prefetch=False`` (a caller that keeps every segment open)
    fetches no chunk ahead."""

    def listed(item: Any) -> tuple[str, int] | None:
        """(URL, listed size) of an item whose ``.log`` can be opened beside its manifest."""
        url, size = getattr(item, "path", None), getattr(item, "size_bytes", -1)
        if options is None:  # the opener's storage options unknown: not opened with others than its reads'
            return None
        if isinstance(url, str) and isinstance(size, int) and size >= 0 and storage.is_remote(url):
            return url, size
        return None

    def keep(item: Any) -> tuple[str, bytes | None] | None:
        # the .log opened (its HEAD) and its first bytes read beside the manifest's read: two round trips, not four
        found = listed(item)
        if found is None or not object_reads.keep_open(found[0], options, found[1]):
            return None
        if not prefetch:
            return found[0], None
        try:
            return found[0], storage.read_range(found[0], 0, min(found[1], READ_BYTES), options)
        except OSError:
            return found[0], None

    def task(item: Any) -> tuple[Any, Any, BaseException | None]:
        try:
            seg = opener(item)
        except (OSError, KafkaLogError) as exc:
            return item, None, exc
        if isinstance(seg, AivenSegment):
            # the .log stays open while the segment is read: its chunk GETs need no HEAD each
            object_reads.keep_open(seg.log_url, seg.options, seg.manifest.chunk_index.transformed_total)
            if prefetch and listed(item) is None:  # else its first bytes come from keep()
                seg.prefetch()
        return item, seg, None

    def tasks() -> Iterator[Callable[[], Any]]:
        for item in items:
            yield lambda item=item: keep(item)
            yield lambda item=item: task(item)

    held: AivenSegment | None = None
    results = iter_parallel(tasks(), 2 * max(1, ahead))
    try:
        for kept in results:
            item, seg, error = next(results)
            if kept is not None and not isinstance(seg, AivenSegment):
                object_reads.release(kept[0], options)
            if prefetch and isinstance(seg, AivenSegment) and listed(item) is not None:
                if kept is not None and kept[1] is not None and kept[0] == seg.log_url:
                    seg.prefetch(fetched=kept[1])
                else:  # the early read failed: fetched here (the read would have fetched them anyway)
                    seg.prefetch()
            if held is not None:  # the caller is done with the previous segment
                object_reads.release(held.log_url, held.options)
            held = seg if isinstance(seg, AivenSegment) else None
            yield item, seg, error
    finally:
        if held is not None:
            object_reads.release(held.log_url, held.options)


def read_manifest(manifest_url: str, options: Mapping[str, Any] | None = None) -> SegmentManifest:
    """One ``.rsm-manifest`` read (at most :data:`MAX_MANIFEST` bytes: a larger one is refused, not loaded) and
    parsed; CorruptTieredObjectError for a bad one, ObjectNotFoundError/StorageError for I/O."""
    raw = _read(manifest_url, 0, MAX_MANIFEST + 1, options)
    if len(raw) > MAX_MANIFEST:
        raise CorruptTieredObjectError(f"manifest larger than {MAX_MANIFEST} bytes", obj=manifest_url)
    return parse_manifest(raw, obj=manifest_url)


def _read(url: str, start: int, end: int, options: Mapping[str, Any] | None) -> bytes:
    try:
        return storage.read_range(url, start, end, options)
    except FileNotFoundError:
        raise storage.ObjectNotFoundError(f"{url}: no such object") from None


def _unwrap(manifest: SegmentManifest, rsm: RsmConfig | None, obj: str) -> bytes | None:
    """The AES data key of an encrypted segment, unwrapped with the configured private key."""
    if manifest.data_key is None:
        return None
    key_id, wrapped = manifest.data_key
    if rsm is None:
        raise TieredConfigError(f"{obj}: stored encrypted (key pair {key_id!r}): reading it needs the broker's "
                                "RemoteStorageManager configuration (--rsm-config FILE, option rsmConfig)")  # fmt: skip
    return rsm.unwrap_data_key(key_id, wrapped, obj=obj)


def materialize(item: Any, root: str, *, rsm: RsmConfig | None = None, options: Mapping[str, Any] | None = None,
                with_log: bool = True, damage: list[ChunkDamage] | None = None,
                segment: AivenSegment | None = None) -> Any:  # fmt: skip
    """Write an Aiven segment out under the local dir ``root`` as plain files: ``<stem>.log`` (when
    ``with_log``) and, out of ``.indexes``, ``<stem>.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` and
    ``.leader_epoch_checkpoint``, in ``<topic dir>/<partition>/`` as in the bucket. Returns ``item`` (a
    :class:`kafkalog.archive.discovery.SegmentItem`, duck-typed) re-pointed at the copy, with the original segment's size
    and its index files' sizes, and no ``extra_files``. Bad chunks: see :meth:`AivenSegment.iter_range`."""
    seg = segment or AivenSegment.open_item(item, rsm=rsm, options=options)
    pdir = storage.basename(item.partition_dir)
    tdir = storage.basename(storage.dirname(item.partition_dir))
    local_dir = os.path.join(root, tdir, pdir)
    os.makedirs(local_dir, exist_ok=True)
    stem = os.path.join(local_dir, storage.basename(_stem(item.path)))
    if with_log:
        seg.fetch(stem + ".log", damage=damage)
    sizes: dict[str, int] = {}
    for name, data in seg.indexes().items():
        with open(stem + LOCAL_INDEX_SUFFIXES[name], "wb") as f:
            f.write(data)
        sizes[name] = len(data)
    return dataclasses.replace(
        item, path=stem + ".log", partition_dir=local_dir, size_bytes=seg.size, extra_files=(),
        index_size=sizes.get("offset", -1), timeindex_size=sizes.get("timestamp", -1),
        txnindex_size=sizes.get("transaction", -1),
    )  # fmt: skip

"""Where archive bytes live: one place that turns a URL into file-system calls (list, stat, read a byte range).

Archives of segments sit in object stores (Kafka's tiered storage, backups in buckets) as often as on a local disk.
Format code never opens a remote object itself: it asks this module for listings and byte ranges, or for a local
copy of exactly the objects it needs (:func:`fetch`, :func:`stage_segment`), and then reads local files as usual.

* Plain paths and ``file:`` URLs are local (``file:///p``, and Hadoop's ``file:/p`` and ``file://localhost/p``):
  ``os`` calls, no pyarrow needed.
* Every other URL (``s3://``, ``gs://``, ``hdfs://``, ...) goes through ``pyarrow.fs`` (the ``spark`` extra).
  ``gs://`` builds a ``GcsFileSystem`` whose retries end after ``request_timeout`` seconds, or ``connect_timeout``
  when no Google credentials are configured (Google's client would otherwise retry its token requests for
  minutes); errors for ``gs://``, ``abfs://`` and ``hdfs://`` say what the client is missing.
  ``s3://`` builds an ``S3FileSystem`` with bounded timeouts and retries; credentials, region and endpoint come
  from the standard AWS environment variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``/``AWS_REGION``, ``AWS_ENDPOINT_URL``) unless ``options`` override
  them (keys in :data:`STORAGE_OPTIONS`: the DataSource's ``.option(...)``, the CLI's ``--storage-option``).

Every failure is a :class:`StorageError` (a ``KafkaStorageError`` and an ``OSError``) whose message names the
object; a missing object or bucket is an :class:`ObjectNotFoundError` (also a ``FileNotFoundError``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import re
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

from kafkalog.archive.ranged_reads import PART_BYTES, iter_parallel, split_range
from kafkalog.checkpoint.atomic import atomic_write
from kafkalog.errors import InvalidArgumentError, KafkaStorageError
from kafkalog.io.file_access import mapped_range, no_readahead

__all__ = [
    "STORAGE_OPTIONS",
    "FileEntry",
    "ObjectNotFoundError",
    "StorageError",
    "basename",
    "dirname",
    "fetch",
    "fetch_parallel",
    "is_remote",
    "iter_object_ranges",
    "open_object_ranges",
    "join",
    "local_path",
    "mirror_path",
    "parse_storage_options",
    "list_tree",
    "read_range",
    "read_range_into",
    "forget_kept",
    "resolve",
    "scratch_dir",
    "stage_files",
    "stage_segment",
    "stat_size",
    "write_bytes",
    "storage_options",
]

#: Option keys understood for remote URLs (case-insensitive). Unset keys fall back to the AWS environment.
STORAGE_OPTIONS = {
    "access_key": "AWS access key id (default: AWS_ACCESS_KEY_ID)",
    "secret_key": "AWS secret access key (default: AWS_SECRET_ACCESS_KEY)",
    "session_token": "AWS session token (default: AWS_SESSION_TOKEN)",
    "region": "S3 region (default: AWS_DEFAULT_REGION or AWS_REGION)",
    "endpoint_url": "S3 endpoint, e.g. http://127.0.0.1:9000 (default: AWS_ENDPOINT_URL)",
    "anonymous": "true: unsigned requests (public buckets)",
    "connect_timeout": "seconds to wait for a connection (default 5)",
    "request_timeout": "seconds to wait for a response (default 30)",
    "max_attempts": "attempts per request, retries included (default 3)",
}

_CONNECT_TIMEOUT = 5.0
_REQUEST_TIMEOUT = 30.0
_MAX_ATTEMPTS = 3
#: bytes per read call when copying an object range to a local file (bounded memory, few round trips)
CHUNK = 8 << 20

_SCHEME = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://")
#: a local file URL: ``file:///p``, ``file://localhost/p`` or Hadoop's ``file:/p`` (what follows is the path)
_FILE_URL = re.compile(r"^file:(?://(?:localhost)?)?(?=/(?!/))", re.IGNORECASE)


class StorageError(KafkaStorageError, OSError):
    """A remote object could not be listed or read (network, credentials, timeouts); the message names it."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """A remote object, prefix or bucket that does not exist."""


@dataclass(frozen=True)
class FileEntry:
    """One object of a listing: its full URL and size in bytes."""

    url: str
    size: int


def is_remote(path: str | os.PathLike) -> bool:
    """True for a URL with a scheme other than ``file`` (those go through pyarrow.fs)."""
    m = _SCHEME.match(os.fspath(path))
    return bool(m) and m["scheme"].lower() != "file"


def local_path(path: str | os.PathLike) -> str:
    """A local path or ``file:`` URL (``file:///p``, ``file://localhost/p``, ``file:/p``; percent-escapes
    decoded) as a plain path. A ``file://`` URL naming another host is refused."""
    path = os.fspath(path)
    m = _FILE_URL.match(path)
    if m:
        return unquote(path[m.end() :])
    if path[:7].lower() == "file://":
        raise InvalidArgumentError(f"{path}: a file URL must name a local path (file:///path or "
                                   "file://localhost/path)")  # fmt: skip
    return path


def join(base: str, name: str) -> str:
    """``base/name`` for a URL or a local path."""
    return base.rstrip("/") + "/" + name if is_remote(base) else os.path.join(base, name)


def dirname(path: str) -> str:
    """The parent of a URL (keeping ``scheme://bucket``) or of a local path."""
    if not is_remote(path):
        return os.path.dirname(os.path.normpath(path))
    head, _, _ = path.rstrip("/").rpartition("/")
    return head if "://" in head and not head.endswith(":/") else path


def basename(path: str) -> str:
    """The last component of a URL or a local path (trailing slashes ignored)."""
    if not is_remote(path):
        return os.path.basename(os.path.normpath(path))
    return path.rstrip("/").rpartition("/")[2]


def storage_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """The storage keys of ``options`` (lower-cased; other keys, e.g. a DataSource's own, are dropped)."""
    return {k.lower(): str(v) for k, v in (options or {}).items() if k.lower() in STORAGE_OPTIONS}


def parse_storage_options(pairs: Iterable[str]) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (the CLI's ``--storage-option``) as storage options; unknown keys are errors."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().lower()
        if not sep or key not in STORAGE_OPTIONS:
            known = ", ".join(sorted(STORAGE_OPTIONS))
            raise InvalidArgumentError(f"storage option must be KEY=VALUE with KEY one of {known}: {pair!r}")
        out[key] = value
    return out


# --------------------------------------------------------------------------------------------- file systems

_FS_CACHE: dict[tuple, Any] = {}
_FS_LOCK = threading.Lock()


def _pafs():
    try:
        import pyarrow.fs as pafs
    except ImportError as exc:
        raise StorageError("remote URLs need pyarrow: pip install 'kafkalog[spark]'") from exc
    return pafs


def _anonymous(opts: dict[str, str]) -> bool:
    return opts.get("anonymous", "").lower() in ("1", "true", "yes")


def _endpoint(endpoint: str | None) -> dict[str, str]:
    """pyarrow's ``scheme``/``endpoint_override`` for an endpoint URL (``http://host:port``; https without one)."""
    if not endpoint:
        return {}
    m = _SCHEME.match(endpoint)
    return {"scheme": m["scheme"].lower() if m else "https", "endpoint_override": endpoint[m.end() :] if m else endpoint}


def _s3(opts: dict[str, str]):
    pafs = _pafs()
    env = os.environ
    endpoint = opts.get("endpoint_url") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    kwargs: dict[str, Any] = {
        "region": opts.get("region") or env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1",
        "connect_timeout": float(opts.get("connect_timeout", _CONNECT_TIMEOUT)),
        "request_timeout": float(opts.get("request_timeout", _REQUEST_TIMEOUT)),
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=int(opts.get("max_attempts", _MAX_ATTEMPTS))),
        # reports are small: one PutObject on close instead of a multipart upload (which some S3-compatible
        # servers, moto's among them, reject for pyarrow's requests)
        "allow_delayed_open": True,
    }
    kwargs.update(_endpoint(endpoint))
    if _anonymous(opts):
        kwargs["anonymous"] = True
    elif opts.get("access_key") or opts.get("secret_key"):
        kwargs["access_key"] = opts.get("access_key")
        kwargs["secret_key"] = opts.get("secret_key")
        kwargs["session_token"] = opts.get("session_token")
    return pafs.S3FileSystem(**kwargs)


#: environment variables from which Google's client finds credentials without the metadata server
_GCS_CREDENTIAL_ENV = ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "CLOUDSDK_CONFIG")


def _gcs_configured(opts: dict[str, str]) -> bool:
    """Whether a gs:// client has credentials to use before trying the GCE metadata server."""
    if opts.get("endpoint_url") or _anonymous(opts):
        return True
    if any(os.environ.get(n) for n in _GCS_CREDENTIAL_ENV):
        return True
    adc = os.path.join(os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json")
    return os.path.isfile(adc)


def _gcs(opts: dict[str, str]):
    pafs = _pafs()
    limit = opts.get("request_timeout", _REQUEST_TIMEOUT) if _gcs_configured(opts) else \
        opts.get("connect_timeout", _CONNECT_TIMEOUT)  # fmt: skip
    kwargs: dict[str, Any] = {"retry_time_limit": timedelta(seconds=float(limit))}
    kwargs.update(_endpoint(opts.get("endpoint_url")))
    if _anonymous(opts):
        kwargs["anonymous"] = True
    return pafs.GcsFileSystem(**kwargs)


#: what a client needs, per scheme, for errors that show it is missing (``_error``)
_NEEDS = {
    "gs": ("oauth2", "credentials"),
    "abfs": ("credential", "authentication"),
    "hdfs": ("libjvm", "libhdfs", "hadoop", "classpath"),
}
_NEEDS["gcs"] = _NEEDS["gs"]
_NEEDS["abfss"] = _NEEDS["abfs"]
_MISSING = {
    "gs": "no usable Google credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run "
          "'gcloud auth application-default login', or run on GCE (metadata server); --storage-option "
          "anonymous=true for a public bucket, endpoint_url=http://HOST:PORT for an emulator",
    "abfs": "no usable Azure credentials: pyarrow's AzureFileSystem tries DefaultAzureCredential (AZURE_CLIENT_ID, "
            "AZURE_TENANT_ID and AZURE_CLIENT_SECRET, a managed identity, or 'az login')",
    "hdfs": "pyarrow's HadoopFileSystem needs Hadoop's native client on this host: JAVA_HOME (a JDK with "
            "lib/server/libjvm.so), HADOOP_HOME or ARROW_LIBHDFS_DIR (libhdfs.so), and "
            "CLASSPATH=$(hadoop classpath --glob)",
}
_MISSING["gcs"] = _MISSING["gs"]
_MISSING["abfss"] = _MISSING["abfs"]


def _fs_errors() -> tuple[type[BaseException], ...]:
    """What pyarrow.fs calls raise: ``OSError`` mostly, a bare ``ArrowException`` for some Azure failures."""
    import pyarrow as pa

    return (OSError, ValueError, pa.ArrowException)


def resolve(url: str, options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(pyarrow FileSystem, path inside it)`` for a remote URL; file systems are cached per scheme and options."""
    opts = storage_options(options)
    m = _SCHEME.match(url)
    if not m:
        raise StorageError(f"not a URL: {url}")
    scheme = m["scheme"].lower()
    rest = url[m.end() :]
    key = (scheme, tuple(sorted(opts.items())), _env_key() if scheme == "s3" else rest.split("/", 1)[0])
    with _FS_LOCK:
        fs = _FS_CACHE.get(key)
    if fs is None:
        try:
            if scheme in ("s3", "s3a"):
                fs = _s3(opts)
            elif scheme in ("gs", "gcs"):
                fs = _gcs(opts)
            else:
                fs, _ = _pafs().FileSystem.from_uri(url)
        except _fs_errors() as exc:
            raise _error(url, "opening the file system", exc) from exc
        with _FS_LOCK:
            _FS_CACHE[key] = fs
    if scheme in ("s3", "s3a"):
        return fs, rest.rstrip("/")
    path = _pafs().FileSystem.from_uri(url)[1]
    return fs, path


def _env_key() -> tuple:
    """The environment an S3 file system was built from (tests and jobs may change it between calls)."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
             "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")  # fmt: skip
    return tuple(os.environ.get(n) for n in names)


def _error(url: str, what: str, exc: BaseException) -> StorageError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    m = _SCHEME.match(url)
    scheme = m["scheme"].lower() if m else ""
    if any(word in text.lower() for word in _NEEDS.get(scheme, ())):
        return StorageError(f"{url}: {what} failed: {_MISSING[scheme]} ({text[:300]})")
    missing = isinstance(exc, FileNotFoundError) or "not found" in text.lower() or "NoSuchKey" in text
    cls = ObjectNotFoundError if missing else StorageError
    return cls(f"{url}: {what} failed: {text}")


# --------------------------------------------------------------------------------------------------- calls


def stat_size(url: str, options: Mapping[str, Any] | None = None) -> int:
    """Size of the object (or local file) at ``url``; -1 when it does not exist (a dir/prefix is -1 too)."""
    if not is_remote(url):
        try:
            st = os.stat(local_path(url))
        except FileNotFoundError:
            return -1
        return st.st_size if os.path.isfile(local_path(url)) else -1
    fs, path = resolve(url, options)
    pafs = _pafs()
    try:
        info = fs.get_file_info(path)
    except _fs_errors() as exc:
        raise _error(url, "stat", exc) from exc
    return int(info.size) if info.type == pafs.FileType.File else -1


def list_tree(url: str, options: Mapping[str, Any] | None = None) -> list[FileEntry]:
    """Every object under the prefix ``url`` (recursive), or the one object when ``url`` names one.

    Raises ObjectNotFoundError when there is nothing at ``url`` (missing bucket, prefix or object).
    """
    fs, path = resolve(url, options)
    pafs = _pafs()
    base = url.rstrip("/")
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.File:
            return [FileEntry(base, int(info.size))]
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except _fs_errors() as exc:
        raise _error(url, "list", exc) from exc
    prefix = path.rstrip("/") + "/"
    out = [
        FileEntry(base + "/" + i.path[len(prefix) :], int(i.size))
        for i in infos
        if i.type == pafs.FileType.File and i.path.startswith(prefix)
    ]
    if not out and info.type == pafs.FileType.NotFound:
        raise ObjectNotFoundError(f"{url}: no such object or prefix")
    return sorted(out, key=lambda e: e.url)


def read_range(url: str, start: int = 0, end: int | None = None, options: Mapping[str, Any] | None = None) -> bytes:
    """Bytes ``[start, end)`` of one object (``end=None``: to its end); short only when the object is. An object a
    reader keeps open (:func:`kafkalog.archive.object_reads.keep_open`) is read by its GET alone, no HEAD first."""
    if not is_remote(url):
        with open(local_path(url), "rb") as f:
            if end is not None:  # the range asked for, nothing read past it
                no_readahead(f)
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start))
    kept = _kept(url, options, end)
    if kept is not None and end is not None:
        return kept.read_upto(start, end)
    fs, path = resolve(url, options)
    try:
        with fs.open_input_file(path) as f:
            stop = f.size() if end is None else min(end, f.size())
            return f.read_at(max(0, stop - start), start) if stop > start else b""
    except _fs_errors() as exc:
        raise _error(url, f"read of bytes {start}-{end}", exc) from exc


# ------------------------------------------------------------------------------ objects kept open by their readers

#: objects kept open at once (:func:`kafkalog.archive.object_reads.keep_open`), and for how long at most: a reader
#: that stops without ``release`` leaves its objects open no longer than that
_KEPT_OBJECTS = 256
_KEPT_SECONDS = 60.0
_KEPT: OrderedDict[tuple[int, str], tuple[float, _Object]] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def _kept_key(url: str, options: Mapping[str, Any] | None) -> tuple[int, str]:
    fs, path = resolve(url, options)
    return id(fs), path  # file systems are cached for good (:func:`resolve`): one id per scheme and options


def forget_kept(url: str, options: Mapping[str, Any] | None) -> None:
    """Stop keeping ``url`` open (:func:`kafkalog.archive.object_reads.keep_open`): its next reads open it again."""
    if is_remote(url):
        with _KEPT_LOCK:
            _KEPT.pop(_kept_key(url, options), None)


def _kept(url: str, options: Mapping[str, Any] | None, end: int | None) -> _Object | None:
    if end is None or not _KEPT:
        return None
    key = _kept_key(url, options)
    with _KEPT_LOCK:
        hit = _KEPT.get(key)
        if hit is None:
            return None
        if time.monotonic() - hit[0] > _KEPT_SECONDS:
            del _KEPT[key]
            return None
        return hit[1] if end <= hit[1].size else None


def fetch(
    url: str, dest: str, start: int = 0, end: int | None = None, options: Mapping[str, Any] | None = None
) -> int:
    """Copy bytes ``[start, end)`` of ``url`` into the local file ``dest`` in :data:`CHUNK` reads (remote objects:
    ranged GETs in parallel, :mod:`kafkalog.archive.ranged_reads`); return the number of bytes written. Memory stays
    bounded whatever the object's size."""
    written = 0
    if not is_remote(url):
        with open(local_path(url), "rb") as src, open(dest, "wb") as out:
            src.seek(start)
            todo = None if end is None else max(0, end - start)
            while todo is None or written < todo:
                chunk = src.read(CHUNK if todo is None else min(CHUNK, todo - written))
                if not chunk:
                    break
                out.write(chunk)
                written += len(chunk)
        return written
    return fetch_parallel(url, dest, start, end, options)


def read_range_into(url: str, start: int, dest: memoryview, options: Mapping[str, Any] | None = None) -> int:
    """Bytes ``[start, start + len(dest))`` of one object copied straight into ``dest``, no intermediate bytes
    object: a local file from a map of just that range (``mapped_range``: its pages come from the page cache in
    fault-around batches, 2-4x faster here than ``read``/``preadv`` of the same range), ``os.preadv`` where it
    cannot be mapped; a remote object through pyarrow's ``readinto``. Returns how many bytes were read, fewer only
    where the object ends first."""
    done = 0
    if not is_remote(url):
        path = local_path(url)
        with mapped_range(path, start, start + len(dest)) as mm:
            if mm is not None:
                done = max(0, min(len(dest), len(mm) - start))
                with memoryview(mm) as whole, whole[start : start + done] as part:
                    dest[:done] = part
                return done
        with open(path, "rb", buffering=0) as f:
            no_readahead(f)
            while done < len(dest):
                n = os.preadv(f.fileno(), [dest[done:]], start + done)
                if n <= 0:
                    break
                done += n
        return done
    kept = _kept(url, options, start + len(dest))
    if kept is not None:  # kept open by its reader: a GET alone, no HEAD first (one more copy, one round trip less)
        data = kept.read_upto(start, start + len(dest))
        dest[: len(data)] = data
        return len(data)
    fs, path = resolve(url, options)
    try:
        with fs.open_input_file(path) as f:
            f.seek(start)
            while done < len(dest):
                n = f.readinto(dest[done:])
                if n <= 0:
                    break
                done += n
    except _fs_errors() as exc:
        raise _error(url, f"read of bytes {start}-{start + len(dest)}", exc) from exc
    return done


# ---------------------------------------------------------------- ranged reads in parallel (kafkalog.archive.ranged_reads)


class _Object:
    """One object opened once (its size known, so no further HEAD), read at any offset from any thread."""

    def __init__(self, url: str, options: Mapping[str, Any] | None) -> None:
        self.url = url
        self.local = None if is_remote(url) else local_path(url)
        if self.local is not None:
            self.size = os.stat(self.local).st_size
            self._file = None
            return
        fs, path = resolve(url, options)
        try:
            self._file = fs.open_input_file(path)
            self.size = self._file.size()
        except _fs_errors() as exc:
            raise _error(url, "open", exc) from exc

    def read_upto(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, short where the object (as opened) ends."""
        stop = min(end, self.size)
        if stop <= start:
            return b""
        if self.local is not None:
            with open(self.local, "rb") as f:
                return os.pread(f.fileno(), stop - start, start)
        try:
            return self._file.read_at(stop - start, start)
        except _fs_errors() as exc:
            raise _error(self.url, f"read of bytes {start}-{end}", exc) from exc

    def read(self, start: int, end: int) -> bytes:
        if self.local is not None:
            with open(self.local, "rb") as f:
                data = os.pread(f.fileno(), end - start, start)
        else:
            try:
                data = self._file.read_at(end - start, start)
            except _fs_errors() as exc:
                raise _error(self.url, f"read of bytes {start}-{end}", exc) from exc
        if len(data) != end - start:
            raise StorageError(f"{self.url}: object ended at {start + len(data)}, expected {end} bytes")
        return data



def iter_object_ranges(url: str, start: int = 0, end: int | None = None, options: Mapping[str, Any] | None = None,
                       *, parallelism: int | None = None, part: int = PART_BYTES) -> Iterator[bytes]:
    """Bytes ``[start, end)`` of one object in consecutive parts of ``part`` bytes, fetched in parallel."""
    obj = _Object(url, options)
    stop = obj.size if end is None else min(end, obj.size)
    ranges = split_range(max(start, 0), stop, part)
    yield from iter_parallel(((lambda s=s, e=e: obj.read(s, e)) for s, e in ranges), parallelism)


def open_object_ranges(url: str, options: Mapping[str, Any] | None = None, *, parallelism: int | None = None,
                       part: int = PART_BYTES, end: int | None = None) -> tuple[int, Iterator[bytes]]:
    """One object's bytes ``[0, end)`` (``end=None``: the whole object) as ``(size, its parts)``: the size from
    opening it (no listing trusted; at most ``end``), the parts of ``part`` bytes fetched in parallel
    (:func:`iter_object_ranges`) when iterated."""
    obj = _Object(url, options)
    size = obj.size if end is None else max(0, min(end, obj.size))
    ranges = split_range(0, size, part)
    return size, iter_parallel(((lambda s=s, e=e: obj.read(s, e)) for s, e in ranges), parallelism)


def fetch_parallel(url: str, dest: str, start: int = 0, end: int | None = None,
                   options: Mapping[str, Any] | None = None, *, parallelism: int | None = None) -> int:
    """Copy bytes ``[start, end)`` of ``url`` into the local file ``dest``; the parts arrive in parallel and are
    written in order. Returns the bytes written."""
    written = 0
    pieces = iter_object_ranges(url, start, end, options, parallelism=parallelism)
    first = next(pieces, None)  # opens the object: a missing one raises before ``dest`` exists
    with open(dest, "wb") as out:
        for piece in itertools.chain([] if first is None else [first], pieces):
            out.write(piece)
            written += len(piece)
    return written


def write_bytes(url: str, data: bytes, options: Mapping[str, Any] | None = None) -> None:
    """Write one whole object (reports, summaries). Local paths get the atomic temp-fsync-rename write."""
    if not is_remote(url):
        os.makedirs(os.path.dirname(os.path.abspath(local_path(url))), exist_ok=True)
        atomic_write(local_path(url), data)
        return
    forget_kept(url, options)
    fs, path = resolve(url, options)
    try:
        with fs.open_output_stream(path) as out:
            out.write(data)
    except _fs_errors() as exc:
        raise _error(url, "write", exc) from exc


# ------------------------------------------------------------------------------------------------ staging


@contextlib.contextmanager
def scratch_dir(prefix: str = "kafkalog-") -> Iterator[str]:
    """A private temporary dir, removed afterwards (under ``SPARK_LOCAL_DIRS`` on an executor when set)."""
    parent = (os.environ.get("SPARK_LOCAL_DIRS") or "").split(",")[0] or None
    path = tempfile.mkdtemp(prefix=prefix, dir=parent if parent and os.path.isdir(parent) else None)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def mirror_path(url: str, root: str, base: str) -> str:
    """Where ``url``'s object goes under the local dir ``root``: its path relative to ``base`` (a prefix of it),
    so checks that look at a file's parent dirs (log dir, partition dir) see the same names as remotely."""
    rel = url[len(base) :] if url.startswith(base) else basename(url)
    parts = [p for p in rel.split("/") if p not in ("", ".", "..")]
    return os.path.join(root, *parts)


def stage_files(urls: list[str], root: str, base: str, options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Copy each object in ``urls`` under ``root`` (see :func:`mirror_path`); objects that do not exist are
    skipped. Returns {url: local path} of the copies."""
    out: dict[str, str] = {}
    for url in urls:
        dest = mirror_path(url, root, base)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        try:
            fetch(url, dest, options=options)
        except ObjectNotFoundError:
            continue
        out[url] = dest
    return out


def stage_segment(item: Any, root: str, options: Mapping[str, Any] | None = None, *, with_log: bool = True) -> Any:
    """A local copy of a remote segment under ``root``: its ``.log`` (when ``with_log``), the sibling files the
    listing found, and the log dir's clean-shutdown marker; returns the item re-pointed at the copy.

    ``item`` is a :class:`kafkalog.archive.discovery.SegmentItem` (duck-typed: this module sits below discovery).
    """
    suffixes = [".index", ".timeindex", ".txnindex"]
    sizes = [item.index_size, item.timeindex_size, item.txnindex_size]
    urls = [item.sibling(s) for s, size in zip(suffixes, sizes, strict=True) if size >= 0]
    urls += [item.sibling(s) for s in item.extra_files]
    if with_log:
        urls.insert(0, item.path)
    base = dirname(dirname(item.partition_dir))
    local = stage_files(urls, root, base, options)
    local_log = mirror_path(item.path, root, base)
    os.makedirs(os.path.dirname(local_log), exist_ok=True)
    if with_log and item.path not in local:
        raise ObjectNotFoundError(f"{item.path}: no such object")
    stage_files([join(dirname(item.partition_dir), ".kafka_cleanshutdown")], root, base, options)
    return dataclasses.replace(item, path=local_log, partition_dir=os.path.dirname(local_log))

"""The one funnel from an ``OSError`` to "this log dir is offline".

Kafka routes every I/O failure on a log dir through ``LogDirFailureChannel`` so that, however many threads trip
over the same broken disk at once, the dir is taken offline exactly once and by one handler. kafkalog does the
same: code that catches an ``OSError`` on a dir calls :meth:`LogDirFailureChannel.report`, which asks
:func:`kafkalog.io.oserrors.classify` what the error is. A process limit (EMFILE, ENFILE, ENOMEM ...) is not a
failed disk: ``report`` hands back a :class:`~kafkalog.errors.ResourceExhaustedError` for the caller to raise (or
to log, for periodic work) and the dir stays online. Anything else queues the dir; the
:class:`~kafkalog.manager.log_manager.LogManager` drains the queue and does the offline handling. Nothing else
decides that a dir is offline.
"""

from __future__ import annotations

import logging
import queue
import threading

from kafkalog.errors import ResourceExhaustedError, io_cause
from kafkalog.io.oserrors import is_resource_exhaustion, resource_error

__all__ = ["LogDirFailureChannel"]

_log = logging.getLogger(__name__)


class LogDirFailureChannel:
    """Thread-safe set of failed dirs plus a queue holding each failed dir once, in failure order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._causes: dict[str, BaseException | None] = {}
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()

    def report(self, log_dir: str, exc: BaseException, message: str = "") -> ResourceExhaustedError | None:
        """The funnel every ``except OSError`` of the manager, the replica mover, a managed Log and the sanity
        checker calls. A process limit returns the typed, retriable error (nothing is queued, the dir stays
        online); any other I/O failure queues ``log_dir`` to go offline and returns None."""
        if is_resource_exhaustion(exc):
            _log.warning("log dir %s stays online: %s%s", log_dir, f"{message}: " if message else "", exc)
            return resource_error(exc, message)
        self.maybe_add_offline_dir(log_dir, io_cause(exc) or exc, message)
        return None

    def maybe_add_offline_dir(self, log_dir: str, cause: BaseException | None = None, message: str = "") -> bool:
        """Record that ``log_dir`` failed; True only for the first report of that dir (which gets queued).

        Later reports of the same dir are logged and dropped, so the handler runs once per dir.
        """
        with self._lock:
            first = log_dir not in self._causes
            if first:
                self._causes[log_dir] = cause
                self._queue.put(log_dir)
        if first:
            _log.error("log dir %s failed%s: %r", log_dir, f" ({message})" if message else "", cause)
        else:
            _log.debug("log dir %s already offline; further error %r", log_dir, cause)
        return first

    # The architecture page names the funnel ``mark_offline``; both spellings do the same thing.
    mark_offline = maybe_add_offline_dir

    def has_offline_dir(self, log_dir: str) -> bool:
        with self._lock:
            return log_dir in self._causes

    def cause(self, log_dir: str) -> BaseException | None:
        """The first error reported for ``log_dir`` (None if it never failed or failed without one)."""
        with self._lock:
            return self._causes.get(log_dir)

    @property
    def offline_dirs(self) -> list[str]:
        with self._lock:
            return list(self._causes)

    def take_next(self, timeout: float | None = None) -> str | None:
        """Block up to ``timeout`` seconds for the next failed dir not yet handed out (None on timeout)."""
        try:
            return self._queue.get(timeout=timeout) if timeout != 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def drain(self) -> list[str]:
        """Every failed dir not yet handed out; each dir is handed out exactly once over the channel's life."""
        out: list[str] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

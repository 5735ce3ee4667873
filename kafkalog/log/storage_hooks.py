"""StorageHooks and the ``storage_op`` decorator: how a Log owned by a LogManager routes an I/O error of any
public operation through the manager's failure handling (Kafka's ``UnifiedLog`` holding the
``LogDirFailureChannel``). Apart from ``log.py`` so the Log's modules (append, retention) decorate their
operations without importing the Log.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from kafkalog.errors import KafkaStorageError, io_cause


class StorageHooks(Protocol):
    """What a LogManager plugs into each Log it owns, so direct calls on the Log follow the manager's rules."""

    def before_read(self, log: Any, offset: int) -> None:
        """Runs before a read at ``offset`` (outside the Log's lock): check pending segments first (KIP-263)."""

    def on_io_error(self, log: Any, cause: OSError, what: str) -> BaseException:
        """The exception to raise for ``cause`` (after taking the log's dir offline, or ``cause`` itself when the
        caller's own failure handling must see the raw error)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def storage_op(what: str, *, reads_at: bool = False) -> Callable[[_F], _F]:
    """Route an OSError of a public operation through the Log's hooks (when it has some).

    Only the outermost operation of a thread reports: a public method called by another one while the Log's lock
    is held lets the error travel up to the outer call, which reports it once the lock is released (offline
    handling waits for partition locks, so it must never run under one).
    """

    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def op(self: Any, *args: Any, **kwargs: Any) -> Any:
            hooks = self._hooks
            if hooks is None or self._lock.held_by_current_thread():
                return fn(self, *args, **kwargs)
            try:
                if reads_at:
                    hooks.before_read(self, args[0] if args else kwargs["offset"])
                return fn(self, *args, **kwargs)
            except (OSError, KafkaStorageError) as exc:
                cause = io_cause(exc)
                if cause is None:
                    raise
                err = hooks.on_io_error(self, cause, what)
                if err is cause:
                    raise
                raise err from cause

        return op  # type: ignore[return-value]

    return deco

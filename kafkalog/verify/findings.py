"""The one result type of verification (:class:`Finding`), the rule that turns an exception into a verdict, and
the tally that turns findings into counts and an exit code.

Every check of :mod:`kafkalog.verify` (segment, partition dir, log dir, loose file) answers with a ``Finding``; the
CLI renders them as text or JSON and the Spark job's rows carry the same statuses, so the tools cannot disagree on
what is corrupt. The exit codes are api.md's: 0 ok, 1 corruption found, 2 usage or I/O error.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TextIO

from .. import errors as E

__all__ = [
    "EXIT_CORRUPT",
    "EXIT_OK",
    "EXIT_USAGE",
    "STATUS_EXIT_CODES",
    "Finding",
    "Tally",
    "describe_error",
    "error_finding",
    "error_line",
    "error_object",
    "error_path",
    "print_error",
    "one_line",
    "row_field",
    "row_value",
]

EXIT_OK = 0
EXIT_CORRUPT = 1
EXIT_USAGE = 2

#: exit code of each finding status: a warning (an index Kafka rebuilds) does not fail a check.
STATUS_EXIT_CODES = {"ok": EXIT_OK, "warning": EXIT_OK, "corrupt": EXIT_CORRUPT, "error": EXIT_USAGE}

_USAGE_ERRORS = (
    E.ConfigError,
    E.InvalidTopicError,
    E.InvalidPartitionDirError,
    E.InvalidArgumentError,
    E.InvalidArgumentTypeError,
    E.IcebergCommitError,  # other writers kept the table busy: nothing about the archive's bytes
)


@dataclass
class Finding:
    """One checked thing (``kind``: segment, partition, logdir, file) and its verdict.

    ``status`` is ``ok``, ``warning`` (nothing lost: e.g. an index Kafka rebuilds at load), ``corrupt`` (bad
    bytes or contradicting metadata) or ``error`` (could not be checked). ``exception`` is set when the check
    itself failed with an error that is not corruption (an ``OSError``): the renderer prints it as an error line,
    and the thing is left out of any check above it. ``checked_bytes`` counts the segment bytes read.
    """

    kind: str
    path: str
    status: str
    summary: str = ""
    problems: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    checked_bytes: int = 0

    @property
    def exit_code(self) -> int:
        return STATUS_EXIT_CODES[self.status]


def row_value(r: Any, name: str) -> Any:
    """A field of a result row: a dict, a report or a pyspark Row alike."""
    return r[name] if isinstance(r, dict) else getattr(r, name)


def row_field(r: Any, name: str) -> Any:
    """:func:`row_value`, or None when the row does not carry that field (a slimmer selection of columns)."""
    return r.get(name) if isinstance(r, dict) else getattr(r, name, None)


def one_line(exc: BaseException) -> str:
    """The exception's message on one line (its class name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def _kind(exc: BaseException) -> str:
    """``CorruptCheckpointError`` -> ``corrupt checkpoint``: the words an operator reads before the message."""
    name = type(exc).__name__
    words = []
    for ch in name.removesuffix("Error"):
        if ch.isupper() and words:
            words.append(" ")
        words.append(ch.lower())
    return "".join(words) or "error"


def _os_error_line(exc: OSError) -> str:
    reason = exc.strerror or one_line(exc)
    if exc.filename is not None:
        target = os.fsdecode(exc.filename)
        if exc.filename2 is not None:
            target += f" -> {os.fsdecode(exc.filename2)}"
        return f"{target}: {reason}"
    return reason


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(status, one-line message) of an exception met while checking: the single rule for what is corruption.

    ``corrupt`` for data that failed a check (any ``KafkaLogError`` that is not about storage, configuration or
    arguments), ``error`` for what kept the check from running (I/O, usage, bad input, memory), ``internal``
    for anything else (a bug: the CLI offers ``--debug``).
    """
    if isinstance(exc, E.LogDirLockedError):
        return "error", one_line(exc)  # "PATH/.lock: the log dir is in use: ..."
    if isinstance(exc, E.KafkaStorageError):
        return "error", f"storage error: {one_line(exc)}"
    if isinstance(exc, E.ResourceExhaustedError):  # a process limit, not bad data: retry with more descriptors
        return "error", f"resources exhausted: {one_line(exc)}"
    if isinstance(exc, E.LogMovedError):  # a healthy partition that a replica move placed elsewhere
        return "error", f"log moved: {one_line(exc)}"
    if isinstance(exc, _USAGE_ERRORS):
        return "error", one_line(exc)
    if isinstance(exc, E.KafkaLogError):
        return "corrupt", f"{_kind(exc)}: {one_line(exc)}"
    if isinstance(exc, OSError):
        return "error", _os_error_line(exc)
    if isinstance(exc, (UnicodeDecodeError, ValueError)):
        return "error", f"invalid input: {one_line(exc)}"
    if isinstance(exc, MemoryError):
        return "error", "out of memory"
    return "internal", f"internal error ({type(exc).__name__}): {one_line(exc)}"


#: how every error line starts (``kafkalog: error: PATH: reason``), in the CLI and in the Spark job alike
ERROR_PREFIX = "kafkalog: error: "


def error_path(exc: BaseException) -> str | None:
    """The path an error is about, when it carries one (an ``OSError``'s filename, a typed error's ``path``)."""
    path = getattr(exc, "filename", None) if isinstance(exc, OSError) else getattr(exc, "path", None)
    if path is None:
        return None
    return os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)


def error_line(message: str) -> str:
    """The one line an error is printed as: ``kafkalog: error: PATH: reason``."""
    return ERROR_PREFIX + message


def error_object(message: str, code: int, path: str | None) -> dict[str, Any]:
    """The JSON form of an error, the same for every command: ``{"type": "error", "message", "path",
    "exitCode"}``."""
    return {"type": "error", "message": message, "path": path, "exitCode": code}


def print_error(exc: BaseException, *, json_mode: bool = False, stdout: TextIO | None = None,
                stderr: TextIO | None = None) -> int:
    """Print ``exc`` as its one line on stderr (and its JSON object on stdout under ``json_mode``); return its exit
    code (1 for corruption, 2 otherwise). For library entry points that end a run themselves (the Spark job)."""
    status, message = describe_error(exc)
    code = EXIT_CORRUPT if status == "corrupt" else EXIT_USAGE
    if json_mode:
        out = stdout or sys.stdout
        out.write(json.dumps(error_object(message, code, error_path(exc))) + "\n")
        out.flush()
    print(error_line(message), file=stderr or sys.stderr)
    return code


def error_finding(kind: str, path: str, exc: BaseException) -> Finding:
    """The finding for an exception met while checking ``path``: corruption is a corrupt finding with the message
    as its problem; anything else is an ``error`` finding that keeps the exception for the renderer."""
    status, message = describe_error(exc)
    if status == "corrupt":
        return Finding(kind, path, "corrupt", "", [message])
    return Finding(kind, path, "error", "", [message], exception=exc)


@dataclass
class Tally:
    """Counts by kind and status, bytes read, what could not be checked and the exit code of a run of findings
    (``add`` each one). Nothing added is not a pass: :attr:`exit_code` is 2 then, as for a path holding nothing."""

    counts: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    worst: int = EXIT_OK
    checked_bytes: int = 0
    #: the paths of ``error`` findings: what was not (fully) checked, in the order met
    not_checked: list[str] = field(default_factory=list)

    def add(self, finding: Finding) -> None:
        self.counts[finding.kind][finding.status] += 1
        self.checked_bytes += finding.checked_bytes
        self.worst = max(self.worst, finding.exit_code)
        if finding.status == "error":
            self.not_checked.append(finding.path)

    @property
    def checked(self) -> int:
        """How many things were checked (found ok, warning or corrupt)."""
        return sum(n for by_status in self.counts.values() for s, n in by_status.items() if s != "error")

    @property
    def exit_code(self) -> int:
        return self.worst if self.checked or self.worst else EXIT_USAGE

    def plain_counts(self) -> dict[str, dict[str, int]]:
        return {kind: dict(by_status) for kind, by_status in self.counts.items()}

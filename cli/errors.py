"""Exit codes and error rendering of every command: the one place an exception becomes a line and a code.

Exit codes (api.md): 0 ok, 1 corruption found or a check failed, 2 usage or I/O error. What counts as corruption
is the library's rule (:func:`kafkalog.verify.describe_error`), so ``kafkalog verify`` and a failing command agree;
this module adds the CLI's own :class:`CommandError` and the ``--debug`` traceback.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from typing import Any

import click

from kafkalog.verify.findings import (
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_USAGE,
    describe_error,
    error_line,
    error_object,
    error_path,
)

from .output import Output, Simple

__all__ = ["EXIT_CORRUPT", "EXIT_OK", "EXIT_USAGE", "CliState", "CommandError", "classify", "error_path",
           "report_error"]  # fmt: skip


class CommandError(Exception):
    """An error the CLI itself detects (bad path kind, refused operation); carries its exit code and, when it is
    about one, the path (the ``path`` of the JSON error object)."""

    def __init__(self, message: str, code: int = EXIT_USAGE, *, path: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path


@dataclass
class CliState:
    """Options of the group, visible to every command through ``ctx.obj``; ``output`` is the running command's
    renderer (set by :func:`~kafkalog_cli.output.make_output`), so an error that ends the command is a JSON object
    under ``--json`` too."""

    debug: bool = False
    quiet: bool = False
    output: Any = None


def classify(exc: BaseException) -> tuple[int, str]:
    """Map an exception to (exit code, one-line message). The single source of truth for error exit codes."""
    if isinstance(exc, CommandError):
        return exc.code, str(exc)
    status, message = describe_error(exc)
    if status == "corrupt":
        return EXIT_CORRUPT, message
    if status == "internal":
        return EXIT_USAGE, f"{message} (rerun with --debug for details)"
    return EXIT_USAGE, message


def report_error(exc: BaseException, *, debug: bool = False, out: Output | None = None,
                 path: str | None = None) -> int:
    """Print the one-line form of ``exc`` (``kafkalog: error: PATH: reason``; the traceback too under --debug),
    and under ``--json`` (``out`` a JSON output) also an ``{"type": "error", "message", "path", "exitCode"}``
    object on stdout; return the exit code. The one helper every command's errors go through.

    Commands that keep going after a per-file failure (``dump a b c``) call this so their lines and codes match
    what the group would have printed for a fatal error. ``path``: the path checked, when the error does not say.
    """
    code, message = classify(exc)
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    if out is not None:
        if out.is_json:
            out.stdout.flush()
            out.emit(Simple(message, error_object(message, code, error_path(exc) or path), type="error"))
            out.stdout.flush()
        message = out.shown(message)
    click.echo(error_line(message), err=True)
    return code

"""Exit codes and error rendering of every command: the one place an exception becomes a line and a code.

Exit codes (api.md): 0 ok, 1 corruption found or a check failed, 2 usage or I/O error. What counts as corruption
is the library's rule (:func:`kafkalog.verify.describe_error`), so ``kafkalog verify`` and a failing command agree;
this module adds the CLI's own :class:`CommandError` and the ``--debug`` traceback.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass

import click

from kafkalog.verify.findings import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, describe_error

__all__ = ["EXIT_CORRUPT", "EXIT_OK", "EXIT_USAGE", "CliState", "CommandError", "classify", "report_error"]


class CommandError(Exception):
    """An error the CLI itself detects (bad path kind, refused operation); carries its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class CliState:
    """Options of the group, visible to every command through ``ctx.obj``."""

    debug: bool = False
    quiet: bool = False


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


def report_error(exc: BaseException, *, debug: bool = False) -> int:
    """Print the one-line form of ``exc`` (with the traceback under --debug) and return its exit code.

    Commands that keep going after a per-file failure (``dump a b c``) call this so their lines and codes match
    what the group would have printed for a fatal error.
    """
    code, message = classify(exc)
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    click.echo(f"kafkalog: error: {message}", err=True)
    return code

"""Entry point of the ``kafkalog`` console script: the click group and the one place errors become exit codes.

Exit codes (api.md): 0 ok, 1 corruption found or a check failed, 2 usage or I/O error. Every command lets library
exceptions propagate; :class:`KafkalogGroup` turns them into ONE line on stderr and the right code, so an operator
never sees a traceback unless they ask for it with ``--debug``.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass

import click

EXIT_OK = 0
EXIT_CORRUPT = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """An error the CLI itself detects (bad path kind, refused operation); carries its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def classify(exc: BaseException) -> tuple[int, str]:
    """Map an exception to (exit code, one-line message). The single source of truth for error exit codes."""
    from kafkalog import errors as E

    if isinstance(exc, CommandError):
        return exc.code, str(exc)
    if isinstance(exc, E.LogDirLockedError):
        return EXIT_USAGE, f"log dir is in use: {exc}"
    if isinstance(exc, E.KafkaStorageError):
        return EXIT_USAGE, f"storage error: {_one_line(exc)}"
    if isinstance(exc, E.ResourceExhaustedError):  # a process limit, not bad data: retry with more descriptors
        return EXIT_USAGE, f"resources exhausted: {_one_line(exc)}"
    if isinstance(exc, (E.ConfigError, E.InvalidTopicError, E.InvalidPartitionDirError, E.InvalidArgumentError,
                        E.InvalidArgumentTypeError)):
        return EXIT_USAGE, _one_line(exc)
    if isinstance(exc, E.KafkaLogError):
        # Corrupt records/indexes/snapshots/checkpoints, inconsistent metadata: the data failed a check.
        return EXIT_CORRUPT, f"{_kind(exc)}: {_one_line(exc)}"
    if isinstance(exc, OSError):
        return EXIT_USAGE, _os_error_line(exc)
    if isinstance(exc, (UnicodeDecodeError, ValueError)):
        return EXIT_USAGE, f"invalid input: {_one_line(exc)}"
    if isinstance(exc, MemoryError):
        return EXIT_USAGE, "out of memory"
    return EXIT_USAGE, f"internal error ({type(exc).__name__}): {_one_line(exc)} (rerun with --debug for details)"


def _kind(exc: BaseException) -> str:
    name = type(exc).__name__
    words = []
    for ch in name.removesuffix("Error"):
        if ch.isupper() and words:
            words.append(" ")
        words.append(ch.lower())
    return "".join(words) or "error"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


def _os_error_line(exc: OSError) -> str:
    reason = exc.strerror or _one_line(exc)
    if exc.filename is not None:
        target = os.fsdecode(exc.filename)
        if exc.filename2 is not None:
            target += f" -> {os.fsdecode(exc.filename2)}"
        return f"{target}: {reason}"
    return reason


@dataclass
class CliState:
    """Options of the group, visible to every command through ``ctx.obj``."""

    debug: bool = False
    quiet: bool = False


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


class KafkalogGroup(click.Group):
    """A click group that converts any exception escaping a command into one stderr line and an exit code."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # `kafkalog dump ... | head`: the reader left; stop quietly and keep Python from complaining at exit.
            _silence_stdout()
            ctx.exit(EXIT_OK)
        except KeyboardInterrupt:
            click.echo("kafkalog: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - this is the one funnel for all errors
            state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
            ctx.exit(report_error(exc, debug=state.debug))


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.group(cls=KafkalogGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or notes; only results and errors.")
@click.version_option(package_name="kafkalog", prog_name="kafkalog")
@click.pass_context
def main(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """Inspect, dump, verify and recover Apache Kafka log dirs offline.

    Exit codes: 0 ok, 1 corruption found or a check failed, 2 usage or I/O error.
    """
    ctx.obj = CliState(debug=debug, quiet=quiet)
    # The library logs warnings (a dir going offline, a checkpoint reset) that the commands already report in
    # their own words; show the library's log only under --debug.
    import logging

    if debug:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    else:
        # restored when the command ends, so an in-process caller (tests, a notebook) keeps its own logging
        library_logger = logging.getLogger("kafkalog")
        previous_level = library_logger.level
        library_logger.setLevel(logging.ERROR)
        ctx.call_on_close(lambda: library_logger.setLevel(previous_level))


def _register() -> None:
    """Attach the subcommands; each module imports the library lazily so `--help` works on a partial install."""
    from . import checkpoints, demo, dirs, dump, recover, spark_cmd, txn, verify

    main.add_command(dump.dump)
    main.add_command(verify.verify)
    main.add_command(dirs.dirs)
    main.add_command(recover.recover)
    main.add_command(checkpoints.checkpoints)
    main.add_command(txn.txn)
    main.add_command(demo.demo)
    main.add_command(spark_cmd.spark)


_register()

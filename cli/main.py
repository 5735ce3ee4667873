"""Entry point of the ``kafkalog`` console script: the click group and its subcommands.

Exit codes (api.md): 0 ok, 1 corruption found or a check failed, 2 usage or I/O error. Every command lets library
exceptions propagate; :class:`KafkalogGroup` turns them into ONE line on stderr and the right code (rendered by
:mod:`.errors`, which the subcommands import, so no subcommand imports this module), and an operator never sees a
traceback unless they ask for it with ``--debug``.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import click

from kafkalog.verify.findings import error_object

from . import checkpoints, clean, demo, dirs, doctor, dump, iceberg_cmd, recover, spark_cmd, tiered, txn, verify
from .errors import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, CliState, CommandError, classify, report_error
from .output import JsonOutput

__all__ = ["EXIT_CORRUPT", "EXIT_OK", "EXIT_USAGE", "CliState", "CommandError", "KafkalogGroup", "classify", "main",
           "report_error"]  # fmt: skip


class KafkalogGroup(click.Group):
    """A click group that converts any exception escaping a command into one stderr line and an exit code."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: object) -> click.Context:
        json_mode = "--json" in args
        try:
            ctx = super().make_context(info_name, args, parent, **extra)  # type: ignore[arg-type]
        except click.UsageError as exc:  # the group's own options: no context to remember --json in
            if json_mode:
                _json_usage_error(exc)
            raise
        ctx.meta[_JSON_ASKED] = json_mode
        return ctx

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:
            # a missing path option is click's usage error (its message is built at show time, empty here)
            if isinstance(exc, click.MissingParameter) or not isinstance(getattr(exc.param, "type", None), click.Path):
                if ctx.meta.get(_JSON_ASKED):
                    _json_usage_error(exc)
                raise
            # a path argument click refused (a dir where a file is wanted): one line naming it, as every error
            out = _state(ctx).output or (JsonOutput() if ctx.meta.get(_JSON_ASKED) else None)
            ctx.exit(report_error(CommandError(_path_error(exc)), out=out))
        except click.UsageError as exc:  # click prints it with the usage; under --json the error object too
            if ctx.meta.get(_JSON_ASKED):
                _json_usage_error(exc)
            raise
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
            state = _state(ctx)
            ctx.exit(report_error(exc, debug=state.debug, out=state.output))


#: ``ctx.meta`` key: ``--json`` was among the command line's arguments
_JSON_ASKED = "kafkalog.json"


def _json_usage_error(exc: click.UsageError) -> None:
    """Under ``--json`` a usage error is also the JSON error object on stdout, as every other error is (click
    prints its usage text on stderr)."""
    click.echo(json.dumps(error_object(exc.format_message(), exc.exit_code, None)))


def _state(ctx: click.Context) -> CliState:
    return ctx.obj if isinstance(ctx.obj, CliState) else CliState()


def _path_error(exc: click.BadParameter) -> str:
    """``PATH: reason`` from click's message for a refused path (``File 'x' is a directory.``)."""
    message = exc.message.rstrip(".")
    for quote in ("'", '"'):
        first, _, rest = message.partition(quote)
        path, sep, reason = rest.partition(quote)
        if sep and first.strip() in ("File", "Directory", "Path"):
            return f"{path}: {reason.strip()}"
    return message


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


@click.group(cls=KafkalogGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or notes; only results and errors.")
@doctor.version_option
@click.pass_context
def main(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """Inspect, dump, verify and recover Apache Kafka log dirs offline.

    Exit codes: 0 ok, 1 corruption found or a check failed, 2 usage or I/O error.
    """
    ctx.obj = CliState(debug=debug, quiet=quiet)
    # The library logs warnings (a dir going offline, a checkpoint reset) that the commands already report in
    # their own words; show the library's log only under --debug.
    if debug:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    else:
        # restored when the command ends, so an in-process caller (tests, a notebook) keeps its own logging
        library_logger = logging.getLogger("kafkalog")
        previous_level = library_logger.level
        library_logger.setLevel(logging.ERROR)
        ctx.call_on_close(lambda: library_logger.setLevel(previous_level))


for _command in (dump.dump, verify.verify, dirs.dirs, recover.recover, clean.clean, checkpoints.checkpoints, txn.txn,
                 demo.demo, spark_cmd.spark, iceberg_cmd.iceberg, doctor.doctor, tiered.tiered):
    main.add_command(_command)

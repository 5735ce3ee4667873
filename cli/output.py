"""Rendering of command results: one interface, two implementations (Kafka-style text lines, JSON lines).

Commands build small :class:`Event` objects and hand them to an :class:`Output`; they never ``print``. That keeps
the text shapes (which mirror Kafka's own tools so grep scripts keep working) and the JSON field names (fixed by
api.md) in one place per event, and lets ``--json`` switch every command at once (pyiceberg's cli/output.py
pattern). Text goes to stdout, problems to stderr (as Kafka's DumpLogSegments does); in JSON mode everything is an
object on stdout so a script reads one stream.
"""

from __future__ import annotations

import contextlib
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

import click

__all__ = [
    "Event",
    "Line",
    "JsonOutput",
    "Output",
    "Progress",
    "Simple",
    "TextOutput",
    "make_output",
]


class Event(ABC):
    """One unit of output. ``text()`` gives the line(s) a human sees; ``to_json()`` the object a script parses."""

    #: The ``"type"`` field of the JSON object.
    type: ClassVar[str] = "event"
    #: Problems (corruption reports, mismatches) go to stderr in text mode, as Kafka prints them.
    is_problem: ClassVar[bool] = False

    @abstractmethod
    def text(self) -> str | None:
        """The text line(s) without the trailing newline; None prints nothing in text mode."""

    @abstractmethod
    def fields(self) -> dict[str, Any]:
        """The JSON fields (without ``type``)."""

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.fields()}


@dataclass
class Line(Event):
    """A free-form message; its JSON form is ``{"type": kind, "message": ...}`` plus any extra fields."""

    message: str
    kind: str = "message"
    extra: dict[str, Any] = field(default_factory=dict)
    problem: bool = False

    def text(self) -> str | None:
        return self.message

    def fields(self) -> dict[str, Any]:
        return {"message": self.message, **self.extra}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, **self.fields()}


@dataclass(slots=True)
class Simple(Event):
    """A result line with a fixed text and JSON shape (index entries, checkpoint entries, snapshot entries...)."""

    line: str
    data: dict[str, Any]
    type: str = "entry"  # type: ignore[misc]

    def text(self) -> str:
        return self.line

    def fields(self) -> dict[str, Any]:
        return self.data

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}


class Progress:
    """A progress handle; the no-op base is used whenever a bar would be noise (pipes, --quiet, --json)."""

    def advance(self, amount: float = 1) -> None:  # noqa: B027 - deliberately a no-op
        """Move the bar forward."""

    def update(self, *, total: float | None = None, description: str | None = None) -> None:  # noqa: B027
        """Change the bar's total or label."""


class _RichProgress(Progress):
    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        kwargs: dict[str, Any] = {}
        if total is not None:
            kwargs["total"] = total
        if description is not None:
            kwargs["description"] = description
        self._progress.update(self._task, **kwargs)


class Output(ABC):
    """Where commands send events, notes and progress."""

    def __init__(self, *, quiet: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.quiet = quiet
        self._stdout = stdout
        self._stderr = stderr
        self._shown_as: dict[str, str] = {}

    def show_as(self, names: dict[str, str]) -> None:
        """Print ``names``' values where their keys stand: a remote partition's files are named under a local
        scratch dir (``kafkalog.verify.remote.remote_plan``, ``cli/dump_remote.py``), a ``file:`` URL read as a
        path, but the operator asked about the URL and must see it."""
        # longest first, so a copy inside another copy's tree is named by its own URL
        self._shown_as = dict(sorted(((k, v) for k, v in names.items() if k != v), key=lambda kv: -len(kv[0])))

    def shown(self, text: str) -> str:
        """``text`` with scratch paths replaced by the URLs they stand for (see :meth:`show_as`)."""
        for local, url in self._shown_as.items():
            text = text.replace(local, url)
        return text

    @property
    def stdout(self) -> TextIO:
        # Looked up late so click's CliRunner (which swaps sys.stdout) captures everything.
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    @property
    @abstractmethod
    def is_json(self) -> bool:
        """True when every event is rendered as a JSON object."""

    @abstractmethod
    def emit(self, event: Event) -> None:
        """Render one event."""

    def emit_all(self, events: Any) -> None:
        for event in events:
            self.emit(event)

    def note(self, message: str) -> None:
        """A human-only remark on stderr (never in JSON, never with --quiet)."""
        if not self.quiet:
            print(self.shown(message), file=self.stderr)

    @contextlib.contextmanager
    def progress(self, description: str, total: float | None = None) -> Iterator[Progress]:
        """A rich progress bar on stderr when stderr is a terminal; silent otherwise."""
        if self.quiet or not _isatty(self.stderr):
            yield Progress()
            return
        from rich.console import Console
        from rich.progress import BarColumn, TaskProgressColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        console = Console(file=self.stderr)
        columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
        # stdout is taken over only when it is this terminal too: redirected output (`dump DIR > out.txt`) must
        # reach its file, not the bar's console
        with RichProgress(
            *columns, console=console, transient=True, redirect_stdout=_isatty(self.stdout)
        ) as bar:
            task = bar.add_task(description, total=total)
            yield _RichProgress(bar, task)


class TextOutput(Output):
    """Kafka-style text lines: results on stdout, problems on stderr."""

    @property
    def is_json(self) -> bool:
        return False

    def emit(self, event: Event) -> None:
        text = event.text()
        if text is None:
            return
        text = self.shown(text)
        problem = event.is_problem or (isinstance(event, Line) and event.problem)
        if problem:
            print(text, file=self.stderr)
        elif not self.quiet or _always_shown(event):
            print(text, file=self.stdout)


class JsonOutput(Output):
    """One JSON object per line on stdout, problems included (a script reads a single stream)."""

    @property
    def is_json(self) -> bool:
        return True

    def emit(self, event: Event) -> None:
        obj = event.to_json()
        for item in obj if isinstance(obj, list) else (obj,):
            self.stdout.write(self.shown(json.dumps(item, default=_json_default)) + "\n")

    def note(self, message: str) -> None:
        # Notes are for humans; with --json stderr carries only errors.
        return


def make_output(*, json_mode: bool, quiet: bool = False) -> Output:
    """The renderer for the current command's options, also recorded as the command's ``CliState.output`` so an
    error that ends the command is rendered the same way (a JSON ``error`` object under ``--json``)."""
    out: Output = JsonOutput(quiet=quiet) if json_mode else TextOutput(quiet=quiet)
    ctx = click.get_current_context(silent=True)
    state = ctx.find_root().obj if ctx is not None else None
    if hasattr(state, "output"):
        state.output = out
    return out


def _always_shown(event: Event) -> bool:
    # --quiet silences chatter, not the data a command was asked to print.
    return getattr(event, "is_data", True)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "__fspath__"):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")

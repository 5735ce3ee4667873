"""What ``kafkalog dump`` carries from file to file: the options it was given and the findings it prints at the
end as Kafka does. Both dump modules (``dump``, ``dump_files``) import it from here, below them both."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .dump_events import DEFAULT_MAX_MESSAGE_SIZE
from .errors import EXIT_CORRUPT, EXIT_OK, classify, error_path, report_error
from .output import Event, Line, Output

__all__ = ["DumpOptions", "DumpState"]


@dataclass
class DumpOptions:
    deep: bool = False
    print_data: bool = False
    verify_only: bool = False
    sanity_only: bool = False
    max_bytes: int | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    skip_metadata: bool = False
    key_decoder: str = "string"
    value_decoder: str = "string"
    internal: str | None = None  # an internal topic's decoder (kafkalog.metadata.dump_text.DECODERS)


@dataclass
class DumpState:
    """Findings gathered across files, printed at the end as Kafka does, and the exit code they imply."""

    out: Output
    opts: DumpOptions
    code: int = EXIT_OK
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatch: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: files that could not be read (absolute paths, each reported once) and the paths given that were not dumped
    unreadable: set[str] = field(default_factory=set)
    not_dumped: list[str] = field(default_factory=list)
    #: files ignored for their name (Kafka's "Ignoring unknown file"): when every file is, nothing was dumped
    ignored: int = 0
    debug: bool = False
    #: names (under a scratch dir) of files read where they lie, not from disk: a URL's segment objects and an
    #: Aiven segment's .log (cli/dump_remote.py), each with its source
    streamed: dict[str, Any] = field(default_factory=dict)

    def corrupt(self) -> None:
        self.code = max(self.code, EXIT_CORRUPT)

    def emit(self, event: Event) -> None:
        self.out.emit(event)

    def problem(self, message: str, kind: str, **extra: Any) -> None:
        self.out.emit(Line(message, kind=kind, extra=extra, problem=True))

    def failed(self, exc: BaseException, path: str) -> None:
        """Report an error met on ``path`` once (one line; an ``error`` object under --json) and remember it: the
        index dumps that need the same unreadable ``.log`` print their entries unchecked, without a second line."""
        key = os.path.abspath(error_path(exc) or path)
        if key in self.unreadable:
            self.code = max(self.code, classify(exc)[0])
            return
        self.unreadable.add(key)
        self.out.stdout.flush()
        self.code = max(self.code, report_error(exc, debug=self.debug, out=self.out, path=path))

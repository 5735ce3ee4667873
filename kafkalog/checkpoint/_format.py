"""The text format shared by Kafka's offset and leader-epoch checkpoints (``CheckpointFile``).

Line 1 the version, line 2 the entry count, then one entry per line, fields split on whitespace. Reading is
strict: anything Kafka would refuse, and a few things it would let through (a missing count line, a field
outside its Java type's range), raise :class:`CorruptCheckpointError` with the line at fault. The caller
decides what a bad checkpoint means (the manager warns and starts from 0, as Kafka does).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from kafkalog.errors import CorruptCheckpointError
from kafkalog.limits import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

#: the parsers name Java's int and long limits by width
INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX = INT_MIN, INT_MAX, LONG_MIN, LONG_MAX

# Java's Integer/Long.parseLong: optional sign, ASCII digits only (no spaces, no '_').
_JAVA_INT_RE = re.compile(r"[+-]?[0-9]+")
# Java's \s: space, \t, \n, \x0B, \f, \r.
_JAVA_WS_RE = re.compile(r"[ \t\n\x0b\f\r]+")
# Java's BufferedReader.readLine ends a line at \n, \r or \r\n.
_LINE_END_RE = re.compile(r"\r\n|\r|\n")


def parse_java_int(text: str, lo: int, hi: int, what: str, path: object, line: str) -> int:
    """Integer.parseInt / Long.parseLong with the range check, raising CorruptCheckpointError."""
    if not _JAVA_INT_RE.fullmatch(text):
        raise CorruptCheckpointError(f"malformed line (non-numeric {what} {text!r}): {line!r}", path=path)
    value = int(text)
    if not lo <= value <= hi:
        raise CorruptCheckpointError(f"malformed line ({what} {value} out of range): {line!r}", path=path)
    return value


def split_lines(text: str) -> list[str]:
    """Lines as Java's readLine yields them (a final line ending does not make an extra empty line)."""
    lines = _LINE_END_RE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def split_fields(line: str) -> list[str]:
    """Java's ``Pattern.compile("\\\\s+").split(line)``: leading whitespace gives an empty first field."""
    parts = _JAVA_WS_RE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts if parts else [""]


def read_checkpoint_entries(path: str | os.PathLike[str], version: int, fields: int) -> list[list[str]]:
    """Read a checkpoint file and return each entry line split into exactly ``fields`` fields.

    An empty file is an empty checkpoint (Kafka creates the file empty before the first write).
    """
    data = Path(path).read_bytes()
    return parse_checkpoint_entries(data, version, fields, path=path)


def parse_checkpoint_entries(data: bytes, version: int, fields: int, *, path: object = None) -> list[list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
    lines = split_lines(text)
    if not lines:
        return []
    read_version = parse_java_int(lines[0], INT32_MIN, INT32_MAX, "version", path, lines[0])
    if read_version != version:
        raise CorruptCheckpointError(f"unrecognised version {read_version}, expected version {version}", path=path)
    if len(lines) < 2:
        raise CorruptCheckpointError("truncated: the entry count line is missing", path=path)
    expected = parse_java_int(lines[1], INT32_MIN, INT32_MAX, "entry count", path, lines[1])
    if expected < 0:
        raise CorruptCheckpointError(f"negative entry count {expected}", path=path)
    entries: list[list[str]] = []
    for line in lines[2:]:
        parts = split_fields(line)
        if len(parts) != fields:
            raise CorruptCheckpointError(f"malformed line (expected {fields} fields): {line!r}", path=path)
        entries.append(parts)
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"expected [{expected}] entries in checkpoint file, but found [{len(entries)}]", path=path
        )
    return entries


def format_checkpoint(version: int, lines: Iterable[str]) -> bytes:
    """Version line, count line, entry lines, each ended by ``\\n`` (BufferedWriter.newLine on Linux)."""
    body = list(lines)
    out = [str(version), str(len(body)), *body]
    return ("\n".join(out) + "\n").encode("utf-8")

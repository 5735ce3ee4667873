"""The ``kafkalog`` DataSource's options, checked in one place: ``load()``, ``export_archive`` and ``kafkalog spark
export --option`` refuse what the other entry points refuse, naming it.

Spark hands a Python DataSource every ``.option()`` without a word about the ones it does not know; a misspelt
range (``startingOffset``), a bad flag (``verifyCrc=maybe``) or an inverted range would otherwise give the whole
archive, everything or nothing, silently. :func:`check_options` refuses each with an ``InvalidArgumentError`` that
names the option.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from kafkalog.archive.storage import STORAGE_OPTIONS
from kafkalog.errors import InvalidArgumentError

__all__ = ["DIR_STATES", "OPTIONS", "check_options"]

#: the DataSource's own options (Spark's spelling; keys are case-insensitive) and what each takes
OPTIONS = {
    "path": "a root (set by load(root))",
    "paths": "roots (set by load([root, ...]))",
    "isolation": "read_uncommitted or read_committed",
    "verifyCrc": "true or false",
    "onCorrupt": "fail or skip",
    "includeDirStates": "a comma list of live, future, delete, stray",
    "startingOffsets": "an offset >= 0, applied to every partition",
    "endingOffsets": "an offset >= 0 (exclusive), applied to every partition",
    "startingTimestamp": "a timestamp >= 0 (ms)",
    "endingTimestamp": "a timestamp >= 0 (ms, exclusive)",
    "arrowBatchRows": "a positive integer",
    "maxPartitionBytes": "a positive integer",
    "minPartitions": "a positive integer",
    "metricsDir": "a dir for the tasks' metrics lines",
    "rsmConfig": "the broker's RemoteStorageManager configuration file",
    "decode": "metadata, offsets or txn",
}
#: the partition-dir states ``includeDirStates`` may name (:class:`kafkalog.archive.discovery.SegmentItem.dir_state`)
DIR_STATES = ("live", "future", "delete", "stray")
_KNOWN = {k.lower(): k for k in (*OPTIONS, *STORAGE_OPTIONS)}
_BOOLEANS = {"true": True, "false": False}


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with lower-cased keys, after refusing an unknown key and a value its option does not take
    (``InvalidArgumentError`` naming the option): a non-boolean ``verifyCrc``, an unknown ``isolation``/
    ``onCorrupt``/``includeDirStates`` value, a negative or non-integer offset or timestamp, a start above its end."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        low = str(key).lower()
        if low not in _KNOWN:
            near = difflib.get_close_matches(low, list(_KNOWN), n=1, cutoff=0.6)
            hint = f" (did you mean {_KNOWN[near[0]]}?)" if near else ""
            raise InvalidArgumentError(f"kafkalog has no option {key!r}{hint}; options: {', '.join(OPTIONS)} and the "
                                       f"storage options {', '.join(STORAGE_OPTIONS)}")  # fmt: skip
        if low in out:
            raise InvalidArgumentError(f"kafkalog option {_KNOWN[low]} is given twice")
        out[low] = value
    _check_choice(out, "isolation", ("read_uncommitted", "read_committed"))
    _check_choice(out, "oncorrupt", ("fail", "skip"), " (stop dropped every valid record after a bad batch: use skip)")
    if "verifycrc" in out and str(out["verifycrc"]).strip().lower() not in _BOOLEANS:
        raise InvalidArgumentError(f"kafkalog option verifyCrc must be true or false, not {out['verifycrc']!r}")
    if "includedirstates" in out:
        states = [s.strip().lower() for s in str(out["includedirstates"]).split(",")]
        bad = [s for s in states if s not in DIR_STATES]
        if bad or not states:
            raise InvalidArgumentError(f"kafkalog option includeDirStates takes a comma list of {', '.join(DIR_STATES)}, "
                                       f"not {out['includedirstates']!r}")  # fmt: skip
    ints = {}
    for name in ("startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp"):
        raw = out.get(name.lower())
        if raw is None:
            continue
        try:
            ints[name] = int(str(raw).strip())
        except ValueError:
            raise InvalidArgumentError(f"kafkalog option {name} must be an integer (applied to every partition), "
                                       f"not {raw!r}") from None  # fmt: skip
        if ints[name] < 0:
            what = "a timestamp >= 0 (ms)" if name.endswith("Timestamp") else "an offset >= 0"
            raise InvalidArgumentError(f"kafkalog option {name} must be {what}, not {raw!r}")
    for lo, hi in (("startingOffsets", "endingOffsets"), ("startingTimestamp", "endingTimestamp")):
        if lo in ints and hi in ints and ints[lo] > ints[hi]:
            raise InvalidArgumentError(f"kafkalog options {lo}={ints[lo]} > {hi}={ints[hi]}: an inverted range")
    return out


def _check_choice(opts: dict[str, Any], key: str, choices: tuple[str, ...], stop_hint: str = "") -> None:
    raw = opts.get(key)
    if raw is None:
        return
    value = str(raw).strip().lower()
    if value not in choices:
        hint = stop_hint if value == "stop" else ""
        raise InvalidArgumentError(f"kafkalog option {_KNOWN[key]} must be {' or '.join(choices)}, not {raw!r}{hint}")


def flag(opts: Mapping[str, Any], key: str, default: bool) -> bool:
    """A checked boolean option (lower-cased key)."""
    raw = opts.get(key)
    return default if raw is None else _BOOLEANS[str(raw).strip().lower()]

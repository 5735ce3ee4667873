"""A partition dir's listing, read once per load (``list_dir``) and classified by C over the whole list of names
(``str.split``/``count`` over the joined names, ``map``, set operations) instead of a Python loop per name: a clean
lazy load (KIP-263) then costs per partition, however many segments the partition has
(``tests/manager/test_startup_growth.py`` counts it; ``benchmarks/bench_startup.py --growth`` times it)."""

from __future__ import annotations

import itertools
import operator
import os
import re

from kafkalog.io.oserrors import MISSING_PATH_ERRNOS
from kafkalog.names import INDEX_SUFFIX, LOG_SUFFIX, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX

_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Stems as "\n" + 20 characters, one after the other (``suffix_stems``): Kafka's offsets (20 ASCII digits), and what
# ``snapshot_offset`` takes for a snapshot's (``\d{20}``: any decimal digits, as ``str.isdecimal``).
CANONICAL_STEMS = re.compile(r"(?:\n[0-9]{20})+")
DECIMAL_STEMS = re.compile(r"(?:\n\d{20})+")
_ENTRY_NAME = operator.attrgetter("name")
_ENTRY_IS_PLAIN_FILE = operator.methodcaller("is_file", follow_symlinks=False)  # any entry type (pyfakefs')
_LAST_21 = operator.itemgetter(slice(-21, None))


def _is_file(entry: os.DirEntry) -> bool:
    """``Path.is_file`` for a scandir entry: follows symlinks; a dangling or looping link is not a file."""
    try:
        return entry.is_file()
    except OSError as exc:
        if exc.errno in MISSING_PATH_ERRNOS:
            return False
        raise


def list_dir(path: str) -> tuple[list[str], set[str], set[str]]:
    """One scandir of a partition dir: the regular files (symlinks followed, as ``Path.is_file``) in name order,
    the names of the entries that are not symlinks (known to exist without a stat), and the symlinks' names.

    When every entry is a regular file (the usual dir) that is found by ``map`` over the whole listing, not by
    a Python loop: a partition's cost then stays per partition however many segments it has."""
    with os.scandir(path) as it:
        entries = list(it)
    names = list(map(_ENTRY_NAME, entries))
    try:
        # regular files, none a symlink (the usual dir): the types come from the listing, no stat
        plain_files = all(map(_ENTRY_IS_PLAIN_FILE, entries))
    except OSError:
        plain_files = False  # a type the listing does not give, and the entry went away meanwhile
    if plain_files:
        names.sort()
        return names, set(names), set()
    files = []
    plain: set[str] = set()
    links: set[str] = set()
    for e in entries:
        name = e.name
        if e.is_symlink():
            links.add(name)
            if _is_file(e):
                files.append(name)
            continue
        plain.add(name)
        try:
            is_regular = e.is_file()
        except OSError:
            is_regular = _is_file(e)
        if is_regular:
            files.append(name)
    files.sort()
    return files, plain, links


def join_names(names: list[str]) -> str:
    """``names`` each between its own two newlines (``suffix_stems`` splits that)."""
    return "\n" + "\n\n".join(names) + "\n"


def suffix_stems(names_joined: str, suffix: str, stem: re.Pattern[str]) -> list[str] | None:
    """The stems of the names ending with ``suffix`` in ``names_joined`` (``join_names``: every name between its
    own two newlines), in name order, when every such name is 20 characters ``stem`` accepts plus the suffix;
    None when one is not. One ``split`` and one match over the lot, no Python loop over the names."""
    chunks = names_joined.split(suffix + "\n")
    del chunks[-1]  # what follows the last such name
    if not chunks:
        return []
    tails = "".join(map(_LAST_21, chunks))  # "\n" + the stem, for each name that is a stem of 20 characters
    if len(tails) != 21 * len(chunks) or not stem.fullmatch(tails):
        return None
    return tails[1:].split("\n")


def plain_segment_stems(names: list[str], plain: set[str], joined: str | None) -> list[str] | None:
    """The ``.log`` stems in name order when a clean load may add the inactive segments by base offset alone
    (``LogLoader._add_plain_segments``), else None: every entry is a regular file (``names``, the files, as many as
    ``plain``, the entries); every ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` name is a 20-digit
    offset plus its suffix; no index lacks its ``.log``; every inactive segment has its offset and time index and
    no txn index. ``joined``: ``join_names(names)``, or None when a name holds a newline.

    Decided by C over the joined names (split, count, set operations), not by a Python loop over them: a clean
    startup costs per partition, however many segments it has (tests/manager/test_startup_growth.py)."""
    if len(plain) != len(names):
        return None  # a directory or other non-file entry
    if joined is None:  # a name holds a newline: it matters only if it names a segment's file
        odd = [n for n in names if "\n" in n]
        if any(n.endswith(_SEGMENT_SUFFIXES) for n in odd):
            return None  # not a 20-digit offset plus its suffix (the general path's case)
        joined = join_names([n for n in names if "\n" not in n])
    logs = suffix_stems(joined, LOG_SUFFIX, CANONICAL_STEMS)
    if not logs:
        return None  # no .log, or one whose name is not a 20-digit offset (the general path's case)
    inactive, active = logs[:-1], logs[-1]
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        # every inactive segment has this index, and no other name ends with the suffix but the active
        # segment's: no orphan (or oddly named) index the general path would delete
        if joined.count(suffix + "\n") != len(inactive) + (active + suffix in plain) \
                or not plain.issuperset(map(operator.concat, inactive, itertools.repeat(suffix))):
            return None
    if joined.count(TXN_INDEX_SUFFIX + "\n") != (active + TXN_INDEX_SUFFIX in plain):
        return None  # an inactive segment's txn index (the light check has something to do), or an orphan
    return logs


def snapshot_files(prefix: str, names: list[str], joined: str | None) -> dict[int, str]:
    """The producer snapshots among ``names`` (the listing's files, sorted; ``joined``: ``join_names(names)`` or
    None) as offset -> ``prefix + name`` (prefix: the dir and a separator), ascending, by ``snapshot_offset``'s rule
    (``\\d{20}\\.snapshot``, as ``ProducerStateManager`` lists them)."""
    found = None if joined is None else suffix_stems(joined, SNAPSHOT_SUFFIX, DECIMAL_STEMS)
    if found is not None:  # the usual listing: every .snapshot name is a snapshot's (no Python loop over them)
        paths = map(operator.concat, itertools.repeat(prefix), map(operator.concat, found,
                                                                   itertools.repeat(SNAPSHOT_SUFFIX)))
        return dict(zip(map(int, found), paths))
    # the rule name by name; names are sorted, so are the offsets (20 digits each)
    return {int(n[:20]): prefix + n for n in [n for n in names if n.endswith(SNAPSHOT_SUFFIX)]
            if len(n) == 29 and n[:20].isdecimal()}

"""What loading a partition dir changes, file by file, measured the same way for a real load and a dry run.

A plan (:mod:`.recovery_plan`) predicts what the loader cuts and deletes, but a load also rewrites index files
(rebuilt for the topic config given), renames or rewrites producer snapshots and rebuilds a malformed leader-epoch
checkpoint; predicting each byte would repeat the loader. So ``recover --dry-run`` runs the real load on a
scratch copy instead: :func:`trial_load` copies the partition dir's small files (indexes, snapshots, checkpoints),
the ``.log`` files the load may write (the last segment and those the plan truncates) and hard-links the others
(the load only reads them; a copy where a link cannot be made), loads it, and reports the files whose bytes
changed. :func:`measured_load` loads the dir itself and reports the same way, so the two answers agree by
construction. The scratch dir is made beside the log dir (a hard link needs the same filesystem), never inside
it, and is removed afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Collection

from ..names import LOG_SUFFIX

__all__ = ["FileStates", "changed_files", "file_states", "measured_load", "trial_load"]

#: name -> what a change is judged by: a ``.log``'s size (the load only truncates or deletes one), any other
#: file's sha256
FileStates = dict[str, tuple]


def file_states(pdir: str) -> FileStates:
    """The state of every file of ``pdir``: segments by size, every other file by its bytes."""
    out: FileStates = {}
    for entry in os.scandir(pdir):
        if not entry.is_file(follow_symlinks=False):
            continue
        st = entry.stat(follow_symlinks=False)
        if entry.name.endswith(LOG_SUFFIX):
            out[entry.name] = ("log", st.st_size)
        else:
            h = hashlib.sha256()
            with open(entry.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[entry.name] = ("bytes", h.hexdigest())
    return out


def changed_files(before: FileStates, after: FileStates) -> list[str]:
    """Names of the files made, removed or whose bytes changed between two states of one dir."""
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


def measured_load(pdir: str, load: Callable[[str], int]) -> tuple[int, list[str]]:
    """(``load(pdir)``'s log end offset, the files it changed)."""
    before = file_states(pdir)
    end = load(pdir)
    return end, changed_files(before, file_states(pdir))


def trial_load(pdir: str, load: Callable[[str], int], *, writes_logs: Collection[str] = ()) -> tuple[int, list[str]]:
    """:func:`measured_load` on a scratch copy of ``pdir`` (``<scratch>/logdir/<name>``: ``load`` may use
    ``<scratch>`` beside the copy's log dir, e.g. for a quarantine): ``pdir`` is only read. ``writes_logs``: the
    ``.log`` names the load may truncate or rewrite (copied; the last segment always is)."""
    log_dir = os.path.dirname(os.path.abspath(pdir))
    scratch = _scratch_root(log_dir)
    try:
        copy = os.path.join(scratch, "logdir", os.path.basename(os.path.abspath(pdir)))
        os.makedirs(copy)
        logs = sorted(n for n in os.listdir(pdir) if n.endswith(LOG_SUFFIX))
        copied = set(writes_logs) | set(logs[-1:])
        for name in os.listdir(pdir):
            src, dst = os.path.join(pdir, name), os.path.join(copy, name)
            if not os.path.isfile(src):
                continue
            if name.endswith(LOG_SUFFIX) and name not in copied:
                try:
                    os.link(src, dst)
                    continue
                except OSError:
                    pass
            shutil.copy2(src, dst)
        return measured_load(copy, load)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _scratch_root(log_dir: str) -> str:
    """A fresh dir beside ``log_dir`` (same filesystem: hard links work), else in the system's temp dir."""
    with contextlib.suppress(OSError):
        return tempfile.mkdtemp(prefix=f".{os.path.basename(log_dir)}.kafkalog-dry-run-",
                                dir=os.path.dirname(log_dir) or ".")
    return tempfile.mkdtemp(prefix="kafkalog-dry-run-")

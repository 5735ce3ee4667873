"""What ``kafkalog clean`` does so that a failed, refused or interrupted run leaves a dir Kafka loads correctly.

* The clean-shutdown marker is deleted before any log is opened and written back (same bytes, same mtime) only
  once every log the run opened was closed cleanly, as Kafka's LogManager does: opening a log grows its active
  segment's ``.index``/``.timeindex`` to their preallocated size, and a crash (kill -9) from then on must count as
  unclean so that Kafka's next load recovers them instead of trusting zeros.
* A partition refused before its pass swapped anything in (a batch failing its CRC, a pass Kafka's cleaner also
  refuses) is put back as it was: the active segment's files the open rewrote get their bytes and mtimes back.
* Ctrl-C (SIGINT) stops the pass at its next chunk (what it had swapped in stays; the ``.cleaned`` files go), the
  log is closed cleanly and the marker restored; the command exits 130. A second Ctrl-C stops at once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

from kafkalog.checkpoint.atomic import atomic_write, fsync_dir
from kafkalog.checkpoint.clean_shutdown import CLEAN_SHUTDOWN_FILE_NAME
from kafkalog.errors import LogCleaningAbortedError
from kafkalog.names import LOG_SUFFIX, SNAPSHOT_SUFFIX, parse_segment_file_name

__all__ = ["EXIT_INTERRUPTED", "Interrupt", "MarkerHold", "PartitionSnapshot", "interruptible"]

#: the shell's code for a command ended by SIGINT (128 + 2)
EXIT_INTERRUPTED = 130


class MarkerHold:
    """The log dir's ``.kafka_cleanshutdown``, taken away for the run (``release``) and put back (``restore``)."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE_NAME)
        self.log_dir = log_dir
        self.data: bytes | None = None
        self.times: tuple[int, int] = (0, 0)

    @property
    def present(self) -> bool:
        return self.data is not None

    def release(self) -> None:
        """Read and delete the marker (dir fsynced): from here on a crash counts as an unclean shutdown."""
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                self.data = fh.read()
        except FileNotFoundError:
            return
        self.times = (st.st_atime_ns, st.st_mtime_ns)
        os.unlink(self.path)
        fsync_dir(self.log_dir)

    def restore(self) -> None:
        """Write the marker back as it was (atomically; its mtime kept)."""
        if self.data is None:
            return
        atomic_write(self.path, self.data)
        os.utime(self.path, ns=self.times)


@dataclass
class PartitionSnapshot:
    """The files of a partition dir that opening and closing a log after a clean shutdown may rewrite or delete
    (the active segment's indexes, producer snapshots, the leader-epoch checkpoint, ``partition.metadata``): bytes
    and times, to put back on refusal. Every file's times are kept too, so that ``restore`` also removes files the
    open created."""

    dir: str
    contents: dict[str, bytes] = field(default_factory=dict)
    times: dict[str, tuple[int, int]] = field(default_factory=dict)
    log_sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def take(cls, pdir: str) -> PartitionSnapshot:
        snap = cls(pdir)
        names = [e.name for e in os.scandir(pdir) if e.is_file(follow_symlinks=False)]
        bases = [p.offset for p in map(parse_segment_file_name, names)
                 if p is not None and p.suffix == LOG_SUFFIX and not p.temp_suffix]
        active = max(bases, default=None)
        for name in names:
            path = os.path.join(pdir, name)
            st = os.stat(path)
            snap.times[name] = (st.st_atime_ns, st.st_mtime_ns)
            parsed = parse_segment_file_name(name)
            if parsed is not None and parsed.suffix == LOG_SUFFIX:
                snap.log_sizes[name] = st.st_size
            if parsed is None or parsed.suffix == SNAPSHOT_SUFFIX or (parsed.offset == active
                                                                      and parsed.suffix != LOG_SUFFIX):
                with open(path, "rb") as fh:
                    snap.contents[name] = fh.read()
        return snap

    def restorable(self) -> bool:
        """Whether every ``.log`` file is still there at its size (``restore`` does not keep their bytes)."""
        for name, size in self.log_sizes.items():
            try:
                if os.path.getsize(os.path.join(self.dir, name)) != size:
                    return False
            except FileNotFoundError:
                return False
        return True

    def restore(self) -> None:
        """Put the kept files back (bytes, then times) and remove files that appeared since ``take``."""
        for entry in os.scandir(self.dir):
            if entry.is_file(follow_symlinks=False) and entry.name not in self.times:
                os.unlink(entry.path)
        for name, data in self.contents.items():
            path = os.path.join(self.dir, name)
            try:
                with open(path, "rb") as fh:
                    if fh.read() == data:
                        continue
            except FileNotFoundError:
                pass
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for name, times in self.times.items():
            path = os.path.join(self.dir, name)
            if os.path.exists(path):
                os.utime(path, ns=times)
        fsync_dir(self.dir)


class Interrupt:
    """SIGINT seen: ``check`` (the cleaner's between-chunk check) then aborts the pass."""

    def __init__(self) -> None:
        self.seen = False

    def check(self) -> None:
        if self.seen:
            raise LogCleaningAbortedError("interrupted (SIGINT)")

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.seen:
            raise KeyboardInterrupt
        self.seen = True


@contextmanager
def interruptible() -> Iterator[Interrupt]:
    """SIGINT handled as ``Interrupt`` for the block (main thread only; elsewhere the default stays)."""
    flag = Interrupt()
    try:
        previous = signal.signal(signal.SIGINT, flag._handler)
    except ValueError:  # not the main thread
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)

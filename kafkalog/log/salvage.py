"""Salvage recovery, beyond Kafka's: keep every valid batch of a damaged partition, remove only the bad bytes.

Kafka's recovery cuts a segment at its first invalid batch and deletes every later segment. Offset gaps are legal
in a Kafka log (compaction makes them), so nothing forces that loss: ``salvage_partition`` keeps every whole,
CRC-valid batch whose offsets fit the log (``salvage_scan.py`` decides which) and removes only the rest: batches
whose CRC fails, torn or garbage regions, batches renumbered or going backwards. The result is a log Kafka loads
after an unclean shutdown without truncating anything more (each segment holds only valid batches with offsets
at or above its base and increasing), and whose batches Kafka reads back.

Nothing is lost silently. Before a segment changes, the removed byte ranges are copied to a quarantine dir (one
``.bin`` file per range) with ``salvage-report.json`` describing them (segment, position, size, reason, the
offsets no kept batch holds around them, sha256). The quarantine must be outside the log dir: Kafka's loader
would read a file in the partition dir, and load a new directory in the log dir as a partition.

A segment is rewritten the way Kafka's cleaner swaps segments, so a crash at any point leaves a dir both loaders
complete: the kept batches go to ``<base>.log.cleaned`` (fsync; a leftover ``.cleaned`` is deleted at load), which
is renamed ``<base>.log.swap`` (fsync dir; a ``.swap`` replaces the files of its offset range at load), the old
indexes are deleted, and the ``.swap`` is renamed over the ``.log`` (fsync dir; a segment without an offset index
is rebuilt at load). Producer snapshots past the first removed offset are deleted, and the partition is then
loaded as after a crash, from offset 0 (also when no byte was removed): every offset, time and transaction index,
the leader-epoch checkpoint (entries of the old one kept where the kept batches agree) and the producer state are
rebuilt from the batches kept. Only plainly named ``.log`` files are salvaged; leftovers of Kafka's own
operations (``.deleted``, ``.cleaned``, ``.swap``) are left to that load, which removes or completes them as
Kafka's loader does.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.checkpoint.atomic import atomic_write, fsync_dir
from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata
from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError
from kafkalog.io.cpu_gate import io_wait
from kafkalog.log.config import LogConfig
from kafkalog.log.epoch_cache import CHECKPOINT_FILE
from kafkalog.log.loader import offset_prefix
from kafkalog.log.log import PARTITION_METADATA_FILE, Log
from kafkalog.log.producer_state import snapshot_offset
from kafkalog.log.salvage_scan import Kept, Removed, SegmentScan, choose_batches, epoch_entries, scan_segment
from kafkalog.names import CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from kafkalog.records.reader import open_source

__all__ = ["REPORT_FILE", "SalvageReport", "SalvagedRange", "default_quarantine_dir", "salvage_partition"]

REPORT_FILE = "salvage-report.json"
_MAX_RELOADS = 3


@dataclass(frozen=True)
class SalvagedRange:
    """Bytes removed from one segment. ``first_offset``..``last_offset`` are the offsets no kept batch holds
    around them (None when the removal leaves no gap, e.g. a duplicate batch or garbage between two batches)."""

    segment: str
    position: int
    bytes: int
    reasons: tuple[str, ...]
    first_offset: int | None
    last_offset: int | None
    quarantine_file: str | None = None

    @property
    def offsets(self) -> int:
        return 0 if self.first_offset is None or self.last_offset is None else self.last_offset - self.first_offset + 1


@dataclass
class SalvageReport:
    """What salvage removed (or would remove, with ``dry_run``)."""

    dir: Path
    dry_run: bool
    log_end_before: int
    log_end_after: int
    ranges: list[SalvagedRange] = field(default_factory=list)
    batches_kept: int = 0
    rewritten: list[str] = field(default_factory=list)  # segment files rewritten
    quarantine: Path | None = None  # the dir holding the removed bytes and the report file
    reload_actions: list[tuple[str, str]] = field(default_factory=list)  # what the rebuilding load did

    @property
    def changed(self) -> bool:
        """True when salvage cut anything out of the partition (or would, in a dry run)."""
        return bool(self.ranges)

    @property
    def lost_ranges(self) -> list[tuple[int, int]]:
        """The inclusive offset ranges removed, merged where they touch; unknown bounds left out."""
        out: list[tuple[int, int]] = []
        for r in self.ranges:
            if r.first_offset is None or r.last_offset is None:
                continue
            if out and r.first_offset <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], r.last_offset))
            else:
                out.append((r.first_offset, r.last_offset))
        return out

    @property
    def offsets_lost(self) -> int:
        """How many offsets the lost ranges cover."""
        return sum(last - first + 1 for first, last in self.lost_ranges)

    def to_json(self) -> dict:
        """The report as the JSON object ``kafkalog recover --salvage --json`` prints."""
        return {
            "partitionDir": str(self.dir),
            "dryRun": self.dry_run,
            "logEndOffsetBefore": self.log_end_before,
            "logEndOffsetAfter": self.log_end_after,
            "batchesKept": self.batches_kept,
            "offsetsLost": self.offsets_lost,
            "lostRanges": [list(r) for r in self.lost_ranges],
            "ranges": [
                {"segment": r.segment, "position": r.position, "bytes": r.bytes, "reasons": list(r.reasons),
                 "firstOffset": r.first_offset, "lastOffset": r.last_offset, "quarantineFile": r.quarantine_file}
                for r in self.ranges
            ],
            "rewritten": self.rewritten,
        }


def default_quarantine_dir(partition_dir: str | os.PathLike) -> Path:
    """``<log dir>.kafkalog-quarantine`` beside the log dir holding the partition: outside the log dir, so no
    Kafka loader ever reads it, and on the same filesystem as the data it keeps."""
    log_dir = Path(os.path.abspath(partition_dir)).parent
    return log_dir.with_name(log_dir.name + ".kafkalog-quarantine")


def _check_quarantine(partition_dir: Path, quarantine: Path) -> None:
    log_dir = partition_dir.parent
    q = Path(os.path.realpath(quarantine))
    for forbidden in (Path(os.path.realpath(partition_dir)), Path(os.path.realpath(log_dir))):
        if q == forbidden or forbidden in q.parents:
            raise InvalidArgumentError(
                f"quarantine dir {quarantine} is inside {forbidden}: Kafka's loader would read it there "
                "(choose a dir outside the log dir)"
            )


def _check_loadable(d: Path) -> None:
    """Refuse before writing anything what the final load would refuse: an unreadable ``partition.metadata``
    (the topic id; CorruptCheckpointError). Salvage repairs log data, not the partition's identity."""
    meta = d / PARTITION_METADATA_FILE
    if meta.exists():
        read_partition_metadata(meta)


def _log_files(d: Path) -> list[tuple[int, Path]]:
    out = []
    for e in os.scandir(d):
        base = offset_prefix(e.name)
        if base is not None and e.name == f"{base:020d}{LOG_SUFFIX}" and e.is_file():
            out.append((base, Path(e.path)))
    return sorted(out)


def _scan_file(path: Path, base: int) -> SegmentScan:
    """``scan_segment`` over a read-only map of the ``.log`` (``open_source``: no copy of the file in memory where
    the filesystem can map, pages not prefaulted since salvage walks each file once)."""
    view, mm = open_source(path, populate=False)
    try:
        return scan_segment(view, base)
    finally:
        try:
            view.release()
            if mm is not None:
                mm.close()
        except BufferError:  # a batch view still alive: the map goes with the last one
            pass


def _claimed_end(scans: list[SegmentScan]) -> int:
    """The log end the files claim: after the last offset a readable header states (whole batches, CRC-failing
    ones included) within the offsets its segment can hold."""
    end = 0
    for i, scan in enumerate(scans):
        upper = scans[i + 1].base_offset if i + 1 < len(scans) else None
        lasts = [k.last for k in scan.batches] + [b.declared_last for b in scan.bad
                                                  if b.declared_last is not None and b.reason == "crc"]
        for last in lasts:
            if last >= scan.base_offset and (upper is None or last < upper):
                end = max(end, last + 1)
    return end


def _removed_ranges(scan: SegmentScan, kept: list[Kept]) -> list[tuple[int, int, tuple[str, ...], int | None]]:
    """(start, end, reasons, declared last offset) of the byte ranges outside the kept batches."""
    holes = []
    pos = 0
    for k in kept:
        if k.position > pos:
            holes.append((pos, k.position))
        pos = k.position + k.size
    if pos < scan.size:
        holes.append((pos, scan.size))
    kept_at = {k.position for k in kept}
    out = []
    for start, end in holes:
        reasons: list[str] = []
        declared: int | None = None
        pieces: list[Removed | Kept] = [*scan.bad, *(b for b in scan.batches if b.position not in kept_at)]
        for piece in pieces:
            if start <= piece.position < end:
                why = piece.reason if isinstance(piece, Removed) else "offsets"
                if why not in reasons:
                    reasons.append(why)
                last = piece.declared_last if isinstance(piece, Removed) else piece.last
                if last is not None:
                    declared = last if declared is None else max(declared, last)
        out.append((start, end, tuple(reasons) or ("garbage",), declared))
    return out


def salvage_partition(
    dir: str | os.PathLike,
    *,
    quarantine_dir: str | os.PathLike | None = None,
    dry_run: bool = False,
    config: LogConfig | None = None,
    log_start_offset: int | None = None,
    clock: Callable[[], int] | None = None,
) -> SalvageReport:
    """Remove only the damaged bytes of the partition dir ``dir`` (see the module doc); ``dry_run`` writes nothing.

    ``quarantine_dir`` (default :func:`default_quarantine_dir`) receives ``<partition>/<UTC time>/`` with the
    removed bytes and ``salvage-report.json``; InvalidArgumentError when it lies inside the log dir. The caller
    keeps brokers away (the CLI holds the log dir's ``.lock``). ``clock`` is the reload's ``Log.open`` clock
    (producer-id expiry decides the snapshots written)."""
    d = Path(os.path.abspath(dir))
    quarantine = Path(quarantine_dir) if quarantine_dir is not None else default_quarantine_dir(d)
    _check_quarantine(d, quarantine)
    _check_loadable(d)
    files = _log_files(d)
    scans = [_scan_file(path, base) for base, path in files]
    chosen = choose_batches(scans)
    flat = [(i, k) for i, ks in enumerate(chosen) for k in ks]
    log_end_after = (chosen[-1][-1].last + 1 if chosen[-1] else scans[-1].base_offset) if scans else 0
    report = SalvageReport(d, dry_run, max(log_end_after, _claimed_end(scans)), log_end_after,
                           batches_kept=len(flat))
    keys = [(i, k.position) for i, k in flat]  # log order
    for i, (scan, kept) in enumerate(zip(scans, chosen, strict=True)):
        upper = scans[i + 1].base_offset if i + 1 < len(scans) else None
        for start, end, reasons, declared in _removed_ranges(scan, kept):
            j = bisect.bisect_left(keys, (i, start))
            prev = flat[j - 1][1] if j > 0 else None
            j = bisect.bisect_left(keys, (i, end))
            next_ = flat[j][1] if j < len(flat) else None
            # The offsets this segment can hold that no kept batch holds around the removed bytes.
            first = max(prev.last + 1, scan.base_offset) if prev is not None else scan.base_offset
            last = next_.first - 1 if next_ is not None else declared
            if last is not None and upper is not None:
                last = min(last, upper - 1)
            if last is None or last < first:
                first = last = None
            report.ranges.append(SalvagedRange(files[i][1].name, start, end - start, reasons, first, last))
    touched = sorted({r.segment for r in report.ranges})
    if dry_run:  # the names the real run would give: a dry run's report is the real run's
        report.ranges = [dataclasses.replace(r, quarantine_file=_quarantine_name(r)) for r in report.ranges]
        report.rewritten.extend(touched)
        return report
    if report.ranges:
        _quarantine(report, quarantine, d, dict((p.name, p) for _b, p in files))
        kept_by_name = {files[i][1].name: chosen[i] for i in range(len(files))}
        for name in touched:
            _rewrite(d, name, kept_by_name[name])
            report.rewritten.append(name)
        first_lost = min((r.first_offset if r.first_offset is not None else offset_prefix(r.segment) or 0)
                         for r in report.ranges)
        _drop_snapshots_after(d, first_lost)
    _write_epochs(d, [k for ks in chosen for k in ks])
    # Even with every .log intact, the load as after a crash rebuilds indexes and state from the batches. A load
    # may drop a snapshot the one before it used (at the log start), so loads repeat until one changes nothing:
    # the next recovery, Kafka's included, then finds a fixed point.
    previous = None
    for _ in range(_MAX_RELOADS):
        log = Log.open(d, config, clean_shutdown=False, recovery_point=0, log_start_offset=log_start_offset,
                       clock=clock)
        try:
            report.reload_actions.extend(log.load_actions)
        finally:
            log.close()
        state = _derived_state(d)
        if state == previous:
            break
        previous = state
    return report


def _write_epochs(d: Path, kept: list[Kept]) -> None:
    """Write the leader-epoch checkpoint matching the kept batches (old entries kept where consistent)."""
    path = d / CHECKPOINT_FILE
    try:
        old = [(e.epoch, e.start_offset) for e in read_leader_epoch_checkpoint(path)]
    except (OSError, CorruptCheckpointError):
        old = []
    entries = epoch_entries(kept, old)
    if entries != old or not path.exists():
        write_leader_epoch_checkpoint(path, entries)


def _derived_state(d: Path) -> dict[str, bytes]:
    """Digests of the files a load rewrites (indexes, snapshots, the epoch checkpoint)."""
    out = {}
    for e in sorted(os.scandir(d), key=lambda e: e.name):
        if e.is_file() and not e.name.endswith(LOG_SUFFIX):
            with open(e.path, "rb") as f:
                out[e.name] = hashlib.sha256(f.read()).digest()
    return out


def _quarantine(report: SalvageReport, root: Path, d: Path, paths: dict[str, Path]) -> None:
    """Copy every removed range to the quarantine, then the report: all durable before a segment changes."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    qdir = root / d.name / stamp
    qdir.mkdir(parents=True, exist_ok=False)
    ranges = []
    doc_ranges = []
    for r in report.ranges:
        with open(paths[r.segment], "rb") as f:
            f.seek(r.position)
            data = f.read(r.bytes)
        name = _quarantine_name(r)
        atomic_write(qdir / name, data)
        ranges.append(SalvagedRange(r.segment, r.position, r.bytes, r.reasons, r.first_offset, r.last_offset, name))
        doc_ranges.append(hashlib.sha256(data).hexdigest())
    report.ranges = ranges
    report.quarantine = qdir
    doc = report.to_json()
    for entry, digest in zip(doc["ranges"], doc_ranges, strict=True):
        entry["sha256"] = digest
    atomic_write(qdir / REPORT_FILE, (json.dumps(doc, indent=2) + "\n").encode())
    fsync_dir(qdir.parent)


def _quarantine_name(r: SalvagedRange) -> str:
    """The file one removed range is kept in, inside the run's quarantine dir."""
    return f"{r.segment}.{r.position}-{r.position + r.bytes}.bin"


def _rewrite(d: Path, name: str, kept: list[Kept]) -> None:
    """Replace segment ``name`` by its kept batches through ``.cleaned`` and ``.swap`` (see the module doc)."""
    src = d / name
    cleaned = d / (name + CLEANED_SUFFIX)
    swap = d / (name + SWAP_SUFFIX)
    with open(src, "rb") as f:
        fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for k in kept:
                f.seek(k.position)
                view = memoryview(f.read(k.size))
                while view:
                    view = view[os.write(fd, view):]
            with io_wait():
                os.fsync(fd)
        finally:
            os.close(fd)
    os.replace(cleaned, swap)
    fsync_dir(d)
    stem = name[: -len(LOG_SUFFIX)]
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        try:
            os.unlink(d / (stem + suffix))
        except FileNotFoundError:
            pass
    os.replace(swap, src)
    fsync_dir(d)


def _drop_snapshots_after(d: Path, offset: int) -> None:
    """Producer snapshots past ``offset`` describe batches that may be gone: the reload rebuilds them."""
    for e in os.scandir(d):
        off = snapshot_offset(e.name)
        if off is not None and off > offset:
            os.unlink(e.path)

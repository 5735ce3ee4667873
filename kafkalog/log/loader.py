"""LogLoader: turn a partition directory into segments, in the order Kafka's ``LogLoader`` does.

1. delete ``*.deleted`` leftovers and ``*.cleaned`` files (and ``.swap`` files of an interrupted split);
2. complete an interrupted cleaner swap: delete the files the ``.swap`` segment replaces, drop the suffix;
3. open every ``.log`` (lazily: inactive indexes are not read, KIP-263), deleting index files with no ``.log``;
   a missing offset index or a corrupt txn index recovers that segment on the spot;
4. after an unclean shutdown recover every segment from the one holding the recovery point; the first one that
   loses bytes ends recovery and every later segment is deleted;
5. a log start offset beyond the log end deletes everything and starts an empty segment at the log start;
6. truncate the leader-epoch cache to the log end and the log start, drop stray producer snapshots and rebuild
   the producer state (``rebuild_producer_state``, shared with ``Log.truncate_to``).

Files Kafka would delete "asynchronously" during load are deleted at once: nobody can be reading them yet.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkalog.checkpoint.offset_checkpoint import effective_log_start_offset
from kafkalog.errors import (
    CorruptIndexError,
    InvalidOffsetError,
    KafkaStorageError,
)
from kafkalog.io.handle_cache import HandleCache
from kafkalog.log.epoch_cache import LeaderEpochFileCache
from kafkalog.log.listing import join_names, list_dir, plain_segment_stems, snapshot_files
from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.log.segments import LogSegments
from kafkalog.names import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_to_name,
)
from kafkalog.segment.log_segment import LogSegment

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_KRAFT_SNAPSHOT_DELETED = ".checkpoint.deleted"


def _segment_maker(config, clock, handles, dir: Path, base: int) -> LogSegment:
    """What ``LogLoader._existing_segment`` builds, for ``LogSegments.add_lazy`` (bound with ``functools.partial``:
    one object per partition, not per segment)."""
    if config is None:
        return LogSegment(dir, base, clock=clock, handles=handles)
    return LogSegment(
        dir, base, clock=clock, handles=handles, index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes, roll_jitter_ms=config.random_segment_jitter(),
    )


def offset_prefix(name: str) -> int | None:
    """Kafka's ``offsetFromFile``: the digits before the first dot, or None when they are not a number. ASCII
    digits only: ``str.isdigit`` also accepts '²' (which ``int`` refuses) and other scripts' digits, and Kafka
    names files with ASCII digits alone."""
    head = name.split(".", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def classify_leftovers(names: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Step 1 as a decision: ``([(why, name) to delete], [valid .swap names])`` for the dir's file names (name
    order). ``*.deleted`` (not KRaft's ``.checkpoint.deleted``) and ``*.cleaned`` go; a ``.swap`` at or past the
    first ``.cleaned`` file belongs to an unfinished split (KAFKA-6264) and goes too."""
    doomed: list[tuple[str, str]] = []
    swaps: list[str] = []
    cleaned: list[str] = []
    min_cleaned = None
    for name in names:
        if name.endswith(DELETED_SUFFIX) and not name.endswith(_KRAFT_SNAPSHOT_DELETED):
            doomed.append(("deleted leftover", name))
        elif name.endswith(CLEANED_SUFFIX):
            off = offset_prefix(name)
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            cleaned.append(name)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    valid = []
    for name in swaps:
        off = offset_prefix(name)
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            doomed.append(("invalid swap", name))
        else:
            valid.append(name)
    doomed.extend(("cleaned leftover", name) for name in cleaned)
    return doomed, valid


@dataclass
class LoadedLogOffsets:
    """What loading decided (Kafka's ``LoadedLogOffsets``)."""

    log_start_offset: int
    recovery_point: int
    next_offset: int


def rebuild_producer_state(
    psm: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    last_offset: int,
    *,
    reload_from_clean_shutdown: bool,
    now: int,
) -> None:
    """Kafka's ``UnifiedLog.rebuildProducerState``: newest valid snapshot, then replay the log up to ``last_offset``.

    Snapshots are (re)written at the base offsets of the last two segments and at ``last_offset``, exactly where
    Kafka writes them, so the set of ``.snapshot`` files matches Kafka's.
    """
    # The base offsets of the last two segments (read as offsets: a lazily loaded segment is not built for this).
    to_snapshot: list[int] = segments.base_offsets()[-2:]
    to_snapshot.append(last_offset)

    if psm.latest_snapshot_offset is None and reload_from_clean_shutdown:
        # Upgrade path: no snapshot after a clean shutdown means no producer state ever existed.
        for off in to_snapshot:
            psm.update_map_end_offset(off)
            psm.take_snapshot()
        return

    empty_before = psm.is_empty() and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now)
    if last_offset > psm.map_end_offset and not empty_before:
        seg_of_last = segments.floor(last_offset)
        for seg in segments.values(psm.map_end_offset, last_offset):
            start = max(seg.base_offset, psm.map_end_offset, log_start_offset)
            psm.update_map_end_offset(start)
            if seg.base_offset in to_snapshot:
                psm.take_snapshot()
            max_position = seg.size
            if seg_of_last is seg:
                pos = seg.translate_offset(last_offset)
                max_position = pos.position if pos is not None else seg.size
            found = seg.translate_offset(start)
            if found is None or found.position >= max_position:
                continue
            psm.load_producers_from_batches(seg.batches(found.position, max_position))
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


class LogLoader:
    """Loads one partition dir into ``segments``; see the module doc for the order of steps."""

    def __init__(
        self,
        dir: Path,
        config,
        *,
        segments: LogSegments,
        clean_shutdown: bool,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        clock: Callable[[], int],
        new_psm: Callable[..., ProducerStateManager],
        handles: HandleCache | None = None,
        listing: tuple[list[str], set[str], set[str]] | None = None,
    ) -> None:
        self.dir = dir if isinstance(dir, Path) else Path(dir)
        self.handles = handles  # the Log's handle cache, handed to every segment
        self.config = config
        self.segments = segments
        self.clean_shutdown = clean_shutdown
        self.log_start_ckpt = log_start_offset_checkpoint
        self.recovery_point_ckpt = recovery_point_checkpoint
        self.epoch_cache = epoch_cache
        self.psm = producer_state
        self.clock = clock
        self._new_psm = new_psm
        #: What the loader did, for callers and tests: (action, file name) pairs.
        self.actions: list[tuple[str, str]] = []
        self._load_truncation: int | None = None  # base of the first segment that lost bytes while opening
        # Base offsets of the segments rebuilt from their batches during this load (indexes rewritten, the log
        # cut after its last valid batch): nothing a sanity check looks at is older than that rebuild.
        self.recovered_bases: set[int] = set()
        # Snapshot files recovery-time managers dropped but left on disk for the next one to reuse (offset ->
        # path); swept before anything lists the dir again and when recovery ends.
        self._retired: dict[int, object] = {}
        # The dir's snapshot files as the last recovery-time manager left them (offset -> path, ascending), handed
        # to the next one instead of listing the dir again: one listing per segment made recovery O(n^2).
        # None whenever something else may have touched the snapshot files since.
        self._snapshot_listing: dict | None = None
        # One listing of the partition dir shared by every step (temp files, swaps, segments, producer snapshots);
        # dropped whenever the loader deletes or renames a file, so the next step lists again.
        # (``listing``: the caller's ``list_dir`` of this dir, when nothing changed in it since.)
        self._listing: tuple[list[str], set[str], set[str]] | None = listing  # files, plain, symlinks
        self._joined_cache: tuple[list[str], str | None] | None = None  # (the listing's names, _joined's answer)
        self._dir_str = str(self.dir)
        self._recovered = False  # a recovery-time producer-state manager wrote snapshots the main one does not know

    # ------------------------------------------------------------------ helpers

    def _open_segment(self, base: int, suffix: str = "") -> LogSegment:
        return LogSegment.open(self.dir, base, config=self.config, file_suffix=suffix, clock=self.clock,
                               handles=self.handles)

    def _existing_segment(self, base: int) -> LogSegment:
        """``LogSegment.open`` for a ``.log`` the listing shows as a plain file: no stat to find out it exists
        (nothing is opened either; the segment opens its files on first use)."""
        return _segment_maker(self.config, self.clock, self.handles, self.dir, base)

    def _delete(self, path: Path, why: str) -> None:
        self._listing = None
        try:
            path.unlink()
        except FileNotFoundError:
            return
        self.actions.append((why, path.name))

    def _files(self) -> list[Path]:
        d = self.dir
        return [d / name for name in self._scan()[0]]

    def _scan(self) -> tuple[list[str], set[str]]:
        """Names of the regular files (symlinks followed, as ``Path.is_file``) in name order, and the names of
        the entries that are not symlinks (known to exist without a stat). One scandir, no stat per file unless
        it is a symlink, no Path objects (building and sorting those cost more than the listing). The result is
        kept until the loader changes a file name (``_delete``, swaps, recovery)."""
        if self._listing is None:
            self._listing = list_dir(self._dir_str)
        return self._listing[0], self._listing[1]

    def _joined(self) -> str | None:
        """The listing's file names, each between its own two newlines (``listing.join_names``), for suffix
        searches and splits done in C over the lot (``listing.suffix_stems``); None when a name holds a newline
        (the per-name path then decides)."""
        names = self._scan()[0]
        cached = self._joined_cache
        if cached is not None and cached[0] is names:
            return cached[1]
        joined: str | None = join_names(names)
        if joined.count("\n") != 2 * len(names):  # type: ignore[union-attr]
            joined = None
        self._joined_cache = (names, joined)
        return joined

    def _snapshot_files(self) -> dict[int, str]:
        """The producer snapshots in the listing (offset -> path, ascending), as ``ProducerStateManager`` lists
        them (``<20 digits>.snapshot``, regular files with symlinks followed)."""
        return snapshot_files(os.path.join(self._dir_str, ""), self._scan()[0], self._joined())

    # ------------------------------------------------------------------ load

    def load(self) -> LoadedLogOffsets:
        swaps = self._remove_temp_files_and_collect_swaps()
        self._complete_swaps(swaps)
        # The producer-state manager learns its snapshot files from the loader's listing, not by listing again.
        self.psm.reset_snapshot_listing(self._snapshot_files())
        resized = None
        self.segments.set_maker(self.dir, functools.partial(_segment_maker, self.config, self.clock, self.handles))
        try:
            self._load_segment_files()  # may recover segments whose index is missing or corrupt
            if self.clean_shutdown and self.segments:
                # Grown back to full size before anything reads them (not mapped: the files' sizes are set through
                # a descriptor, the entries are read when needed); after a crash recovery rewrites them first.
                resized = self.segments.last
                resized.resize_indexes(self.config.segment_index_bytes)  # type: ignore[union-attr]
            offsets = self._recover_log()
        finally:
            self._sweep_retired()  # snapshots recovery dropped and did not write again go, as Kafka deletes them
        active = self.segments.last
        assert active is not None
        if active is not resized:  # recovery rewrote it, or it is a new segment
            active.resize_indexes(self.config.segment_index_bytes)

        self.epoch_cache.truncate_from_end(offsets.next_offset)
        bases = self.segments.base_offsets()  # the first segment's offset, without building it
        new_log_start = effective_log_start_offset(self.log_start_ckpt, bases[0])
        self.epoch_cache.truncate_from_start(self.log_start_ckpt)

        if not self.psm.is_empty():
            raise KafkaStorageError("producer state must be empty during log initialization")
        # Without recovery only the main manager touched snapshot files since the listing: its view is the dir's.
        self.psm.remove_stray_snapshots(
            self.segments.base_offsets(), snapshots=None if self._recovered else dict(self.psm.snapshot_listing)
        )
        rebuild_producer_state(
            self.psm, self.segments, new_log_start, offsets.next_offset,
            reload_from_clean_shutdown=self.clean_shutdown, now=self.clock(),
        )
        return LoadedLogOffsets(new_log_start, offsets.recovery_point, offsets.next_offset)

    def _remove_temp_files_and_collect_swaps(self) -> list[Path]:
        names = self._scan()[0]
        joined = self._joined()
        if joined is not None and not any(suffix + "\n" in joined for suffix in _LEFTOVER_SUFFIXES):
            return []  # the usual case: no name ends with a leftover suffix, so nothing to delete and no swap
        doomed, swaps = classify_leftovers(names)
        for why, name in doomed:
            self._delete(self.dir / name, why)
        return [self.dir / name for name in swaps]

    def _complete_swaps(self, swaps: list[Path]) -> None:
        min_off: int | None = None
        max_off: int | None = None
        for path in swaps:
            if not path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                continue
            base = offset_prefix(path.name)
            if base is None:
                continue
            seg = self._open_segment(base, SWAP_SUFFIX)
            try:
                nxt = seg.read_next_offset()
            finally:
                seg.close_handlers()
            min_off = base if min_off is None else min(min_off, base)
            max_off = nxt if max_off is None else max(max_off, nxt)
        if min_off is not None and max_off is not None:
            for path in self._files():
                if path.name.endswith(SWAP_SUFFIX):
                    continue
                off = offset_prefix(path.name)
                if off is not None and min_off <= off < max_off:
                    self._delete(path, "replaced by swap")
        if not swaps:
            return  # every .swap file was collected (or deleted) above and nothing creates one in between
        for path in self._files():
            if path.name.endswith(SWAP_SUFFIX):
                target = path.with_name(path.name[: -len(SWAP_SUFFIX)])
                self._listing = None
                os.replace(path, target)
                self.actions.append(("swap completed", target.name))

    def _load_segment_files(self) -> None:
        names, plain = self._scan()
        links = self._listing[2]  # type: ignore[index]
        if self.clean_shutdown and not links and self._add_plain_segments(names, plain):
            return
        # Entries listed here exist unless deleted below, and only orphan indexes are (never a .log, nor an index
        # of a segment that has its .log); a name not listed does not exist; a symlink is checked on disk.

        def exists(stem: str, suffix: str) -> bool:
            name = stem + suffix
            return name in plain or (name in links and (self.dir / name).exists())

        def stem_of(name: str, off: int) -> str:
            """``offset_to_name(off)`` (ValueError out of range, as file_name), taken from the name itself when it
            already is those 20 digits: formatting it again for each of a segment's files was a per-segment
            startup cost."""
            head = name[:20]
            if len(name) > 20 and name[20] == "." and head.isascii() and head.isdigit():
                return head
            return offset_to_name(off)

        for name in names:
            if name.endswith(_INDEX_SUFFIXES):
                off = offset_prefix(name)
                if off is not None and not exists(stem_of(name, off), LOG_SUFFIX):
                    self._delete(self.dir / name, "orphan index")
            elif name.endswith(LOG_SUFFIX):
                base = offset_prefix(name)
                if base is None:
                    continue
                stem = stem_of(name, base)
                time_index_new = not exists(stem, TIME_INDEX_SUFFIX)
                # A plain (non-symlink) .log in the listing exists: build the segment without asking the disk.
                seg = self._existing_segment(base) if name == stem + LOG_SUFFIX and name in plain \
                    else self._open_segment(base)
                truncated = 0
                try:
                    self._light_sanity_check(seg, time_index_new, exists(stem, INDEX_SUFFIX),
                                             txn_index_exists=exists(stem, TXN_INDEX_SUFFIX))
                except FileNotFoundError:
                    self.actions.append(("recover: missing offset index", name))
                    truncated = self._recover_segment(seg)
                except CorruptIndexError:
                    self.actions.append(("recover: corrupt index", name))
                    truncated = self._recover_segment(seg)
                if truncated > 0 and self._load_truncation is None:
                    self._load_truncation = base
                self.segments.add(seg)

    def _add_plain_segments(self, names: list[str], plain: set[str]) -> bool:
        """The clean-shutdown case without a single exception, decided before anything is touched: every
        ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` name is a 20-digit offset plus its suffix, no
        index lacks its ``.log``, and every inactive segment has its offset and time index and no txn index.
        Then those inactive segments are added by base offset alone (``LogSegments.add_lazy``: an object is made
        on first use), which is all the general path does for them: its light check finds nothing to do without
        a txn index, and opens nothing. The active segment takes the general path's steps. False (nothing done)
        otherwise: the general path then handles the dir."""
        logs = plain_segment_stems(names, plain, self._joined())
        if logs is None:
            return False
        inactive, active = logs[:-1], logs[-1]
        bases = list(map(int, inactive))
        self.segments.add_lazy(
            bases, self.dir, functools.partial(_segment_maker, self.config, self.clock, self.handles)
        )
        base = int(active)
        seg = self._existing_segment(base)
        txn_index_exists = active + TXN_INDEX_SUFFIX in plain
        try:
            self._light_sanity_check(seg, active + TIME_INDEX_SUFFIX not in plain, active + INDEX_SUFFIX in plain,
                                     txn_index_exists=txn_index_exists)
        except FileNotFoundError:
            self.actions.append(("recover: missing offset index", active + LOG_SUFFIX))
            self._recover_segment(seg)
        except CorruptIndexError:
            self.actions.append(("recover: corrupt index", active + LOG_SUFFIX))
            self._recover_segment(seg)
        else:
            if not txn_index_exists:
                seg.txn_index.note_absent()  # the active segment's check reads it next: no failed open there
        self.segments.add(seg)
        return True

    @staticmethod
    def _light_sanity_check(seg: LogSegment, time_index_new: bool, offset_index_exists: bool | None = None,
                            *, txn_index_exists: bool = True) -> None:
        """Kafka's load-time check (KIP-263): the offset index must exist, the txn index must be sane; the
        offset and time indexes are not read (segments past the recovery point get rebuilt anyway). A txn index
        that does not exist is empty, hence sane: it is not opened (Kafka opens its channel only if the file
        exists)."""
        if offset_index_exists is None:
            offset_index_exists = Path(seg.offset_index.file).exists()
        if not offset_index_exists:
            raise FileNotFoundError(f"offset index {seg.offset_index.file} does not exist")
        if time_index_new:
            seg.time_index.resize(0)
        if txn_index_exists:
            seg.txn_index.sanity_check()

    def _recover_segment(self, seg: LogSegment) -> int:
        """Kafka's ``recoverSegment``: a throwaway producer-state manager rebuilt up to the segment, then the
        segment re-read batch by batch (indexes, txn index, epochs), then a snapshot at its end."""
        listing, self._snapshot_listing = self._snapshot_listing, None
        self._listing = None  # recovery rewrites index and snapshot files
        self._recovered = True
        if listing is None:
            self._sweep_retired()  # the new manager lists the dir: it must not find retired files there
            psm = self._new_psm(retired=self._retired)
        else:
            psm = self._new_psm(snapshots=listing, retired=self._retired)
        rebuild_producer_state(
            psm, self.segments, self.log_start_ckpt, seg.base_offset,
            reload_from_clean_shutdown=False, now=self.clock(),
        )
        truncated = seg.recover(psm, self.epoch_cache)
        self.recovered_bases.add(seg.base_offset)
        psm.take_snapshot()
        # Only this manager touched snapshot files since the listing was taken, so its view is the dir's.
        self._snapshot_listing = psm.snapshot_listing
        return truncated

    def _recover_log(self) -> LoadedLogOffsets:
        if not self.clean_shutdown and self._load_truncation is not None:
            # kafkalog, stricter than Kafka: a segment that lost bytes while being rebuilt at open (missing or
            # corrupt index) ends the log just like a truncation during recovery does. Kafka keeps the later
            # segments and serves a log with a hole in it.
            later = [s for s in self.segments.values() if s.base_offset > self._load_truncation]
            self._remove_and_delete_segments(later)
        if not self.clean_shutdown:
            unflushed = self.segments.values(self.recovery_point_ckpt, None)
            for i, seg in enumerate(unflushed):
                try:
                    truncated = self._recover_segment(seg)
                except (InvalidOffsetError, OSError):
                    truncated = seg.truncate_to(seg.base_offset)
                if truncated > 0:
                    self.actions.append(("truncated", seg.log_path.name))
                    self._remove_and_delete_segments(unflushed[i + 1 :])
                    break
        log_end = self._log_end_if_valid()
        if not self.segments:
            self.segments.add(self._open_segment(self.log_start_ckpt))
        if self.clean_shutdown and log_end is not None:
            return LoadedLogOffsets(self.log_start_ckpt, log_end, log_end)
        if log_end is None:
            log_end = self.segments.last.read_next_offset()  # type: ignore[union-attr]
        return LoadedLogOffsets(self.log_start_ckpt, min(self.recovery_point_ckpt, log_end), log_end)

    def _log_end_if_valid(self) -> int | None:
        if not self.segments:
            return None
        log_end = self.segments.last.read_next_offset()  # type: ignore[union-attr]
        if log_end >= self.log_start_ckpt:
            return log_end
        # The log start is past everything we hold (segments deleted by hand, or DeleteRecords then loss).
        self._remove_and_delete_segments(self.segments.values())
        self.epoch_cache.clear_and_flush()
        self.psm.truncate_fully_and_start_at(self.log_start_ckpt)
        return None

    def _sweep_retired(self) -> None:
        """Unlink the snapshot files recovery dropped and did not write again (what Kafka deleted outright)."""
        retired, self._retired = self._retired, {}
        for path in retired.values():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _remove_and_delete_segments(self, doomed: list[LogSegment]) -> None:
        self._sweep_retired()  # before the main manager renames snapshots and the next recovery lists the dir
        self._snapshot_listing = None  # snapshots are renamed below: the next recovery lists the dir again
        self._listing = None
        for seg in doomed:
            self.segments.remove(seg.base_offset)
            self.actions.append(("deleted segment", seg.log_path.name))
            seg.delete()
            snap = self.psm.remove_and_mark_snapshot_for_deletion(seg.base_offset)
            if snap is not None:
                self._delete(snap, "deleted snapshot")

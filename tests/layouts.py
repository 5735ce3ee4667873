"""Broker-shaped log dirs for tests and benchmarks: many partitions copied from one written through ``Log``.

Writing each partition through ``Log`` would make large layouts slow to build; partitions are independent logs,
so copies of one are just as valid. The dir is left as a clean shutdown leaves it (recovery-point checkpoint and
the clean-shutdown marker), so a load takes the clean path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kafkalog.checkpoint.clean_shutdown import write_clean_shutdown
from kafkalog.checkpoint.offset_checkpoint import RECOVERY_POINT_CHECKPOINT, write_offset_checkpoint
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log


def copied_log_dir(root: Path, partitions: int, segments: int,
                   records: Callable[[int], list[tuple[bytes, bytes]]], *, index_interval: int) -> Path:  # fmt: skip
    """``root/logs`` holding partitions ``t-0`` .. ``t-<partitions - 1>``, each ``segments`` segments long, segment
    ``s`` holding one batch of ``records(s)``; ``index_interval`` is ``index.interval.bytes``."""
    template = root / "tpl" / "t-0"
    config = LogConfig.from_properties({"segment.bytes": 1 << 20, "index.interval.bytes": index_interval})
    log = Log.open(template, config)
    for s in range(segments):
        log.append_as_leader(records(s))
        if s < segments - 1:
            log.roll()
    end = log.log_end_offset
    log.flush()
    log.close()
    d = root / "logs"
    d.mkdir()
    for p in range(partitions):
        shutil.copytree(template, d / f"t-{p}")
    write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, {("t", p): end for p in range(partitions)})
    write_clean_shutdown(d, 0)
    return d


def big_segment(root: Path) -> Path:
    """``root/big-0``'s first segment: 2,048 batches of one ~4 KiB record (8+ MiB), for tests of how much of a
    segment a point query brings into memory."""
    with Log.open(root / "big-0", {"segment.bytes": str(64 << 20)}) as log:
        for i in range(2048):
            log.append_as_leader([(b"k%d" % i, bytes([i % 251]) * 4200)], timestamp=1_000_000 + i)
        log.flush()
    return root / "big-0" / "00000000000000000000.log"


def evict_from_page_cache(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (written back first), so residency shows what a read brings in."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)

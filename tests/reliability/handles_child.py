"""Child process for tests/io/test_handles_scale.py: a LogManager far larger than its descriptor limit.

``python handles_child.py PHASE ROOT PARTITIONS SEGMENTS NOFILE`` sets ``RLIMIT_NOFILE`` to NOFILE (soft and hard)
first, then runs one phase over two log dirs under ROOT and prints one JSON line of facts for the parent:

* ``create``: every partition gets SEGMENTS segments through the manager (append, roll), then a clean shutdown;
* ``clean``: lazy restart, read every partition to its end, background checker, one replica moved, retention
  (log start moved past the first segments), clean shutdown;
* ``crash``: one more record per partition, then the process dies without shutting down (unclean);
* ``unclean``: restart with recovery, read every partition to its end, clean shutdown;
* ``exhaust``: hold every free descriptor (open ``/dev/null`` until EMFILE) and read through the manager;
* ``bigmove``: one partition of SEGMENTS segments (4 files each, more than NOFILE) moved to the other dir.

Record values are a pure function of (partition, offset), so every read is checked for loss or damage.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import sys

PHASE, ROOT, PARTITIONS, SEGMENTS, NOFILE = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(
    sys.argv[5])
resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
if os.environ.get("KAFKALOG_CHILD_NO_FSYNC") == "1":
    os.fsync = lambda fd: None  # descriptors are under test, not durability: thousands of rolls without the device

from kafkalog.errors import ResourceExhaustedError  # noqa: E402
from kafkalog.log.config import LogConfig  # noqa: E402
from kafkalog.manager import LogManager  # noqa: E402

DIRS = [os.path.join(ROOT, "d1"), os.path.join(ROOT, "d2")]
CFG = LogConfig.from_properties({"segment.bytes": 1 << 20, "segment.index.bytes": 1024,
                                 "index.interval.bytes": 64})
PROPS = {"log.retention.check.interval.ms": 10**9, "log.flush.offset.checkpoint.interval.ms": 10**9,
         "log.flush.start.offset.checkpoint.interval.ms": 10**9, "file.delete.delay.ms": 0,
         "sanity.check.all.logs.enabled": "false", "num.recovery.threads.per.data.dir": 2}
RECORDS_PER_SEGMENT = 2


def value(p: int, offset: int) -> bytes:
    return b"p%d-o%d-" % (p, offset) + bytes([offset % 251]) * 24


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def read_to_end(m: LogManager, p: int) -> int:
    """Read partition p from its log start to its end; every value checked. Returns the records read."""
    log = m.get_log("t", p)
    offset, end, n = log.log_start_offset, log.log_end_offset, 0
    while offset < end:
        batches = m.read("t", p, offset, 1 << 16)
        assert batches, (p, offset)
        for b in batches:
            for r in b.records():
                if r.offset < offset:
                    continue
                assert r.offset == offset and r.value == value(p, offset), (p, offset, r)
                offset += 1
                n += 1
    return n


def manager() -> LogManager:
    m = LogManager(DIRS, log_config=CFG, properties=PROPS)
    m.startup()
    return m


def facts(m: LogManager, **extra: object) -> None:
    out = {"offline": m.offline_log_dirs, "events": len(m.events), "fds": open_fds(),
           "cache_peak": m.handle_cache.peak, "cache_capacity": m.handle_cache.capacity,
           "evictions": m.handle_cache.evictions, **extra}
    print(json.dumps(out), flush=True)


def create() -> None:
    m = manager()
    max_fds = 0
    for p in range(PARTITIONS):
        m.get_or_create_log("t", p)
        offset = 0
        for s in range(SEGMENTS):
            m.append("t", p, [(b"k", value(p, offset + i)) for i in range(RECORDS_PER_SEGMENT)])
            offset += RECORDS_PER_SEGMENT
            if s < SEGMENTS - 1:
                m.roll("t", p)
        max_fds = max(max_fds, open_fds())
    segments = sum(len(lg.segments) for lg in m.all_logs())
    facts(m, segments=segments, max_fds=max_fds)
    m.shutdown()


def clean() -> None:
    m = manager()
    total = sum(read_to_end(m, p) for p in range(PARTITIONS))
    run = m.start_sanity_checker()
    run.wait()
    states = m.sanity_check_states().values()
    checked = sum(1 for s in states if s.status.value == "checked")
    # one replica moves to the other dir
    src = m.log_dir_of("t", 0)
    target = next(d for d in m.log_dirs if d != src)
    moved = m.alter_replica_log_dir("t", 0, target, wait=True)
    after_move = read_to_end(m, 0)
    # retention: the log start moves past the first 3 segments of every partition, which then go
    for p in range(PARTITIONS):
        m.get_log("t", p).maybe_increment_log_start_offset(3 * RECORDS_PER_SEGMENT)
    m.cleanup_logs()
    m.delete_logs()
    left = sum(len(m.get_log("t", p).segments) for p in range(PARTITIONS))
    after_retention = sum(read_to_end(m, p) for p in range(PARTITIONS))
    facts(m, records=total, checked=checked, move=moved.state, moved_dir=m.log_dir_of("t", 0) == target,
          after_move=after_move, segments_left=left, after_retention=after_retention,
          checker_errors=len(run.errors))
    m.shutdown()


def crash() -> None:
    m = manager()
    for p in range(PARTITIONS):
        log = m.get_log("t", p)
        m.append("t", p, [(b"k", value(p, log.log_end_offset))])
        if p % 2 == 0:
            m.flush("t", p)
    facts(m)
    os._exit(0)  # no shutdown: no clean-shutdown marker, recovery at the next start


def unclean() -> None:
    m = manager()
    records = sum(read_to_end(m, p) for p in range(PARTITIONS))
    ends = [m.get_log("t", p).log_end_offset for p in range(PARTITIONS)]
    facts(m, records=records, ends=sorted(set(ends)))
    m.shutdown()


def exhaust() -> None:
    m = manager()
    read_to_end(m, 1)  # the cache holds this partition's handles now
    held: list[int] = []
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        assert e.errno == errno.EMFILE, e
    # 1) handles in the cache: the open fails, the cache evicts and the retry succeeds
    relieved = read_to_end(m, 2)
    # 2) nothing left to evict: the typed error, the dir stays online
    m.handle_cache.clear()
    while True:  # take back whatever the eviction freed
        try:
            held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            break
    error = None
    try:
        read_to_end(m, 3)
    except ResourceExhaustedError as e:
        error = {"type": type(e).__name__, "errno": e.errno, "retriable": e.retriable}
    offline_during = list(m.offline_log_dirs)
    for fd in held:
        os.close(fd)
    again = read_to_end(m, 3)  # the same call once descriptors are freed
    facts(m, relieved=relieved, error=error, offline_during=offline_during, again=again)
    m.shutdown()


def bigmove() -> None:
    m = manager()
    m.get_or_create_log("big", 0)
    for s in range(SEGMENTS):
        m.append("big", 0, [(b"k", value(0, s))])
        m.roll("big", 0)
    src = m.log_dir_of("big", 0)
    target = next(d for d in m.log_dirs if d != src)
    files = len(os.listdir(os.path.join(src, "big-0")))
    moved = m.alter_replica_log_dir("big", 0, target, wait=True)
    got, offset = [], 0
    while offset < SEGMENTS:
        for b in m.read("big", 0, offset, 1 << 20):
            for r in b.records():
                got.append(r.value)
                offset = r.offset + 1
    facts(m, move=moved.state, error=moved.error, files=files, moved_dir=m.log_dir_of("big", 0) == target,
          intact=got == [value(0, s) for s in range(SEGMENTS)])
    m.shutdown()


{"bigmove": bigmove, "create": create, "clean": clean, "crash": crash, "unclean": unclean, "exhaust": exhaust}[PHASE]()

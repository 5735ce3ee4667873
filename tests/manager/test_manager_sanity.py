"""KIP-263: inactive segments checked lazily (background or first read) instead of at load; corruption found
later is recovered without losing valid records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.log.config import LogConfig
from kafkalog.manager import CheckStatus, LogManager
from kafkalog.names import offset_to_name

CFG = LogConfig.from_properties({"segment.bytes": 1200, "index.interval.bytes": 150})
LAZY = {"sanity.check.all.logs.enabled": "false"}


def _make(tmp_path: Path, partitions: int = 2, appends: int = 80) -> list[Path]:
    dirs = [tmp_path / "a"]
    with LogManager(dirs, log_config=CFG) as m:
        for p in range(partitions):
            m.get_or_create_log("t", p)
        for i in range(appends):
            m.append("t", i % partitions, [(b"k%d" % i, b"v" * 80)])
        assert all(len(lg.segments) >= 5 for lg in m.all_logs())
    return dirs


def _keys(m: LogManager, partition: int) -> list[bytes]:
    log = m.get_log("t", partition)
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batches = m.read("t", partition, offset)
        out.extend(r.key for b in batches for r in b.records())
        offset = batches[-1].last_offset + 1
    return out


def _bases(d: Path, partition: int) -> list[int]:
    return sorted(int(p.stem) for p in (d / f"t-{partition}").glob("*.log"))


def test_lazy_load_touches_only_active_segments(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        for p in range(2):
            log = m.get_log("t", p)
            state = m.sanity_check_state("t", p)
            assert state.status is CheckStatus.PENDING
            assert state.segments_pending == len(log.segments) - 1 and state.segments_checked == 1
            inactive = log.segments.inactive()
            assert not any(s.offset_index.is_loaded or s.time_index.is_loaded for s in inactive)
        m.start_sanity_checker().wait()
        assert {s.status for s in m.sanity_check_states().values()} == {CheckStatus.CHECKED}


def test_eager_load_checks_everything(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG) as m:
        for p in range(2):
            st = m.sanity_check_state("t", p)
            assert st.status is CheckStatus.CHECKED and st.segments_checked == len(m.get_log("t", p).segments)


def test_background_checker_for_a_subset(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        run = m.start_sanity_checker([("t", 0)])
        assert run.wait(60) and run.errors == []
        assert m.sanity_check_state("t", 0).status is CheckStatus.CHECKED
        assert m.sanity_check_state("t", 1).status is CheckStatus.PENDING


def test_first_read_checks_the_segment(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        before = m.sanity_check_state("t", 1)
        m.read("t", 1, 0)
        after = m.sanity_check_state("t", 1)
        assert after.segments_checked > before.segments_checked
        assert after.segments_pending < before.segments_pending


def test_unclean_shutdown_checks_everything_at_load(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    (dirs[0] / ".kafka_cleanshutdown").unlink()
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        assert {s.status for s in m.sanity_check_states().values()} == {CheckStatus.CHECKED}


def test_unclean_load_does_not_check_again_what_recovery_just_rebuilt(tmp_path: Path, monkeypatch) -> None:
    """Segments past the recovery point are rebuilt from their batches at an unclean load; checking them again
    would re-read what recovery just wrote. The flushed ones below the recovery point are still checked."""
    from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint, write_offset_checkpoint
    from kafkalog.segment import log_segment as segment_mod

    dirs = _make(tmp_path)
    (dirs[0] / ".kafka_cleanshutdown").unlink()
    rp_file = dirs[0] / "recovery-point-offset-checkpoint"
    points = read_offset_checkpoint(rp_file)
    bases = _bases(dirs[0], 0)
    # Partition 0 recovers from its third segment on; partition 1 from 0 (every segment recovered).
    points[("t", 0)] = bases[2]
    points[("t", 1)] = 0
    write_offset_checkpoint(rp_file, points)
    checked: list[tuple[str, int]] = []
    real = segment_mod.LogSegment.sanity_check

    def spy(self, *a, **kw):  # type: ignore[no-untyped-def]
        checked.append((self.log_path.parent.name, self.base_offset))
        return real(self, *a, **kw)

    monkeypatch.setattr(segment_mod.LogSegment, "sanity_check", spy)
    with LogManager(dirs, log_config=CFG) as m:
        for p in range(2):
            st = m.sanity_check_state("t", p)
            assert st.status is CheckStatus.CHECKED
            assert st.segments_checked == len(m.get_log("t", p).segments) and st.segments_pending == 0
        assert sorted(checked) == [("t-0", bases[0]), ("t-0", bases[1])]
        assert [r.key for b in m.read("t", 0, 0) for r in b.records()][:1] == [b"k0"]


@pytest.mark.parametrize("via", ["background", "read", "direct-read"])
def test_corrupt_index_in_an_inactive_segment_is_rebuilt(tmp_path: Path, via: str) -> None:
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG) as m:
        expected = _keys(m, 1)
    bases = _bases(dirs[0], 0)
    victim = bases[2]
    index = dirs[0] / "t-0" / f"{offset_to_name(victim)}.index"
    good = index.read_bytes()
    index.write_bytes(good + b"\x01\x02\x03")  # not a whole number of entries: Kafka's sanity check fails
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        before = m.sanity_check_state("t", 0)
        assert before.status is CheckStatus.PENDING
        if via == "background":
            m.start_sanity_checker([("t", 0)]).wait()
        elif via == "read":
            m.read("t", 0, victim)  # lands on the corrupt segment: checked, then earlier ones, then recovered
        else:  # the Log the manager handed out, called directly, follows the same rule
            m.get_log("t", 0).read(victim)
        st = m.sanity_check_state("t", 0)
        assert st.corrupt_segments == (victim,) and st.truncated_bytes == 0
        # Every segment before the corrupt one was checked before the partition was touched again.
        pending = set(_bases(dirs[0], 0)) - set(range(0, victim + 1))
        assert st.segments_pending <= len(pending)
        assert st.status is (CheckStatus.RECOVERED if via == "background" else CheckStatus.PENDING)
        assert len(_keys(m, 0)) == 40 and _keys(m, 1) == expected
    assert index.read_bytes() == good  # rebuilt to exactly what the segment had


def test_garbage_in_an_inactive_log_is_cut_and_later_segments_kept(tmp_path: Path) -> None:
    dirs = _make(tmp_path)
    bases = _bases(dirs[0], 0)
    victim = dirs[0] / "t-0" / f"{offset_to_name(bases[1])}.log"
    size = victim.stat().st_size
    with open(victim, "ab") as f:
        f.write(b"\x00" * 30)
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:
        m.start_sanity_checker().wait()
        st = m.sanity_check_state("t", 0)
        assert st.status is CheckStatus.RECOVERED and st.corrupt_segments == (bases[1],) and st.truncated_bytes == 30
        assert victim.stat().st_size == size
        assert _bases(dirs[0], 0) == bases
        assert len(_keys(m, 0)) == 40


def _open_fds_under(root: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and not os.path.isdir(target) and not target.endswith("/.lock"):
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to count descriptors")
@pytest.mark.parametrize("props", [LAZY, {}], ids=["lazy", "eager"])
def test_startup_holds_no_descriptor_per_partition_and_active_segments_resume(tmp_path: Path, props: dict) -> None:
    """Python's mmap keeps a descriptor per mapping: a loaded partition must not keep its active segment's
    three open (thousands of partitions would exhaust the fd limit). The active segment resumes with its entries
    and preallocated room, and shutdown still trims its indexes."""
    dirs = _make(tmp_path)
    with LogManager(dirs, log_config=CFG, properties=props) as m:
        assert _open_fds_under(tmp_path) == []
        log = m.get_log("t", 0)
        active = log.active_segment
        before = len(log.segments)
        entries = active.offset_index.entry_count  # maps it again, with the count it had
        assert 0 < entries < active.offset_index.max_entries
        m.append("t", 0, [(b"after", b"v" * 80)])
        assert len(log.segments) == before or log.active_segment.base_offset > active.base_offset
        assert _keys(m, 0)[-1] == b"after"
    for p in (0, 1):  # trimmed at shutdown: a few entries, not the 10 MiB preallocation
        for idx in [*(dirs[0] / f"t-{p}").glob("*.index"), *(dirs[0] / f"t-{p}").glob("*.timeindex")]:
            assert idx.stat().st_size < 4096, idx
    with LogManager(dirs, log_config=CFG, properties=LAZY) as m:  # a clean restart finds nothing to complain about
        m.start_sanity_checker().wait()
        assert {s.status for s in m.sanity_check_states().values()} == {CheckStatus.CHECKED}
        assert _keys(m, 0)[-1] == b"after"

"""``kafkalog clean`` when the input is damaged or the run is stopped, held to Kafka's loader (``kafka-oracle``):

* a batch failing its CRC anywhere a pass reads refuses the partition, byte for byte and mtime for mtime untouched
  (on both cleaner paths), instead of rewriting the damage under a fresh CRC;
* a pass Kafka's cleaner refuses too, Ctrl-C (exit 130) and kill -9 at every step leave a dir that Kafka's next
  load takes correctly: real child processes are signalled, then Kafka loads the dir and checks it;
* the cleaner's config: a load factor above 1 cleans as Kafka does, a read buffer that cannot grow is refused.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.clean_shutdown import CLEAN_SHUTDOWN_FILE_NAME, write_clean_shutdown
from kafkalog.records.reader import read_batches
from tests.cleaner.test_cleaner_properties import _visible
from tests.cleaner_cases import CLEANER_PATHS, cleaner_path, compacted_cases, prepare_case
from tests.cleaner_random import write_legacy_log
from tests.conftest import needs_golden
from tests.oracle import needs_oracle, run_oracle

pytestmark = needs_golden
CASES = compacted_cases()


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _case_args(name: str) -> list[str]:
    case = CASES[name]
    args = [a for k, v in case["cleanConfig"].items() for a in ("--config", f"{k}={v}")]
    return [*args, "--now-ms", str(case["nowMs"])]


def _tree(root: Path) -> dict[str, str]:
    """Every file under root (but the lock file, which a writer creates) with its bytes and mtime."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def _flip_in_last_batch(segment: Path) -> tuple[int, int]:
    """Flip a byte of the last record's value in the segment's last batch; (its base offset, its position)."""
    last = list(read_batches(segment.read_bytes()))[-1]
    data = bytearray(segment.read_bytes())
    data[last.position + last.size_in_bytes - 3] ^= 0x01
    segment.write_bytes(bytes(data))
    return last.base_offset, last.position


def _leftovers(part: Path) -> list[str]:
    return [n for n in os.listdir(part) if n.endswith((".cleaned", ".swap", ".deleted"))]


def _broker_checkpoints(part: Path) -> None:
    """The recovery point and log start a clean broker shutdown leaves (recovery point = log end)."""
    topic, _, p = part.name.rpartition("-")
    end = max(b.last_offset for f in part.glob("*.log") for b in read_batches(f.read_bytes())) + 1
    (part.parent / "recovery-point-offset-checkpoint").write_text(f"0\n1\n{topic} {p} {end}\n")
    (part.parent / "log-start-offset-checkpoint").write_text(f"0\n1\n{topic} {p} 0\n")


# --- a batch failing its CRC ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CLEANER_PATHS)
@pytest.mark.parametrize(("name", "segment"), [
    ("compact-groups-size", "00000000000000000065.log"),  # the dirty range: met while building the map
    ("compact-tombstones-pass2", "00000000000000000041.log"),  # below the first dirty offset: only groups read it
])
def test_a_batch_failing_its_crc_refuses_the_partition_untouched(name: str, segment: str, path: str,
                                                                 tmp_path: Path) -> None:
    part = prepare_case(CASES[name], tmp_path)
    base, position = _flip_in_last_batch(part / segment)
    write_clean_shutdown(part.parent, 1)  # after a clean shutdown the load reads nothing: the pass meets it
    assert run("verify", part).exit_code == 1
    before = _tree(part.parent)
    with cleaner_path(path):
        result = run("clean", part, *_case_args(name), "--json")
    assert result.exit_code == 1, result.output
    events = [json.loads(x) for x in result.output.splitlines() if x.startswith("{")]
    (error,) = [e for e in events if e["type"] == "error"]
    message = error["message"]
    assert str(part / segment) in message and f"offsets {base}-" in message and f"position {position}" in message
    assert "CRC" in message and "kafkalog recover --salvage" in message
    assert _tree(part.parent) == before  # nothing rewritten: no segment, no index, no checkpoint, the marker back
    assert run("verify", part).exit_code == 1  # the damage is still there to see


# --- failures and signals: Kafka's next load ---------------------------------------------------------------------


def _child(args: list[str], point: str, w: int) -> None:
    """Run ``kafkalog clean`` in this (forked) process, pausing once at ``point`` for the parent's signal."""
    import kafkalog.cleaner.cleaner as cleaner_mod
    from kafkalog.log.log import Log

    def pause() -> None:
        os.write(w, b"x")
        time.sleep(1.0)  # SIGKILL ends the process here; after SIGINT it goes on

    if point == "open":
        opened = Log.open.__func__

        def open_then_pause(cls, *a, **k):
            log = opened(cls, *a, **k)
            pause()
            return log
        Log.open = classmethod(open_then_pause)
    elif point == "restore":
        from kafkalog_cli import clean_safety

        restore = clean_safety.MarkerHold.restore

        def pause_then_restore(self):
            pause()
            restore(self)
        clean_safety.MarkerHold.restore = pause_then_restore
    else:
        swap = cleaner_mod.replace_segments
        hit = [False]

        def swap_pausing(log, new, old, *, step=None):
            def hook(name: str) -> None:
                if step is not None:
                    step(name)
                if name.startswith(point) and not hit[0]:
                    hit[0] = True
                    pause()
            return swap(log, new, old, step=hook)
        cleaner_mod.replace_segments = swap_pausing
    try:
        main(args, standalone_mode=True)
    except SystemExit as exc:
        os._exit(exc.code if isinstance(exc.code, int) else 1)
    os._exit(0)


def _signalled_clean(args: list[str], point: str, sig: int) -> int:
    """A child process cleaning with ``args``, sent ``sig`` when it reaches ``point``; its exit code."""
    r, w = os.pipe()
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(args, point, w))
    proc.start()
    os.close(w)
    try:
        assert os.read(r, 1) == b"x", f"the child never reached {point}"
        os.kill(proc.pid, sig)
        proc.join(60)
    finally:
        os.close(r)
        if proc.is_alive():
            proc.kill()
    return proc.exitcode


POINTS = ["open", "cleaned-written", "renamed-swap", "deleted-", "renamed-log", "done", "restore"]


@needs_oracle
def test_kill_and_ctrl_c_at_every_step_leave_a_dir_kafka_loads(tmp_path: Path) -> None:
    name = "compact-groups-size"  # 14 segments cleaned in several groups
    pristine = prepare_case(CASES[name], tmp_path / "pristine")
    _broker_checkpoints(pristine)
    write_clean_shutdown(pristine.parent, 7)
    marker = (pristine.parent / CLEAN_SHUTDOWN_FILE_NAME).read_bytes()
    before = _visible(pristine)
    done = tmp_path / "done"
    shutil.copytree(pristine.parent, done)
    assert run("clean", done / pristine.name, *_case_args(name)).exit_code == 0
    after = _visible(done / pristine.name)
    assert after != before
    killed, interrupted = [], []
    for point in POINTS:
        for sig in (signal.SIGKILL, signal.SIGINT):
            work = tmp_path / f"{point.strip('-')}-{int(sig)}"
            shutil.copytree(pristine.parent, work)
            part = work / pristine.name
            code = _signalled_clean(["clean", str(part), *_case_args(name)], point, sig)
            if sig == signal.SIGKILL:
                assert code == -signal.SIGKILL
                # the marker was taken away before the logs were opened: Kafka's next load is an unclean one
                assert not (work / CLEAN_SHUTDOWN_FILE_NAME).exists(), point
                killed.append(part)
            else:
                assert code == 130, point
                assert (work / CLEAN_SHUTDOWN_FILE_NAME).read_bytes() == marker, point  # closed cleanly
                assert _leftovers(part) == [], point
                interrupted.append(part)
    for part in killed:
        loaded = json.loads(run_oracle("load", part.parent, "--in-place").stdout)
        (p,) = loaded["partitions"]
        assert p["kafkaException"] is None and p["logEndOffset"] == 71, (part, p)
        assert loaded["cleanShutdownMarker"] is False
        # what Kafka's load made of it: nothing altered, nothing lost that the finished pass keeps
        got = _visible(part)
        assert all(before[o] == r for o, r in got.items()) and all(got.get(o) == r for o, r in after.items()), part
    # what Kafka's load left after a kill, and the dir Ctrl-C left as it is: Kafka's checks pass
    checked = run_oracle("verify", *killed, *interrupted)
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert sum(line.startswith("OK") for line in checked.stdout.splitlines()) == len(killed) + len(interrupted)


@needs_oracle
def test_a_pass_kafka_refuses_leaves_no_leftover_and_trimmed_indexes(tmp_path: Path) -> None:
    """A magic 1 log whose pass ends on a batch emptied of its keyless record: Kafka's cleaner throws ("empty
    batches are only supported for magic v2 and above") after the earlier groups were swapped in."""
    config = {"cleanup.policy": "compact", "segment.bytes": "700", "min.cleanable.dirty.ratio": "0.01"}
    part = tmp_path / "logs" / "legacy1-0"
    last = _legacy_log_ending_keyless(part, config)
    write_clean_shutdown(part.parent, 3)
    kafka = json.loads(run_oracle("clean", part, *[a for k, v in config.items() for a in ("--config", f"{k}={v}")],
                                  "--now-ms", str(last + 100_000)).stdout)
    assert "magic v2" in kafka["exception"]
    result = run("clean", part, *[a for k, v in config.items() for a in ("--config", f"{k}={v}")],
                 "--now-ms", last + 100_000)
    assert result.exit_code == 1 and "magic v2" in result.output
    assert _leftovers(part) == [] and (part.parent / CLEAN_SHUTDOWN_FILE_NAME).exists()
    assert all(os.path.getsize(f) < 1 << 20 for f in part.glob("*index"))
    checked = run_oracle("verify", part)
    assert checked.returncode == 0, checked.stdout[-3000:]


def _legacy_log_ending_keyless(part: Path, config: dict[str, str]) -> int:
    from kafkalog.log.config import LogConfig
    from kafkalog.log.log import Log
    from kafkalog.records.compression import CompressionType
    from kafkalog.records.legacy import build_legacy_batch
    from kafkalog.records.record import Record

    last = write_legacy_log(part, 8, 1, config)
    log = Log.open(part, LogConfig.from_properties(config), clock=lambda: last + 10)
    try:
        end = log.log_end_offset
        for i, key in enumerate((None, b"a")):  # the keyless batch ends its segment; one more after the roll
            ts = last + 10 * (i + 1)
            log.append_as_follower(build_legacy_batch([Record(end + i, ts, key, b"v")], magic=1,
                                                      base_offset=end + i, compression=CompressionType.NONE,
                                                      timestamp=ts))
            if key is None:
                log.roll()
        log.flush()
    finally:
        log.close()
    return last


# --- the cleaner's broker config ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CLEANER_PATHS)
def test_a_load_factor_above_one_cleans_as_kafka(path: str, tmp_path: Path) -> None:
    name = "compact-updates-none"
    part = prepare_case(CASES[name], tmp_path)
    with cleaner_path(path):
        result = run("clean", part, *_case_args(name), "--config", "log.cleaner.io.buffer.load.factor=1.5", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output.splitlines()[0])
    assert doc["cleaned"] and doc["endOffset"] == CASES[name]["endOffset"]


@pytest.mark.parametrize("path", CLEANER_PATHS)
def test_a_full_map_under_a_load_factor_above_one_is_refused_as_kafka(path: str, tmp_path: Path) -> None:
    name = "compact-partial"  # 40 slots; a load factor of 2 lets the pass try a 41st key, Kafka's put refuses it
    part = prepare_case(CASES[name], tmp_path)
    write_clean_shutdown(part.parent, 1)
    before = _tree(part.parent)
    with cleaner_path(path):
        result = run("clean", part, *_case_args(name), "--config", "log.cleaner.dedupe.buffer.size=960",
                     "--config", "log.cleaner.io.buffer.load.factor=2")
    assert result.exit_code == 1 and "offset map is full (40 slots)" in result.output
    assert _tree(part.parent) == before  # refused before anything was swapped in: put back as it was


def test_a_read_buffer_that_cannot_grow_is_refused(tmp_path: Path) -> None:
    part = prepare_case(CASES["compact-updates-none"], tmp_path)
    before = _tree(part)
    for size in ("0", "1"):
        result = run("clean", part, "--config", f"log.cleaner.io.buffer.size={size}")
        assert result.exit_code == 2 and "log.cleaner.io.buffer.size" in result.output and "at least 2" in result.output
    assert _tree(part) == before
    assert run("clean", part, "--config", "log.cleaner.io.buffer.size=2").exit_code == 0

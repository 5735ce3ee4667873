"""A crash at every step of the cleaner's swap (``.cleaned`` written, renamed ``.swap``, each source renamed
``.deleted``, ``.swap`` dropped), as a killed process: the next (unclean) load finishes or undoes it as Kafka's
loader does, leaving no leftover file, no repeated offset, no altered record and every record the finished pass
keeps."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path

from kafkalog.cleaner import clean_partition
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.reader import read_batches
from tests.cleaner.test_cleaner_properties import _visible
from tests.cleaner_cases import compacted_cases, prepare_case
from tests.conftest import needs_golden

CASE = "compact-groups-size"  # 14 segments cleaned in groups of several


def _clean(part: Path, config: dict, now: int, crash_at: int | None, steps: list[str] | None = None) -> None:
    counter = [0]

    def step(name: str) -> None:
        if steps is not None:
            steps.append(name)
        if counter[0] == crash_at:
            os._exit(17)  # the process dies here: no cleanup, no close
        counter[0] += 1

    log = Log.open(part, LogConfig.from_properties(config), clock=lambda: now)
    clean_partition(log, checkpointed=None, now_ms=now, step=step)
    log.close()


def _leftovers(part: Path) -> list[str]:
    return [n for n in os.listdir(part) if n.endswith((".cleaned", ".swap", ".deleted"))]


@needs_golden
def test_a_crash_at_every_step_of_the_swap_recovers(tmp_path: Path) -> None:
    case = compacted_cases()[CASE]
    config, now = case["cleanConfig"], case["nowMs"]
    pristine = prepare_case(case, tmp_path / "pristine")
    before = _visible(pristine)
    done = tmp_path / "done"
    shutil.copytree(pristine.parent, done)
    steps: list[str] = []
    _clean(done / pristine.name, config, now, None, steps)
    after = _visible(done / pristine.name)
    assert after != before and steps.count("cleaned-written") >= 2  # several groups, each swapped
    assert steps[0] == "cleaned-written"
    ctx = multiprocessing.get_context("fork")
    for i, name in enumerate(steps):
        work = tmp_path / f"crash{i}"
        shutil.copytree(pristine.parent, work)
        part = work / pristine.name
        proc = ctx.Process(target=_clean, args=(part, config, now, i))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 17, f"no crash at step {i} ({name})"
        log = Log.open(part, LogConfig.from_properties(config), clean_shutdown=False, clock=lambda: now)
        log.close()
        assert _leftovers(part) == [], f"crash at {name}: leftovers {_leftovers(part)}"
        offsets = _offsets_in_order(part)
        assert offsets == sorted(set(offsets)), f"crash at {name}: offsets repeat or go back"
        got = _visible(part)
        # nothing is altered, nothing the finished pass keeps is lost; a group whose .swap existed is cleaned as
        # far as the cleaned segment reaches (the loader replaces the sources below the .swap's next offset)
        assert all(before[o] == r for o, r in got.items()), f"crash at step {i} ({name})"
        assert all(got.get(o) == r for o, r in after.items()), f"crash at step {i} ({name}) lost records"
        if i == 0:
            assert got == before  # crashed before the first .swap existed


def _offsets_in_order(part: Path) -> list[int]:
    out = []
    for name in sorted(n for n in os.listdir(part) if n.endswith(".log")):
        out.extend(b.last_offset for b in read_batches((part / name).read_bytes()))
    return out


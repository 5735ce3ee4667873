"""KIP-858 directory assignments: ``assignments()``, ``check_assignments(expected)`` with each mismatch kind, and
``kafkalog dirs assignments``."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.errors import KafkaStorageError
from kafkalog.log.config import LogConfig
from kafkalog.manager import LogManager
from kafkalog.manager.assignments import DirState, MismatchKind, compare_assignments, parse_expected
from kafkalog.names import (
    LOST_DIRECTORY_ID,
    MIGRATING_DIRECTORY_ID,
    UNASSIGNED_DIRECTORY_ID,
    random_directory_id,
)

CFG = LogConfig.from_properties({"segment.bytes": 1500, "index.interval.bytes": 200})


def _kinds(mismatches) -> dict[tuple[str, int], set[MismatchKind]]:
    out: dict[tuple[str, int], set[MismatchKind]] = {}
    for mm in mismatches:
        out.setdefault((mm.topic, mm.partition), set()).add(mm.kind)
    return out


def _place(m: LogManager, topic: str, partition: int, log_dir: Path) -> None:
    m.get_or_create_log(topic, partition)
    if m.log_dir_of(topic, partition) != str(log_dir):
        assert m.alter_replica_log_dir(topic, partition, str(log_dir), wait=True).state == "completed"


@pytest.fixture
def three_dirs(tmp_path: Path):
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = LogManager(dirs, log_config=CFG)
    m.startup()
    yield m, dirs
    m.shutdown()


def test_assignments_map_current_logs_to_directory_ids(three_dirs) -> None:
    m, (a, b, c) = three_dirs
    _place(m, "t", 0, a)
    _place(m, "t", 1, b)
    ids = {d: m.directory_id(d) for d in (a, b, c)}
    assert len(set(ids.values())) == 3
    assert m.assignments() == {("t", 0): ids[a], ("t", 1): ids[b]}
    assert m.check_assignments({("t", 0): ids[a], ("t", 1): ids[b]}) == []


def test_every_mismatch_kind(three_dirs) -> None:
    m, (a, b, c) = three_dirs
    ida, idb, idc = (m.directory_id(d) for d in (a, b, c))
    for topic in ("ok", "other", "unassigned", "migrating", "unknown", "stray", "moving", "lost-live"):
        _place(m, topic, 0, a)
    _place(m, "on-c", 0, c)
    _place(m, "dies", 0, c)

    # A move interrupted after its future log opened: the future stays (FUTURE_PENDING).
    def stop_after_open(key, step):
        if key == ("moving", 0) and step == "future_opened":
            raise RuntimeError("test: interrupt the move")

    m._replica_mover().step_hook = stop_after_open
    progress = m.alter_replica_log_dir("moving", 0, str(b), wait=True)
    m._replica_mover().step_hook = None
    assert progress.state == "failed" and m.get_log("moving", 0, is_future=True) is not None

    # c fails at run time through a real I/O error.
    shutil.rmtree(c / "dies-0")
    with pytest.raises(KafkaStorageError):
        m.roll("dies", 0)
    assert m.offline_log_dirs == [str(c)]

    expected = {
        ("ok", 0): ida,
        ("other", 0): idb,                      # lives in a
        ("on-c", 0): idc,                       # c is offline
        ("lost", 0): LOST_DIRECTORY_ID,         # nowhere, lost
        ("lost-live", 0): LOST_DIRECTORY_ID,    # metadata thinks it lost, but a has it
        ("unknown", 0): random_directory_id(),  # a dir id this broker does not have
        ("moving", 0): ida,                     # a future replica in b
        ("missing", 0): idb,                    # nowhere
        ("unassigned", 0): UNASSIGNED_DIRECTORY_ID,
        ("migrating", 0): MIGRATING_DIRECTORY_ID,
        ("new", 0): UNASSIGNED_DIRECTORY_ID,    # not placed yet, nowhere
    }
    got = m.check_assignments(expected)
    kinds = _kinds(got)
    assert kinds == {
        ("other", 0): {MismatchKind.OTHER_DIR},
        ("on-c", 0): {MismatchKind.OFFLINE_DIR},
        ("lost", 0): {MismatchKind.OFFLINE_DIR},
        ("lost-live", 0): {MismatchKind.OTHER_DIR},
        ("unknown", 0): {MismatchKind.UNKNOWN_DIR},
        ("moving", 0): {MismatchKind.FUTURE_PENDING},
        ("missing", 0): {MismatchKind.MISSING},
        ("unassigned", 0): {MismatchKind.ASSIGNMENT_PENDING},
        ("migrating", 0): {MismatchKind.ASSIGNMENT_PENDING},
        ("new", 0): {MismatchKind.MISSING},
        ("stray", 0): {MismatchKind.NOT_ASSIGNED},
    }
    assert ("dies", 0) not in kinds  # offline and not expected: nothing live to report
    by = {(mm.topic, mm.partition): mm for mm in got}
    assert by[("other", 0)].expected_dir_id == idb and by[("other", 0)].actual_dir_id == ida
    assert by[("on-c", 0)].expected_dir_id == idc and "replica offline" in by[("on-c", 0)].detail
    assert "wait for reassignment" in by[("unknown", 0)].detail
    assert by[("moving", 0)].actual_dir_id == ida
    assert by[("stray", 0)].expected_dir_id is None and by[("stray", 0)].actual_dir_id == ida
    # The future's own dir as the expected one: only the pending move is reported.
    assert _kinds(m.check_assignments({("moving", 0): idb})).get(("moving", 0)) == {MismatchKind.FUTURE_PENDING}


def test_compare_is_pure_and_covers_unknown_ids() -> None:
    ida, idc = random_directory_id(), random_directory_id()
    a = DirState("/a", ida, True, current={("t", 0)})
    off = DirState("/c", idc, False, current={("t", 1)})
    got = compare_assignments([a, off], {("t", 0): ida, ("t", 1): ida})
    assert [(mm.kind, mm.actual_dir_id) for mm in got] == [(MismatchKind.OTHER_DIR, idc)]


def test_parse_expected_shapes() -> None:
    dir_id = random_directory_id()
    assert parse_expected({"t-0": dir_id}) == {("t", 0): dir_id}
    assert parse_expected([{"topic": "t", "partition": 1, "directoryId": dir_id}]) == {("t", 1): dir_id}
    assert parse_expected({"partitions": [{"topic": "t", "partition": 2, "directoryId": dir_id}]}) == {
        ("t", 2): dir_id}
    for bad in ({"t-0": 5}, {"t-0": "nope"}, [{"topic": "t"}], 3, {"t-0.0123456789abcdef0123456789abcdef-future": dir_id}):
        with pytest.raises(ValueError):
            parse_expected(bad)


def _cli(*args) -> tuple[int, str]:
    # The CLI quiets the library's "kafkalog" logger process-wide; put it back so later caplog tests still see it.
    logger = logging.getLogger("kafkalog")
    level = logger.level
    try:
        r = CliRunner().invoke(main, [str(x) for x in args], catch_exceptions=False)
    finally:
        logger.setLevel(level)
    return r.exit_code, r.stdout


def test_cli_assignments(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b], log_config=CFG) as m:
        _place(m, "t", 0, a)
        _place(m, "t", 1, b)
        ida, idb = m.directory_id(a), m.directory_id(b)
    code, out = _cli("dirs", "assignments", a, b, "--json")
    assert code == 0
    doc = json.loads(out)
    assert {(r["topic"], r["partition"]): r["directoryId"] for r in doc["assignments"]} == {
        ("t", 0): ida, ("t", 1): idb}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"t-0": ida, "t-1": idb}))
    assert _cli("dirs", "assignments", a, b, "--expected", good)[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"t-0": idb, "t-1": idb, "t-2": random_directory_id()}))
    code, out = _cli("dirs", "assignments", a, b, "--expected", bad, "--json")
    assert code == 1
    kinds = {(x["topic"], x["partition"]): x["kind"] for x in json.loads(out)["mismatches"]}
    assert kinds == {("t", 0): "found_in_other_dir", ("t", 2): "assigned_to_unknown_dir"}
    code, out = _cli("dirs", "assignments", a, b, "--expected", bad)
    assert code == 1 and "mismatch: found_in_other_dir t-0" in out
    # An unreadable dir counts as offline; without its meta.properties its id is unknown too.
    b_away = tmp_path / "b-away"
    b.rename(b_away)
    b.write_text("disk gone")
    code, out = _cli("dirs", "assignments", a, b, "--expected", good, "--json")
    assert code == 1
    assert {x["kind"] for x in json.loads(out)["mismatches"]} == {"assigned_to_unknown_dir"}
    assert json.loads(out)["logDirs"][1]["online"] is False
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert _cli("dirs", "assignments", a, "--expected", garbage)[0] == 2

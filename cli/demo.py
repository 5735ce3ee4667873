"""``kafkalog demo``: the library's main job end to end on a throwaway layout, narrated step by step.

1. a "broker" process starts a LogManager over three log dirs in a temp dir, creates partitions (placed across the
   dirs), appends records, flushes some of them, and then dies with ``os._exit`` (a real crash: no clean-shutdown
   marker, recovery points behind the log end);
2. the tail of one partition's active segment is torn (its last bytes never reached the disk) and one log dir is
   made unusable (its path now holds a file, as a dead mount would);
3. a new LogManager starts: the failed dir goes offline (its listener event is printed), the other dirs run
   Kafka's unclean-shutdown recovery, which cuts the torn batch;
4. more records are appended, the manager shuts down cleanly, and ``kafkalog verify`` checks the surviving dirs;
5. with pyspark importable, the Spark validation job runs on ``local[*]`` over the same dirs.

The crash happens in a child process so the lock, the marker and the checkpoints are exactly what a crashed
broker leaves behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import click

import kafkalog.spark as kafkalog_spark  # its functions import pyspark when called
from kafkalog.log.config import LogConfig

from .errors import EXIT_CORRUPT, EXIT_OK, CliState, CommandError
from .output import Line, Output, Simple, make_output

TOPICS = {"orders": 3, "payments": 2}
RECORDS_PER_PARTITION = 200


@dataclass
class _Narrator:
    """The demo's lines: ``[n] step`` headings and indented notes, or ``{"type": "step"|"info", "step", "message"}``
    objects under --json."""

    out: Output
    step: int = 0

    def heading(self, n: int, text: str) -> None:
        self.step = n
        if self.out.is_json:
            self.out.emit(Line(text, kind="step", extra={"step": n}))
        else:
            self.out.emit(Line(f"\n[{n}] {text}"))

    def info(self, text: str) -> None:
        if self.out.is_json:
            self.out.emit(Line(text, kind="info", extra={"step": self.step}))
        else:
            self.out.emit(Line(f"    {text}"))


@click.command()
@click.option(
    "--dir", "base", type=click.Path(path_type=str), default=None, help="Work here (kept) instead of a temp dir."
)
@click.option("--keep", is_flag=True, help="Keep the temp dir and print its path.")
@click.option("--no-spark", is_flag=True, help="Skip the Spark step even when pyspark is installed.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per step and note, and a summary.")
@click.pass_obj
def demo(state: CliState | None, base: str | None, keep: bool, no_spark: bool, json_mode: bool) -> None:
    """Create a small multi-dir layout, crash, lose a disk, recover, verify (and validate with Spark)."""
    state = state or CliState()
    say = _Narrator(make_output(json_mode=json_mode))
    verify_code: int | None = None
    spark_code: int | None = None
    root = os.path.abspath(base) if base else tempfile.mkdtemp(prefix="kafkalog-demo-")
    os.makedirs(root, exist_ok=True)
    dirs = [os.path.join(root, f"data{i}") for i in range(1, 4)]
    started = time.monotonic()
    code = EXIT_OK
    try:
        say.heading(1, f"Broker process: LogManager over {len(dirs)} log dirs in {root}; create, append, then crash")
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import kafkalog_cli.main; from kafkalog_cli.demo import broker_phase; broker_phase()",
                json.dumps(dirs),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 17:
            raise CommandError(f"the broker phase failed: {result.stderr.strip().splitlines()[-1:]}")
        placed = json.loads(result.stdout.strip().splitlines()[-1])
        for tp, d in sorted(placed.items()):
            say.info(f"{tp} -> {os.path.basename(d)}")
        say.info("process killed with os._exit: no .kafka_cleanshutdown marker was written")

        say.heading(2, "Damage: tear the tail of one active segment, and fail a disk")
        victim_tp, victim_dir = _pick_victim(placed, dirs)
        torn = _tear_tail(os.path.join(victim_dir, victim_tp))
        say.info(f"{victim_tp}: cut {torn[1]} bytes off {os.path.basename(torn[0])} (a write that never reached disk)")
        failed = next(d for d in dirs if d != victim_dir)
        lost = sorted(tp for tp, d in placed.items() if d == failed)
        shutil.move(failed, failed + ".dead")
        with open(failed, "w") as f:
            f.write("this disk is gone\n")
        say.info(f"{os.path.basename(failed)} is no longer a directory (holding {', '.join(lost) or 'no partitions'})")

        say.heading(3, "Restart: a new LogManager loads the dirs (unclean shutdown: recovery runs)")
        summary = _restart(dirs, placed, victim_tp)
        for line in summary:
            say.info(line)

        say.heading(4, "Verify the surviving log dirs (kafkalog verify)")
        live = [d for d in dirs if d != failed]
        verify = subprocess.run(
            [sys.executable, "-c", "from kafkalog_cli.main import main; main()", "--quiet", "verify", *live],
            capture_output=True,
            text=True,
            check=False,
        )
        for line in verify.stdout.strip().splitlines()[-3:]:
            say.info(line)
        verify_code = verify.returncode
        say.info(f"verify exit code: {verify.returncode}")
        if verify.returncode != 0:
            code = EXIT_CORRUPT

        say.heading(5, "Spark validation on local[*]")
        if no_spark:
            say.info("skipped (--no-spark)")
        elif not _spark_available():
            say.info("skipped: pyspark is not installed (pip install 'kafkalog[spark]')")
        else:
            out_dir = os.path.join(root, "spark-report")
            rc = kafkalog_spark.run_validation(live, out_dir, "local[*]", **({"json_mode": True} if json_mode else {}))
            spark_code = rc
            say.info(f"reports in {out_dir}; exit code {rc}")
            if rc != 0:
                code = max(code, rc)
        say.info(f"done in {time.monotonic() - started:.1f}s")
    finally:
        kept = not (base is None and not keep)
        if not kept:
            shutil.rmtree(root, ignore_errors=True)
        elif not json_mode:
            click.echo(f"\nFiles kept in {root}")
    if json_mode:
        say.out.emit(Simple("", {"ok": code == EXIT_OK, "exitCode": code, "verifyExitCode": verify_code,
                                 "sparkExitCode": spark_code, "dir": root if kept else None}, type="summary"))
    click.get_current_context().exit(code)


def _spark_available() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


def broker_phase() -> None:
    """Run in a child process: create and fill partitions, flush half of them, then die without shutdown."""
    from kafkalog.manager.log_manager import LogManager

    dirs = json.loads(sys.argv[1])
    config = LogConfig.from_properties({"segment.bytes": 16384, "index.interval.bytes": 1024})
    manager = LogManager(dirs, log_config=config, properties={"node.id": 1, "cluster.id": "a2Fma2Fsb2dkZW1vMDAwMQ"})
    manager.startup()
    placed = {}
    for topic, partitions in TOPICS.items():
        for p in range(partitions):
            log = manager.get_or_create_log(topic, p)
            placed[f"{topic}-{p}"] = manager.log_dir_of(topic, p)
            for i in range(0, RECORDS_PER_PARTITION, 10):
                batch = [(f"key-{i + j}".encode(), f"{topic}-{p} value {i + j} ".encode() * 3) for j in range(10)]
                manager.append(topic, p, batch)
            if p % 2 == 0:
                manager.flush(topic, p)
            del log
    manager.checkpoint_recovery_offsets()
    print(json.dumps(placed), flush=True)
    os._exit(17)  # a crash: no shutdown, no marker, no final checkpoints


def _pick_victim(placed: dict[str, str], dirs: list[str]) -> tuple[str, str]:
    for tp, d in sorted(placed.items()):
        if d == dirs[0]:
            return tp, d
    tp = sorted(placed)[0]
    return tp, placed[tp]


def _tear_tail(pdir: str) -> tuple[str, int]:
    logs = sorted(n for n in os.listdir(pdir) if n.endswith(".log"))
    path = os.path.join(pdir, logs[-1])
    size = os.path.getsize(path)
    cut = min(37, size)
    with open(path, "r+b") as f:
        f.truncate(size - cut)
    return path, cut


def _restart(dirs: list[str], placed: dict[str, str], victim: str) -> list[str]:
    from kafkalog.manager.log_manager import LogManager

    lines: list[str] = []
    events = []
    config = LogConfig.from_properties({"segment.bytes": 16384, "index.interval.bytes": 1024})
    manager = LogManager(dirs, log_config=config, properties={"node.id": 1, "cluster.id": "a2Fma2Fsb2dkZW1vMDAwMQ"})
    manager.add_listener(events.append)
    # The placement from step 1 plays the cluster metadata: a dir that fails before it can be listed still
    # reports the partitions it held (event, OfflineReplicaCount).
    manager.expect_partitions({(tp.rsplit("-", 1)[0], int(tp.rsplit("-", 1)[1])): d for tp, d in placed.items()})
    started = time.monotonic()
    manager.startup()
    try:
        lines.append(f"startup took {time.monotonic() - started:.2f}s")
        for ev in events or manager.events:
            parts = ", ".join(f"{t}-{p}" for t, p in ev.partitions) or "none"
            lines.append(f"offline: {os.path.basename(ev.log_dir)} (cause: {ev.cause}); partitions lost: {parts}")
        lines.append(f"live dirs: {', '.join(os.path.basename(d) for d in manager.live_log_dirs)}")
        lines.append(f"offline dirs: {', '.join(os.path.basename(d) for d in manager.offline_log_dirs)}")
        for log in sorted(manager.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
            tp = f"{log.topic}-{log.partition}"
            actions = [a for a, _ in getattr(log, "load_actions", [])]
            note = f" (recovery: {', '.join(sorted(set(actions)))})" if actions else ""
            lines.append(f"{tp}: log end offset {log.log_end_offset}{note}")
        topic, p = victim.rsplit("-", 1)
        if manager.get_log(topic, int(p)) is not None:
            info = manager.append(topic, int(p), [(b"after-restart", b"appended after recovery")])
            lines.append(f"appended to {victim} at offset {info.first_offset} after recovery")
        metrics = manager.metrics()
        lines.append(
            "metrics: OfflineLogDirectoryCount="
            f"{metrics.get('OfflineLogDirectoryCount')} OfflineReplicaCount={metrics.get('OfflineReplicaCount')}"
        )
    finally:
        manager.shutdown()
    lines.append("clean shutdown: .kafka_cleanshutdown written in the live dirs")
    return lines

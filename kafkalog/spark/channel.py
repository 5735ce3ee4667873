"""What the DataSource's tasks tell the driver: a corrupt batch that must fail the job, and what ``skip`` dropped.

A Python task can only fail by raising, and Spark retries every failed task up to ``spark.task.maxFailures`` times
(4 on a cluster): its scheduler gives up at once only for two JVM exception classes, never for a
``PythonException``. Corruption is deterministic, so the retries re-read the same bytes to fail the same way. The
driver therefore listens on a small TCP socket (:class:`DriverChannel`, started by ``register(spark)``; its address
and a random token travel with the registered DataSource class). A task that meets a corrupt batch under
``onCorrupt=fail`` sends the segment, position and reason; the driver cancels the task's stage with that reason
(``SparkContext.cancelStage``), so the job fails after this one attempt with
``Job N cancelled because kafkalog: CorruptRecordError: ...``; the task waits to be killed, and raises as before if
that does not happen (no channel: a session the source was not registered with by :func:`register`, or executors
that cannot reach the driver; Spark then retries as usual).

Under ``onCorrupt=skip`` each task reports what it dropped; the driver logs one warning per report on the
``kafkalog`` logger and keeps the totals (:func:`skipped_totals`). ``metricsDir`` lines travel the same way and are
written by the driver, so a local ``metricsDir`` is the driver's, not each executor host's.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import socketserver
import threading
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["ChannelAddress", "DriverChannel", "driver_channel", "fail_job", "report", "skipped_totals",
           "warn_unreachable", "write_metrics_line"]

log = logging.getLogger("kafkalog.spark")

#: seconds a task waits for the driver's answer, then for the kill that follows a cancelled stage
CONNECT_TIMEOUT = 5.0
KILL_WAIT = 60.0

ChannelAddress = tuple[str, int, str]  # host, port, token


@dataclass
class _Totals:
    reports: int = 0
    segments: set[str] = field(default_factory=set)
    regions: int = 0
    bytes: int = 0
    batches: int = 0


class DriverChannel:
    """The driver's end: a threaded TCP server answering one JSON line per connection."""

    def __init__(self, sc, host: str, bind: str) -> None:
        self._sc = sc
        self.token = secrets.token_hex(16)
        self.totals = _Totals()
        self._lock = threading.Lock()
        channel = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    msg = json.loads(self.rfile.readline(1 << 16))
                    ok = isinstance(msg, dict) and msg.get("token") == channel.token and channel.handle(msg)
                except Exception:  # a malformed message or a stopped SparkContext: the task raises itself
                    log.debug("kafkalog channel message failed", exc_info=True)
                    ok = False
                self.wfile.write(b"ok\n" if ok else b"no\n")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((bind, 0), Handler)
        self.address: ChannelAddress = (host, self._server.server_address[1], self.token)
        threading.Thread(target=self._server.serve_forever, name="kafkalog-channel", daemon=True).start()

    def alive(self, sc) -> bool:
        return sc is self._sc and getattr(sc, "_jsc", None) is not None

    def handle(self, msg: dict) -> bool:
        kind = msg.get("kind")
        if kind == "fail":
            reason = f"kafkalog: CorruptRecordError: {msg['error']} (onCorrupt=fail)"
            log.error("%s", reason)
            self._sc._jsc.sc().cancelStage(int(msg["stage"]), reason)
            return True
        if kind == "metrics":
            write_metrics_line(str(msg["dir"]), dict(msg["line"]))
            return True
        if kind == "skipped":
            with self._lock:
                t = self.totals
                t.reports += 1
                t.segments.add(str(msg["segment"]))
                t.regions += int(msg["regions"])
                t.bytes += int(msg["bytes"])
                t.batches += int(msg["batches"])
            log.warning("%s", skipped_line(msg))
            return True
        return False

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_CHANNEL: DriverChannel | None = None
_CHANNEL_LOCK = threading.Lock()


def driver_channel(spark) -> DriverChannel | None:
    """The channel of ``spark``'s SparkContext (started on first use); None for sessions without one (Spark
    Connect)."""
    global _CHANNEL
    try:
        sc = spark.sparkContext
        conf = sc.getConf()
    except Exception:  # Spark Connect: no SparkContext on the client
        return None
    with _CHANNEL_LOCK:
        if _CHANNEL is not None and _CHANNEL.alive(sc):
            return _CHANNEL
        if _CHANNEL is not None:
            _CHANNEL.close()
        host = conf.get("spark.driver.host", None) or socket.gethostname()
        bind = conf.get("spark.driver.bindAddress", None) or ""
        _CHANNEL = DriverChannel(sc, host, bind)
        return _CHANNEL


def write_metrics_line(metrics_dir: str, line: dict) -> None:
    """One scan's metrics as ``metrics_dir/scan-<uuid>.json`` (the DataSource's ``metricsDir``)."""
    os.makedirs(metrics_dir, exist_ok=True)
    with open(os.path.join(metrics_dir, f"scan-{uuid.uuid4().hex}.json"), "w", encoding="utf-8") as f:
        json.dump(line, f)


def lost_text(lost: list) -> str:
    """Lost offset ranges as ``recover --salvage --dry-run`` words them: ``offsets 5-9, 20-``."""
    if not lost:
        return "no offsets lost"
    parts = [f"{'?' if a is None else a}-{'' if b is None else b}" if a != b else str(a) for a, b in lost]
    return "offsets " + ", ".join(parts) + " lost"


def skipped_line(msg: dict) -> str:
    """The driver's warning for one segment scan that ``onCorrupt=skip`` cut: the offsets lost, then the bytes."""
    return (f"kafkalog: onCorrupt=skip in {msg['segment']}: {lost_text(msg.get('lost_offsets') or [])} "
            f"({int(msg['regions'])} corrupt region(s), {int(msg['bytes'])} bytes; {int(msg['batches'])} batch(es) "
            f"dropped with offsets out of order); first at position {msg['position']}: {msg['error']}")


def skipped_totals() -> dict:
    """What ``onCorrupt=skip`` dropped in this driver's scans so far: ``reports`` (segment scans that skipped
    something), ``segments``, ``regions`` (corrupt byte ranges), ``bytes``, ``batches`` (whole batches dropped
    because their offsets did not follow)."""
    t = _CHANNEL.totals if _CHANNEL is not None else _Totals()
    return {"reports": t.reports, "segments": len(t.segments), "regions": t.regions, "bytes": t.bytes,
            "batches": t.batches}  # fmt: skip


def report(address: ChannelAddress | None, msg: dict) -> bool:
    """Send ``msg`` to the driver; True when it took it. Never raises: no channel is the old behaviour."""
    if address is None:
        return False
    host, port, token = address
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as s:
            s.sendall(json.dumps({**msg, "token": token}).encode() + b"\n")
            s.settimeout(CONNECT_TIMEOUT)
            return s.makefile("rb").readline().strip() == b"ok"
    except (OSError, ValueError):
        return False


_UNREACHABLE_WARNED: set[tuple[str, int]] = set()


def warn_unreachable(address: ChannelAddress, what: str) -> None:
    """Once per process and driver address: a task could not reach the driver, so ``what`` happens on this host
    instead (a local ``metricsDir`` then holds this executor's lines on this executor's disk)."""
    key = (address[0], address[1])
    if key in _UNREACHABLE_WARNED:
        return
    _UNREACHABLE_WARNED.add(key)
    log.warning("kafkalog: the driver's channel at %s:%d is unreachable from %s; %s", key[0], key[1],
                socket.gethostname(), what)


def fail_job(address: ChannelAddress | None, error: str) -> None:
    """``onCorrupt=fail`` in a task: have the driver cancel this task's stage with ``error``, then wait for the
    kill. Returns (and the caller raises) when there is no channel, no task context, or no kill came."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None or not report(address, {"kind": "fail", "stage": ctx.stageId(), "error": error}):
        return
    deadline = time.monotonic() + KILL_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.2)

"""A TCP proxy on 127.0.0.1 that makes a local server answer like a real bucket: every request waits ``delay_s``
(25 ms by default, what a first byte costs on a real S3 bucket) before it reaches the server.

Each burst of bytes a client sends after the server's last answer counts as one request (HTTP/1.1 clients send a
request, then wait for its answer), so a request is delayed once, whatever its size. Connections are delayed
independently, as a store serves them. ``delay_s`` can change while the proxy runs (uploads without, reads with).
Used by the tests and by ``benchmarks/bench_tiered.py --latency-ms``. With ``trace`` set to a list, each request
appends a :class:`Request` (its first line, its Range header, when it arrived, when the server was sent it and
when its answer began): the timeline of one read, where the serial round trips show (``--trace`` of the benchmark).
"""

from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass

__all__ = ["LatencyProxy", "Request"]


@dataclass
class Request:
    """One request through the proxy (times from ``time.perf_counter``; ``answered`` is -1 until it is)."""

    line: str  # "GET /bucket/key HTTP/1.1"
    range: str  # "bytes=0-8388607", or ""
    arrived: float
    forwarded: float = -1.0
    answered: float = -1.0

    @property
    def kind(self) -> str:
        """``LIST``, ``HEAD``, ``GET`` (ranged or whole) or the method."""
        method, _, rest = self.line.partition(" ")
        if method == "GET" and ("list-type=" in rest or rest.split(" ")[0].rstrip("/").count("/") <= 1):
            return "LIST"
        return method


def _request(data: bytes, now: float) -> Request:
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1", "replace").split("\r\n")
    rng = next((h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("range:")), "")
    return Request(head[0], rng, now)


class LatencyProxy:
    """``LatencyProxy(port).start()``: listens on a free port of 127.0.0.1 (``.endpoint``), forwards to ``port``."""

    def __init__(self, target_port: int, delay_s: float = 0.025, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.delay_s = delay_s
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0  # requests waiting for their first answer byte at once
        self.trace: list[Request] | None = None  # a list: every request is appended (see the module docstring)
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> LatencyProxy:
        self._server.listen(128)
        threading.Thread(target=self._accept, name="latency-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.close()

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=30)
        except OSError:
            client.close()
            return
        awaiting_request = True  # the next client bytes start a request
        current: Request | None = None
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    if sock is client:
                        if awaiting_request:
                            trace = self.trace
                            current = _request(data, time.perf_counter()) if trace is not None else None
                            if current is not None:
                                trace.append(current)
                            with self._lock:
                                self.requests += 1
                                self.in_flight += 1
                                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                            if self.delay_s > 0:
                                time.sleep(self.delay_s)
                            awaiting_request = False
                            if current is not None:
                                current.forwarded = time.perf_counter()
                        upstream.sendall(data)
                    else:
                        if not awaiting_request:
                            if current is not None:
                                current.answered = time.perf_counter()
                            with self._lock:
                                self.in_flight -= 1
                        awaiting_request = True
                        client.sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

"""A TCP proxy on 127.0.0.1 that makes a local server answer like a real bucket: every request waits ``delay_s``
(25 ms by default, what a first byte costs on a real S3 bucket) before it reaches the server.

Each burst of bytes a client sends after the server's last answer counts as one request (HTTP/1.1 clients send a
request, then wait for its answer), so a request is delayed once, whatever its size. Connections are delayed
independently, as a store serves them. ``delay_s`` can change while the proxy runs (uploads without, reads with).
Used by the tests and by ``benchmarks/bench_tiered.py --latency-ms``.
"""

from __future__ import annotations

import select
import socket
import threading
import time

__all__ = ["LatencyProxy"]


class LatencyProxy:
    """``LatencyProxy(port).start()``: listens on a free port of 127.0.0.1 (``.endpoint``), forwards to ``port``."""

    def __init__(self, target_port: int, delay_s: float = 0.025, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.delay_s = delay_s
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0  # requests waiting for their first answer byte at once
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
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([client, upstream], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    if sock is client:
                        if awaiting_request:
                            with self._lock:
                                self.requests += 1
                                self.in_flight += 1
                                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                            if self.delay_s > 0:
                                time.sleep(self.delay_s)
                            awaiting_request = False
                        upstream.sendall(data)
                    else:
                        if not awaiting_request:
                            with self._lock:
                                self.in_flight -= 1
                        awaiting_request = True
                        client.sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

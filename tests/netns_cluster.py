"""A Spark standalone cluster whose workers are separate hosts, made on one machine with Linux namespaces.

Why: :class:`tests.spark_cluster.StandaloneCluster` runs every worker on the driver's filesystem and loopback, so
an executor that writes a path meant for the driver (a report, a ``metricsDir`` line) or talks to ``127.0.0.1``
goes unnoticed. Here each worker runs in

* its own **network namespace** (``ip netns add``), joined to the root namespace by a veth pair on a bridge with
  its own ``10.x.y.n`` address. The master and the driver stay in the root namespace on the bridge's address
  (``10.x.y.1``), so every connection crosses hosts; the root namespace's loopback is out of the workers' reach.
* its own **mount namespace** (``unshare --mount --propagation private``) with a private tmpfs mounted over
  ``private_dir``, the dir the tests give the driver for its outputs. What an executor writes there lands in that
  worker's tmpfs, invisible to the driver; :meth:`NetnsCluster.private_files` lists it through the worker
  process's root (``/proc/PID/root``, the same view ``nsenter --mount=/proc/PID/ns/mnt`` gives). Everything else
  (the archive, standing for shared storage, the Python and Java installs, the work dirs) is visible to all.

Needs root (``CAP_SYS_ADMIN``/``CAP_NET_ADMIN``), ``ip`` (iproute2) and ``unshare`` (util-linux);
:func:`namespace_support` says what is missing. Names carry a random tag and the subnet is one not in use, so
parallel runs do not clash; :meth:`NetnsCluster.stop` ends the JVMs and deletes the namespaces, veths and bridge.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

from tests.spark_cluster import StandaloneCluster


class NamespaceError(RuntimeError):
    """Setting up the namespaces was refused (the message names the command and the kernel's answer)."""


def _run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise NamespaceError(f"`{' '.join(args)}` refused: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def namespace_support() -> str | None:
    """None when this process can make network and mount namespaces, else the one-line reason why not."""
    if os.geteuid() != 0:
        return "needs root to create network and mount namespaces (ip netns, unshare --mount)"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (Debian package {package})"
    try:
        _run("unshare", "--mount", "--net", "--propagation", "private", "true")
    except (NamespaceError, OSError) as exc:
        return str(exc)
    return None


def _free_subnet() -> str:
    """A ``10.x.y`` /24 prefix that no interface here uses (random: parallel runs pick different ones)."""
    used = _run("ip", "-4", "-o", "addr", "show")
    for _ in range(100):
        prefix = f"10.{random.randint(64, 127)}.{random.randint(0, 255)}"
        if f" {prefix}." not in used:
            return prefix
    raise NamespaceError("no free 10.x.y.0/24 subnet")


class HostNetwork:
    """A bridge in the root namespace (``PREFIX.1``) and one network namespace per host (``PREFIX.2``, ...),
    each joined to the bridge by a veth pair. Worker-to-worker traffic (shuffle fetches) is bridged; nothing needs
    IP forwarding."""

    def __init__(self, hosts: int) -> None:
        tag = secrets.token_hex(3)  # interface names have 15 characters at most
        self.bridge = f"klbr{tag}"
        self.namespaces = [f"kafkalog-{tag}-host{i}" for i in range(hosts)]
        self._veths = [f"kl{tag}v{i}" for i in range(hosts)]
        self._made: list[list[str]] = []  # undo commands, run in reverse
        prefix = _free_subnet()
        self.gateway = f"{prefix}.1"
        self.addresses = [f"{prefix}.{2 + i}" for i in range(hosts)]
        try:
            self._create()
        except BaseException:
            self.destroy()
            raise

    def _do(self, undo: list[str] | None, *args: str) -> None:
        _run(*args)
        if undo:
            self._made.append(undo)

    def _create(self) -> None:
        self._do(["ip", "link", "del", self.bridge], "ip", "link", "add", self.bridge, "type", "bridge")
        self._do(None, "ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        self._do(None, "ip", "link", "set", self.bridge, "up")
        for ns, veth, address in zip(self.namespaces, self._veths, self.addresses, strict=True):
            self._do(["ip", "netns", "del", ns], "ip", "netns", "add", ns)
            self._do(["ip", "link", "del", veth], "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                     "netns", ns)  # fmt: skip
            self._do(None, "ip", "link", "set", veth, "master", self.bridge, "up")
            self._do(None, "ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            self._do(None, "ip", "-n", ns, "link", "set", "eth0", "up")
            self._do(None, "ip", "-n", ns, "link", "set", "lo", "up")

    def pids(self, i: int) -> list[int]:
        """Processes still in host ``i``'s network namespace."""
        proc = subprocess.run(["ip", "netns", "pids", self.namespaces[i]], capture_output=True, text=True)
        return [int(p) for p in proc.stdout.split()]

    def destroy(self) -> None:
        """Kill what is left in the namespaces (processes this cluster started), then delete them, the veths and
        the bridge. Never raises: it runs after failures."""
        for i in range(len(self.namespaces)):
            for pid in self.pids(i):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        while self._made:
            subprocess.run(self._made.pop(), capture_output=True)


#: Run by ``sh -c`` in a worker's fresh mount namespace: the private tmpfs over the driver's output dir, then the
#: worker itself (``exec``: the worker JVM keeps the shell's pid, so ``/proc/PID`` is the worker's view).
_MOUNT_THEN_EXEC = 'mount -t tmpfs -o size=64m,mode=0755 kafkalog-private "$1" && shift && exec "$@"'


class NetnsCluster(StandaloneCluster):
    """A :class:`StandaloneCluster` whose master listens on the bridge (:attr:`host`) and whose worker ``i``
    runs in network namespace ``network.namespaces[i]`` at ``network.addresses[i]``, with a private tmpfs over
    ``private_dir``."""

    def __init__(self, workdir: Path, worker_python: str, private_dir: Path, workers: int = 2,
                 memory: str = "640m", cores: int = 1) -> None:  # fmt: skip
        self.private_dir = private_dir.resolve()
        self.network = HostNetwork(workers)
        super().__init__(workdir, worker_python, workers, memory, host=self.network.gateway, cores=cores)

    def worker_host(self, i: int) -> str:
        return self.network.addresses[i]

    def worker_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.network.namespaces[i], "unshare", "--mount", "--propagation", "private",
                "--", "sh", "-c", _MOUNT_THEN_EXEC, "sh", str(self.private_dir)]  # fmt: skip

    def worker_pid(self, i: int) -> int:
        return self.procs[1 + i].pid  # procs[0] is the master

    def private_view(self, i: int) -> Path:
        """``private_dir`` as worker ``i`` (and its executors) sees it: its private tmpfs."""
        return Path(f"/proc/{self.worker_pid(i)}/root") / self.private_dir.relative_to("/")

    def private_is_mounted(self, i: int) -> bool:
        """Whether worker ``i``'s mount namespace has the tmpfs over ``private_dir`` (its ``mountinfo``)."""
        info = Path(f"/proc/{self.worker_pid(i)}/mountinfo").read_text()
        return any(f.split()[4] == str(self.private_dir) and " - tmpfs kafkalog-private " in f
                   for f in info.splitlines())  # fmt: skip

    def private_files(self) -> dict[int, list[str]]:
        """Every path under each worker's private ``private_dir``, relative to it (``{worker: [paths]}``)."""
        return {i: sorted(str(p.relative_to(self.private_view(i))) for p in self.private_view(i).rglob("*"))
                for i in range(self.n_workers)}  # fmt: skip

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.network.destroy()

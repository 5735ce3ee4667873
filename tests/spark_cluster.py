"""A real Spark standalone cluster for tests: a master and workers from the pyspark package, on 127.0.0.1.

``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` (one core and modest memory each),
Java from kafkalog's own discovery (:func:`kafkalog.spark.java.ensure_java`). ``clean_venv`` makes the workers'
Python: a venv that sees the running interpreter's packages (numpy, crc32c, pyarrow, pyspark) but not kafkalog, so
jobs only work when kafkalog is shipped to the executors.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.s3server import free_port


def java_home() -> str:
    """JAVA_HOME for spark-class, from kafkalog's discovery (a java found on PATH gives its real home)."""
    from kafkalog.spark.java import ensure_java

    java = ensure_java()
    return os.environ.get("JAVA_HOME") or os.path.dirname(os.path.dirname(os.path.realpath(java)))


#: Run at interpreter start in a clean venv (``sitecustomize`` comes after every ``.pth``): hides a kafkalog that
#: the system site-packages hold (CI installs it there editable) while keeping its dependencies, so the venv's
#: Python only gets kafkalog the way a cluster worker would, from a shipped zip put on ``sys.path`` at run time.
_HIDE_KAFKALOG = """\
import os
import sys

sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path[:] = [p for p in sys.path if not os.path.isfile(os.path.join(p or ".", "kafkalog", "__init__.py"))]
"""


def running_site_dirs() -> list[str]:
    """The site-packages dirs of the interpreter running the tests: a venv's own (and the system's when the venv
    was made with ``--system-site-packages``), or the system's and the user's for a system install; then the dirs
    their ``.pth`` files name as plain path lines (a venv layered on another one's packages that way)."""
    import site

    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs = [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]
    return list(dict.fromkeys(dirs + [p for d in dirs for p in _pth_path_lines(d)]))


def _pth_path_lines(site_dir: str) -> list[str]:
    """The existing dirs named by the plain path lines of ``site_dir``'s ``.pth`` files (``import`` lines, such
    as an editable install's hook, are code and left out)."""
    out = []
    for name in sorted(os.listdir(site_dir)):
        if not name.endswith(".pth"):
            continue
        with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    path = os.path.join(site_dir, line)
                    if os.path.isdir(path):
                        out.append(os.path.normpath(path))
    return out


def env_venv(path: Path, *, hide_kafkalog: bool, pip: bool = False) -> str:
    """A venv at ``path`` whose Python sees the packages of the interpreter running the tests; returns its python.

    ``--system-site-packages`` is not enough: from a venv (README's install) the base interpreter's site-packages
    hold none of kafkalog's dependencies. A ``.pth`` in the new venv lists the running interpreter's site dirs
    (:func:`running_site_dirs`) as plain path lines: their modules are importable, but their own ``.pth`` files are
    not run, so a kafkalog installed there editable (a ``.pth`` hook) stays out. ``hide_kafkalog`` also drops any
    kafkalog that is importable otherwise (see ``_HIDE_KAFKALOG``)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    args = [str(base), "-m", "venv", *([] if pip else ["--without-pip"]), str(path)]
    subprocess.run(args, check=True, timeout=300)
    python = str(path / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    # "zz": after the venv's own .pth files (an install into the venv comes first on sys.path)
    Path(site, "zz-running-interpreter.pth").write_text("".join(f"{d}\n" for d in running_site_dirs()))
    if hide_kafkalog:
        Path(site, "sitecustomize.py").write_text(_HIDE_KAFKALOG)
    return python


def clean_venv(path: Path) -> str:
    """A venv with the running interpreter's packages but no kafkalog at ``path``; returns its python."""
    return env_venv(path, hide_kafkalog=True)


def fresh_session(master: str, app_name: str, **kwargs):
    """A new kafkalog session on ``master`` (Spark allows one per process: an active one is stopped first)."""
    from pyspark.sql import SparkSession

    from kafkalog.spark import get_session

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    return get_session(master, app_name, **kwargs)


class StandaloneCluster:
    """Master + ``workers`` workers of ``cores`` cores each; ``url`` is the master URL. Stop with :meth:`stop`.

    Every process listens on ``host`` (127.0.0.1 by default). Subclasses place workers elsewhere through
    :meth:`worker_host` and :meth:`worker_prefix` (``tests/netns_cluster.py``: one network and mount namespace per
    worker). Each worker gets its own work dir (``worker-N``) and ``SPARK_LOCAL_DIRS`` (``worker-N/local``).
    """

    def __init__(self, workdir: Path, worker_python: str, workers: int = 2, memory: str = "640m",
                 host: str = "127.0.0.1", cores: int = 1) -> None:  # fmt: skip
        self.workdir = workdir
        self.cores = cores
        self.worker_python = worker_python
        self.n_workers = workers
        self.memory = memory
        self.host = host
        self.port = free_port()
        self.ui_port = free_port()
        self.worker_ui_ports = [free_port() for _ in range(workers)]
        self.url = f"spark://{host}:{self.port}"
        self.procs: list[subprocess.Popen] = []

    def worker_host(self, i: int) -> str:
        """The address worker ``i`` (and its executors) listens on."""
        return self.host

    def worker_prefix(self, i: int) -> list[str]:
        """A command that runs worker ``i``'s ``spark-class`` command (given as its arguments); none here."""
        return []

    def _spawn(self, args: list[str], name: str, host: str, prefix: list[str] | None = None, **env_extra: str) -> None:
        import pyspark

        spark_home = os.path.dirname(pyspark.__file__)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            JAVA_HOME=java_home(), SPARK_HOME=spark_home, SPARK_LOCAL_IP=host,
            PYSPARK_PYTHON=self.worker_python, SPARK_LOG_DIR=str(self.workdir / "logs"), **env_extra,
        )  # fmt: skip
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
        proc = subprocess.Popen(
            [*(prefix or []), os.path.join(spark_home, "bin", "spark-class"), *args], env=env, stdout=log, stderr=log,
            cwd=self.workdir, start_new_session=True,
        )  # fmt: skip
        self.procs.append(proc)

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        self.launch(timeout)
        return self.wait_ready(timeout)

    def launch(self, timeout: float = 120.0) -> None:
        """Start the master, and the workers once it listens; :meth:`wait_ready` waits for them to register (other
        work can run meanwhile)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._spawn(["org.apache.spark.deploy.master.Master", "--host", self.host, "--port", str(self.port),
                     "--webui-port", str(self.ui_port)], "master", self.host)  # fmt: skip
        deadline = time.monotonic() + timeout
        # workers started before the master listens retry only 5-15 s later: start them once it does
        while not self._master_listens() and self.procs[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        for i in range(self.n_workers):
            wdir = self.workdir / f"worker-{i}"
            (wdir / "local").mkdir(parents=True, exist_ok=True)
            self._spawn(["org.apache.spark.deploy.worker.Worker", "--host", self.worker_host(i), "--cores", str(self.cores),
                         "--memory", self.memory, "--webui-port", str(self.worker_ui_ports[i]),
                         "--work-dir", str(wdir), self.url], f"worker-{i}", self.worker_host(i), self.worker_prefix(i),
                        SPARK_LOCAL_DIRS=str(wdir / "local"))  # fmt: skip

    def wait_ready(self, timeout: float = 120.0) -> StandaloneCluster:
        """Wait until every worker has registered with the master; stop everything and raise (with the logs' tails)
        when one does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                break
            if self.alive_workers() == self.n_workers:
                return self
            time.sleep(0.5)
        logs = "\n".join((self.workdir / f).read_text(errors="replace")[-1500:] for f in ("master.log", "worker-0.log"))
        self.stop()
        raise RuntimeError(f"standalone cluster did not come up:\n{logs}")

    def _master_listens(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def status(self) -> dict:
        """The master's JSON status (``http://HOST:UI_PORT/json/``: ``workers``, ``activeapps``, ...)."""
        with urllib.request.urlopen(f"http://{self.host}:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def worker_status(self, i: int) -> dict:
        """Worker ``i``'s JSON status (``executors``, ``finishedexecutors``: each with its ``appid``)."""
        with urllib.request.urlopen(f"http://{self.worker_host(i)}:{self.worker_ui_ports[i]}/json/", timeout=5) as r:
            return json.load(r)

    def alive_workers(self) -> int:
        try:
            return int(self.status().get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def applications(self) -> list[dict]:
        """Every application the master knows, running or finished (its JSON status: ``id``, ``name``,
        ``state``, ...)."""
        status = self.status()
        return [*status.get("activeapps", []), *status.get("completedapps", [])]

    def executor_dirs(self, app_id: str) -> list[Path]:
        """The work dirs the workers made for ``app_id``'s executors (``WORKDIR/APP_ID/EXECUTOR_ID``)."""
        return sorted(p for i in range(self.n_workers) for p in (self.workdir / f"worker-{i}" / app_id).glob("*"))

    def session_conf(self) -> dict[str, str]:
        """What a driver in this process needs: the cluster's address, the workers' Python, small executors."""
        return {
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.pyspark.python": self.worker_python,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.n_workers),
        }

    def driver_env(self, conf_dir: Path) -> dict[str, str]:
        """The environment of a driver in a child process (``spark-submit``, ``kafkalog spark validate``): Java,
        the workers' Python, and :meth:`session_conf` as ``spark-defaults.conf`` in ``conf_dir``
        (``SPARK_CONF_DIR``), the way a cluster's users configure their drivers."""
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in self.session_conf().items()))
        return {**os.environ, "JAVA_HOME": java_home(), "PYSPARK_PYTHON": self.worker_python,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": self.host,
                "SPARK_CONF_DIR": str(conf_dir)}  # fmt: skip

    def submit_command(self, args: list[str]) -> list[str]:
        """``spark-submit`` of the documented validation job (``kafkalog.spark.submit``) on this master."""
        import pyspark

        from kafkalog.spark.session import package_zip
        from kafkalog.spark.submit import entry_point

        spark_submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
        return [spark_submit, "--master", self.url, "--py-files", package_zip(), entry_point(), *args]

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first (they end their executors), then the master
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()

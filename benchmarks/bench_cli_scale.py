"""The CLI over a broker-sized log dir under a low descriptor limit: ``verify``, ``dirs describe``,
``recover --dry-run``, ``recover`` and ``dump`` of the whole dir, each in a child with ``RLIMIT_NOFILE`` set.

    python3 benchmarks/bench_cli_scale.py [--partitions 2000] [--segments 20] [--nofile 1024] [--dir /tmp]

One template partition (``segments`` segments written through ``Log``, so every file is what kafkalog writes) is
copied into every partition dir; the recovery-point checkpoint and the clean-shutdown marker are written as a clean
shutdown leaves them. Each command's wall time, exit code and output size are printed next to the reference from
the same run: reading every file of the dir once (``os.walk`` + one ``read`` per file, page cache warm), the floor
under any tool that looks at every file.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.layouts import copied_log_dir  # noqa: E402

_CLI = [sys.executable, "-c", "from kafkalog_cli.main import main; main()"]
COMMANDS = (("verify",), ("dirs", "describe"), ("recover", "--dry-run"), ("recover",), ("dump",))


def generate(root: Path, partitions: int, segments: int) -> Path:
    return copied_log_dir(root, partitions, segments, lambda s: [(b"k%d" % (s * 10 + i), b"v" * 200) for i in range(10)],
                          index_interval=256)  # fmt: skip


def read_everything(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    files = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as fh:
                fh.read()
            files += 1
    return time.perf_counter() - t0, files


def run_limited(args: tuple[str, ...], root: Path, nofile: int) -> tuple[float, int, int, str]:
    """(seconds, exit code, stdout bytes, last stderr line) of one command under RLIMIT_NOFILE ``nofile``."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    t0 = time.perf_counter()
    proc = subprocess.run([*_CLI, *args, str(root)], capture_output=True, preexec_fn=limit, check=False)
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    return time.perf_counter() - t0, proc.returncode, len(proc.stdout), err[-1] if err else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--segments", type=int, default=20)
    ap.add_argument("--nofile", type=int, default=1024, help="RLIMIT_NOFILE of each command (default 1024)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-cli-scale-", dir=args.dir))
    try:
        t0 = time.perf_counter()
        root = generate(base, args.partitions, args.segments)
        floor, files = read_everything(root)
        floor, files = read_everything(root)  # warm
        print(f"generated {args.partitions} partitions x {args.segments} segments ({files} files) in "
              f"{time.perf_counter() - t0:.1f}s; load {os.getloadavg()[0]:.1f}")
        print(f"reference: read every file once            {floor:7.2f}s")
        for cmd in COMMANDS:
            secs, rc, out, err = run_limited(cmd, root, args.nofile)
            print(f"kafkalog {' '.join(cmd):<22} ulimit -n {args.nofile}: {secs:7.2f}s ({secs / floor:5.1f}x the "
                  f"reference), exit {rc}, {out / (1 << 20):.1f} MiB of output" + (f"; stderr: {err}" if rc else ""))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

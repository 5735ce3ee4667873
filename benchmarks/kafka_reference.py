"""Apache Kafka's own figures for the benchmarks, measured by ``../shared/kafka-oracle`` on the same input in the
same run (``../shared/performance-anchors.md``: a figure from a document is not a comparison).

Where Java or the oracle is missing, every function returns ``None`` after printing one line that says why, and the
benchmark prints the document's figure only as a labelled fallback (``fallback()``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import oracle  # noqa: E402

__all__ = ["FALLBACK", "KafkaFileFigures", "available", "bench_file", "bench_load", "fallback", "ratio_line"]

#: ../shared/performance-anchors.md, quiet machine, 2026-11-26: only for a machine without Java, and labelled so
FALLBACK = {
    "shallow_gbps_16k": 3.5,
    "shallow_gbps_1k": 0.77,
    "deep_records_per_s_1k": 3.55e6,
    "deep_records_per_s_100b": 13.3e6,
    "clean_load_segments_per_s": 400 * 10 / 1.44,
}

_warned = False


def available() -> bool:
    """True when the oracle can run here; otherwise print (once) the reason and that fallbacks are used."""
    global _warned
    reason = oracle.unavailable_reason(oracle.ORACLE, oracle.java_executable())
    if reason is None:
        return True
    if not _warned:
        print(f"Apache Kafka: not measured in this run ({reason}); figures marked 'fallback' come from "
              "../shared/performance-anchors.md and are not a same-run comparison", flush=True)
        _warned = True
    return False


@dataclass(frozen=True)
class KafkaFileFigures:
    """``kafka-oracle bench`` on one file: best of its rounds after its warm-up rounds."""

    shallow_gbps: float
    deep_records_per_s: float
    crc32c_gbps: float
    records: int
    java: str


def bench_file(path: str | Path, *, rounds: int = 5, warmup: int | None = None) -> KafkaFileFigures | None:
    """Kafka's shallow read + CRC check, deep iteration and raw CRC32C on ``path``, or None without Java.

    The JVM's JIT compiles the hot loops only after enough iterations, so by default the warm-up rounds read at
    least ~512 MiB in all (3 rounds at the least, 60 at the most)."""
    if not available():
        return None
    if warmup is None:
        warmup = min(60, max(3, -(-(512 << 20) // max(1, Path(path).stat().st_size))))
    out = oracle.run_oracle_json("bench", str(path), "--rounds", str(rounds), "--warmup", str(warmup), timeout=1800)
    return KafkaFileFigures(shallow_gbps=out["shallow"]["gbps_best"],
                            deep_records_per_s=out["deep"]["records_per_s_best"],
                            crc32c_gbps=out["crc32c"]["gbps_best"], records=int(out["records"]),
                            java=out.get("java", "?"))


def bench_load(log_dir: str | Path, *, mode: str, threads: int = 1, rounds: int = 3,
               extra: tuple[str, ...] = ()) -> dict | None:
    """Kafka's loader over every partition of ``log_dir`` (``mode`` clean or unclean), or None without Java.

    The result is the oracle's JSON: ``best_s``, ``seconds``, ``partitions``, ``segments``."""
    if mode not in ("clean", "unclean"):
        raise ValueError(f"mode must be clean or unclean, not {mode!r}")
    if not available():
        return None
    args = ["bench-load", str(log_dir), "--mode", mode, "--threads", str(threads), "--rounds", str(rounds), *extra]
    return oracle.run_oracle_json(*args, timeout=3600)


def fallback(key: str) -> float:
    """A document figure, for printing beside ours only when :func:`available` said Kafka was not measured."""
    return FALLBACK[key]


def ratio_line(label: str, ours: float, kafka: float | None, unit: str, *, higher_is_better: bool = True,
               fallback_value: float | None = None, width: int = 44) -> str:
    """``label  ours unit  (R x Apache Kafka's K unit, same run)``; the fallback is labelled as such."""
    if kafka is not None:
        r = ours / kafka if higher_is_better else kafka / ours
        return f"  {label:<{width}} {ours:9.2f} {unit}  ({r:.2f}x Apache Kafka's {kafka:.2f} {unit}, same run)"
    if fallback_value is not None:
        r = ours / fallback_value if higher_is_better else fallback_value / ours
        return (f"  {label:<{width}} {ours:9.2f} {unit}  ({r:.2f}x Kafka's {fallback_value:.2f} {unit}: fallback "
                "figure from performance-anchors.md, not this run)")
    return f"  {label:<{width}} {ours:9.2f} {unit}"


if __name__ == "__main__":  # `python benchmarks/kafka_reference.py FILE.log`: Kafka's figures alone
    print(json.dumps(bench_file(sys.argv[1]).__dict__ if available() else None, indent=2))

"""Where a Spark command's wall time goes, phase by phase (``kafkalog spark validate --timings``).

A small archive's validation is mostly fixed costs (Python imports, the JVM, the first job's Python workers), not
checking; an operator sees which ones with the phases this records, the library's own check being one of them.
"""

from __future__ import annotations

import os
import time

__all__ = ["PhaseTimer", "process_age"]


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or None where that cannot be read: the start-up
    (interpreter, imports, CLI parsing) that ran before any kafkalog code could take a time."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks since boot
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start)


class PhaseTimer:
    """Consecutive phases: each :meth:`lap` charges the time since the previous one to ``name``."""

    def __init__(self, *, since_process_start: bool = False) -> None:
        self.phases: dict[str, float] = {}
        self.parts: dict[str, dict[str, float]] = {}  # a phase's own split (see :meth:`details`)
        self._last = time.perf_counter()
        if since_process_start:
            age = process_age()
            if age is not None:
                self.phases["start"] = age

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        took = now - self._last
        self._last = now
        self.phases[name] = self.phases.get(name, 0.0) + took
        return took

    def details(self, phase: str, parts: dict[str, float]) -> None:
        """What happened inside ``phase`` (the next or a past lap), shown under it as ``phase.part``; not added
        to the total (the parts overlap the phase)."""
        self.parts[phase] = dict(parts)

    def as_dict(self) -> dict[str, float]:
        """Phases in order, each followed by its parts (``phase.part``), rounded to milliseconds, plus ``total``
        (the phases' sum)."""
        out: dict[str, float] = {}
        for k, v in self.phases.items():
            out[k] = round(v, 3)
            out.update({f"{k}.{p}": round(x, 3) for p, x in self.parts.get(k, {}).items()})
        out["total"] = round(sum(self.phases.values()), 3)
        return out

    def render(self) -> str:
        """One line per phase: ``name seconds`` (its parts indented under it), then the total."""
        rows = self.as_dict()
        width = max(len(k) for k in rows)
        lines = []
        for k, v in rows.items():
            name = f"  {k.split('.', 1)[1]}" if "." in k else k
            shown = f"{int(v):7d}" if k.endswith(".tasks_run") else f"{v:7.3f} s"
            lines.append(f"  {name:<{width}}  {shown}\n")
        return "".join(lines)

"""Where a new partition goes: Kafka's ``LogManager.nextLogDirs``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["next_log_dirs"]


def next_log_dirs(live_dirs: Sequence[str], log_parent_dirs: Iterable[str]) -> list[str]:
    """Live dirs in the order a new log should try them.

    One live dir: just it. Otherwise live dirs sorted by how many logs (current and future) they hold, fewest
    first; ties keep the configured order (Kafka's sort is stable too). ``log_parent_dirs`` yields the parent dir
    of every current and future log; parents that are not live are ignored.
    """
    if len(live_dirs) <= 1:
        return list(live_dirs)
    counts = dict.fromkeys(live_dirs, 0)
    for parent in log_parent_dirs:
        if parent in counts:
            counts[parent] += 1
    return sorted(live_dirs, key=lambda d: counts[d])

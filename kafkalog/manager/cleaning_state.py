"""Each partition's cleaning state (Kafka's ``LogCleaningState``): in progress, abort requested, or paused some
number of times. Absent = may be cleaned. Moves, truncation, deletion and a failed dir pause a partition (aborting
a pass in progress and waiting for it to stop) and resume it afterwards; pauses nest."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kafkalog.errors import InvalidArgumentError
from kafkalog.names import TopicPartition

__all__ = ["CleaningStates", "InProgress", "Aborted", "Paused"]


class InProgress:
    """A cleaner thread is cleaning the partition."""


class Aborted:
    """An abort was asked while a pass was in progress; the pass stops at its next check and the partition
    becomes paused once."""


@dataclass(frozen=True)
class Paused:
    times: int


State = InProgress | Aborted | Paused


class CleaningStates:
    """The state table with Kafka's transitions, under one lock with a condition for pauses that wait."""

    def __init__(self) -> None:
        self._states: dict[TopicPartition, State] = {}
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)

    def get(self, key: TopicPartition) -> State | None:
        with self.lock:
            return self._states.get(key)

    def busy(self) -> set[TopicPartition]:
        """Partitions not to pick: in progress, aborting or paused."""
        with self.lock:
            return set(self._states)

    def start(self, key: TopicPartition) -> bool:
        """Mark ``key`` in progress if nothing holds it; False otherwise."""
        with self.lock:
            if key in self._states:
                return False
            self._states[key] = InProgress()
            return True

    def should_stop(self, key: TopicPartition) -> bool:
        with self.lock:
            return isinstance(self._states.get(key), Aborted)

    def done(self, key: TopicPartition) -> None:
        """A pass ended (finished, failed or aborted): in progress -> none, aborted -> paused once."""
        with self.lock:
            state = self._states.get(key)
            if isinstance(state, InProgress):
                del self._states[key]
            elif isinstance(state, Aborted):
                self._states[key] = Paused(1)
            self._changed.notify_all()

    def abort_and_pause(self, key: TopicPartition, *, wait: bool = True, timeout: float | None = None) -> None:
        """Kafka's ``abortAndPauseCleaning``: none -> paused(1), paused(n) -> paused(n+1), in progress -> aborted
        (and, with ``wait``, until the pass has stopped and left it paused)."""
        with self.lock:
            state = self._states.get(key)
            if state is None:
                self._states[key] = Paused(1)
            elif isinstance(state, Paused):
                self._states[key] = Paused(state.times + 1)
            elif isinstance(state, InProgress):
                self._states[key] = Aborted()
            if wait:
                self._changed.wait_for(lambda: not isinstance(self._states.get(key), (InProgress, Aborted)),
                                       timeout)

    def resume(self, key: TopicPartition) -> None:
        """Kafka's ``resumeCleaning``: paused(1) -> none, paused(n) -> paused(n-1); anything else is a misuse."""
        with self.lock:
            state = self._states.get(key)
            if not isinstance(state, Paused):
                raise InvalidArgumentError(f"cleaning of {key[0]}-{key[1]} is not paused ({state!r})")
            if state.times == 1:
                del self._states[key]
            else:
                self._states[key] = Paused(state.times - 1)
            self._changed.notify_all()

    def forget(self, key: TopicPartition) -> None:
        """The partition is gone (deleted, or its dir failed and it left the manager)."""
        with self.lock:
            self._states.pop(key, None)
            self._changed.notify_all()

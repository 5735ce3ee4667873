"""The ``.kafka_cleanshutdown`` marker (Kafka's ``CleanShutdownFileHandler``, KIP-966 broker epoch).

Only the file's existence decides clean vs unclean shutdown; its JSON content (``{"version":0,"brokerEpoch":N}``)
carries the broker epoch. A marker whose content cannot be read still counts as clean (as in Kafka), and
:meth:`CleanShutdownFile.read_state` reports why the epoch is missing.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from kafkalog.checkpoint.atomic import atomic_write, fsync_dir
from kafkalog.errors import InvalidArgumentError

CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
CLEAN_SHUTDOWN_VERSION = 0
_MAX_MARKER_BYTES = 4096  # Kafka writes ~40 bytes; refuse to slurp a huge file put there by mistake

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanShutdownState:
    """What the marker says: ``exists`` decides clean shutdown; ``error`` explains a missing ``broker_epoch``."""

    exists: bool
    broker_epoch: int | None = None
    error: str | None = None


def format_clean_shutdown(broker_epoch: int, version: int = CLEAN_SHUTDOWN_VERSION) -> bytes:
    """The exact bytes Kafka writes (Jackson, no spaces, no final newline)."""
    for name, value in (("broker_epoch", broker_epoch), ("version", version)):
        if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < (1 << 63):
            raise InvalidArgumentError(f"{name} must be a 64-bit int, got {value!r}")
    return f'{{"version":{version},"brokerEpoch":{broker_epoch}}}'.encode("ascii")


def parse_clean_shutdown(data: bytes) -> tuple[int | None, str | None]:
    """``(broker_epoch, None)`` or ``(None, reason)``; unknown extra fields are ignored, as by Kafka."""
    try:
        content = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"not JSON: {e}"
    if not isinstance(content, dict):
        return None, "not a JSON object"
    epoch = content.get("brokerEpoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not -(1 << 63) <= epoch < (1 << 63):
        return None, f"brokerEpoch missing or not a 64-bit int: {epoch!r}"
    version = content.get("version", CLEAN_SHUTDOWN_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        return None, f"version is not an int: {version!r}"
    return epoch, None


class CleanShutdownFile:
    """The marker in one log dir."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / CLEAN_SHUTDOWN_FILE_NAME

    def exists(self) -> bool:
        return self.path.is_file()

    def write(self, broker_epoch: int, *, sync: bool = True) -> None:
        """Write the marker atomically (Kafka writes in place; a rename cannot leave a torn marker)."""
        atomic_write(self.path, format_clean_shutdown(broker_epoch), sync=sync)

    def read_state(self) -> CleanShutdownState:
        try:
            with open(self.path, "rb") as f:
                data = f.read(_MAX_MARKER_BYTES + 1)
        except FileNotFoundError:
            return CleanShutdownState(False)
        if len(data) > _MAX_MARKER_BYTES:
            return CleanShutdownState(True, None, f"marker larger than {_MAX_MARKER_BYTES} bytes")
        epoch, error = parse_clean_shutdown(data)
        if error is not None:
            log.warning("unreadable clean shutdown marker %s (still counts as a clean shutdown): %s", self.path, error)
        return CleanShutdownState(True, epoch, error)

    def read(self) -> int | None:
        """The broker epoch, or None when the marker is absent or its content unreadable."""
        return self.read_state().broker_epoch

    def delete(self, *, sync: bool = True) -> None:
        """Remove the marker (before loading, so a crash during load counts as unclean) and make that durable."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        if sync:
            fsync_dir(self.log_dir)

    def __repr__(self) -> str:
        return f"CleanShutdownFile({str(self.path)!r})"


def read_clean_shutdown(log_dir: str | os.PathLike[str]) -> CleanShutdownState:
    return CleanShutdownFile(log_dir).read_state()


def write_clean_shutdown(log_dir: str | os.PathLike[str], broker_epoch: int, *, sync: bool = True) -> None:
    CleanShutdownFile(log_dir).write(broker_epoch, sync=sync)


def delete_clean_shutdown(log_dir: str | os.PathLike[str], *, sync: bool = True) -> None:
    CleanShutdownFile(log_dir).delete(sync=sync)

"""atheris harness: offset checkpoints, leader-epoch-checkpoint, meta.properties, partition.metadata, producer
snapshots and the clean-shutdown marker. Byte 0 picks the parser; whatever a parser accepts must survive
format -> parse unchanged."""

from __future__ import annotations

import sys

import _setup  # noqa: F401
import atheris

with atheris.instrument_imports(include=["kafkalog", "reliability"]):
    from reliability import targets


def one_input(data: bytes) -> None:
    if not data:
        return
    kind = targets.CHECKPOINT_KINDS[data[0] % len(targets.CHECKPOINT_KINDS)]
    targets.target_checkpoint(kind, data[1:])


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()

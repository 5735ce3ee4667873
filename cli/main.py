"""Entry point of the ``kafkalog`` console script."""

from __future__ import annotations

import click


@click.group()
def main() -> None:
    """Inspect, dump, verify and recover Apache Kafka log dirs offline."""

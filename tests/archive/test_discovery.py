"""Segment discovery over odd trees: names that look like numbers to Python but are not Kafka's."""

from __future__ import annotations

from pathlib import Path

from kafkalog.archive.discovery import discover_segments


def test_odd_digit_dir_names_are_passed_over_by_discovery(tmp_path: Path) -> None:
    """A dir named '²' under a tiered topic dir is no partition ('²'.isdigit() is true, int('²') fails)."""
    odd = tmp_path / ("t-" + "A" * 22) / "\u00b2"
    odd.mkdir(parents=True)
    (odd / ("0" * 20 + "-" + "B" * 22 + ".log")).write_bytes(b"")
    items = discover_segments(tmp_path)
    assert [i.partition for i in items] == [-1]

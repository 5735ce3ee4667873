"""What a command that changes a stopped broker's dirs works on: PATH as one partition dir or a log dir (its
partition dirs), and ``--config KEY=VALUE`` items. Shared by ``recover`` and ``clean`` (the lock:
``locking.log_dir_writer``)."""

from __future__ import annotations

import os

import click

from kafkalog.names import parse_partition_dir

from .errors import CommandError

__all__ = ["LOG_DIR_FILES", "is_partition_dir", "parse_config_items", "resolve_partition_dirs"]

LOG_DIR_FILES = ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", ".kafka_cleanshutdown")  # fmt: skip


def parse_config_items(items: tuple[str, ...], *, param_hint: str = "--config") -> dict[str, str]:
    """``KEY=VALUE`` items as a dict, keys stripped (a usage error for an item without ``=`` or without a key)."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=param_hint)
        props[key.strip()] = value
    return props


def is_partition_dir(path: str) -> bool:
    try:
        parse_partition_dir(os.path.basename(path))
    except ValueError:
        return False
    names = os.listdir(path)
    return not any(n in names for n in LOG_DIR_FILES)


def resolve_partition_dirs(path: str, *, verb: str) -> tuple[str, list[str]]:
    """(log dir, partition dirs) of PATH: a partition dir alone, or every partition dir of a log dir (not those
    queued for deletion). Raises for a missing path, a file, a dir that is neither, and a log dir without
    partition dirs (nothing done is never "nothing lost"; ``verb`` says what there was nothing to do)."""
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if not os.path.isdir(path):
        raise CommandError(f"{path}: not a directory (give a partition dir or a log dir)")
    path = os.path.abspath(path)
    if is_partition_dir(path):
        return os.path.dirname(path), [path]
    pdirs = []
    for name in sorted(os.listdir(path)):
        full_path = os.path.join(path, name)
        if not os.path.isdir(full_path):
            continue
        try:
            parsed = parse_partition_dir(name)
        except ValueError:
            continue
        if parsed.kind != "delete":
            pdirs.append(full_path)
    if not pdirs and not any(os.path.exists(os.path.join(path, n)) for n in LOG_DIR_FILES):
        raise CommandError(f"{path}: neither a partition dir (<topic>-<partition>) nor a log dir")
    if not pdirs:
        raise CommandError(f"{path}: a log dir without partition dirs: nothing to {verb}", path=path)
    return path, pdirs

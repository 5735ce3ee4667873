"""``--storage-option KEY=VALUE``: credentials and endpoint for archive URLs (``s3://``, ``gs://``, ``hdfs://``),
shared by ``verify``, ``dump`` and ``spark validate``; keys are :data:`kafkalog.archive.storage.STORAGE_OPTIONS`."""

from __future__ import annotations

from typing import Any

import click

from kafkalog.archive.storage import STORAGE_OPTIONS, parse_storage_options
from kafkalog.errors import KafkaLogError


def _parse(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, str]:
    try:
        return parse_storage_options(value)
    except KafkaLogError as exc:
        raise click.BadParameter(str(exc)) from None


def storage_option(f: Any) -> Any:
    """Add ``--storage-option`` (repeatable) to a command; it receives ``storage_opts: dict[str, str]``."""
    return click.option(
        "--storage-option",
        "storage_opts",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_parse,
        help="For s3:// and other URLs: " + ", ".join(sorted(STORAGE_OPTIONS)) + " (default: the AWS_* environment).",
    )(f)


def _load_rsm(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from kafkalog.archive.tiered import load_rsm_config  # numpy: loaded only when the option is given

    return load_rsm_config(value)  # a TieredConfigError is the group's one-line error, exit 2


def rsm_config_option(f: Any) -> Any:
    """Add ``--rsm-config FILE`` to a command; it receives ``rsm`` (a :class:`kafkalog.archive.tiered.RsmConfig` or None)."""
    return click.option(
        "--rsm-config",
        "rsm",
        metavar="FILE",
        callback=_load_rsm,
        help="The broker's RemoteStorageManager configuration (rsm.config.* keys, prefix stripped; key files "
        "relative to FILE): reads Aiven tiered-storage objects stored encrypted.",
    )(f)

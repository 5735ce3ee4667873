"""Which Iceberg catalog a sync writes through, and the table name.

``--warehouse DIR`` alone is the embedded default: pyiceberg's SQL catalog named ``kafkalog`` on SQLite at
``DIR/catalog.db``, warehouse ``file://DIR``, so any pyiceberg, Spark or Trino user opens the table with those two
settings. ``--catalog-config FILE`` holds pyiceberg's catalog properties (REST, Glue, Hive, an S3 warehouse ...),
as JSON or as YAML: either the properties themselves (with an optional ``name``) or pyiceberg's own
``.pyiceberg.yaml`` layout (``catalog: {NAME: {...}}``, one catalog). Every failure to get a usable catalog is one
:class:`~kafkalog.errors.IcebergConfigError` naming what was wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from kafkalog.errors import IcebergConfigError

__all__ = ["CATALOG_NAME", "load_catalog", "local_warehouse", "open_catalog", "split_table_name"]

#: the embedded catalog's name (what a reader passes to ``pyiceberg.catalog.load_catalog``)
CATALOG_NAME = "kafkalog"


def split_table_name(table: str) -> tuple[str, str]:
    """``NAMESPACE.TABLE`` (the namespace may itself hold dots) as (namespace, table)."""
    ns, dot, name = str(table).strip().rpartition(".")
    if not dot or not ns or not name or "" in ns.split("."):
        raise IcebergConfigError(f"table must be NAMESPACE.TABLE, not {table!r}")
    return ns, name


def embedded_properties(warehouse: str) -> dict[str, str]:
    """The SQL-on-SQLite catalog properties of ``--warehouse DIR``."""
    root = os.path.abspath(os.path.expanduser(str(warehouse)))
    return {"type": "sql", "uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{root}"}


def read_catalog_config(path: str | os.PathLike) -> tuple[str, dict[str, str]]:
    """(catalog name, properties) of a ``--catalog-config`` file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise IcebergConfigError(f"{path}: cannot read the catalog config: {exc.strerror or exc}") from None
    data = _parse(text, path)
    name = CATALOG_NAME
    if isinstance(data, dict) and isinstance(data.get("catalog"), dict):
        catalogs = data["catalog"]
        if len(catalogs) != 1 or not isinstance(next(iter(catalogs.values())), dict):
            raise IcebergConfigError(f"{path}: 'catalog' must hold exactly one catalog's properties")
        name, data = next(iter(catalogs.items()))
    if not isinstance(data, dict) or not data:
        raise IcebergConfigError(f"{path}: the catalog config must be a mapping of pyiceberg catalog properties")
    props = {str(k): str(v) for k, v in data.items() if not isinstance(v, (dict, list))}
    name = str(props.pop("name", name))
    if "type" not in props and "uri" not in props and "py-catalog-impl" not in props:
        raise IcebergConfigError(f"{path}: the catalog config names no catalog (give 'type' and 'uri', e.g. "
                                 "type: rest, uri: https://...)")  # fmt: skip
    return name, props


def _parse(text: str, path: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import strictyaml

        return strictyaml.dirty_load(text, allow_flow_style=True).data
    except Exception as exc:  # strictyaml's YAMLError has no common base worth importing
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IcebergConfigError(f"{path}: not a JSON or YAML catalog config: {first}") from None


def load_catalog(name: str, properties: Mapping[str, str]) -> Any:
    """pyiceberg's catalog for ``properties``, reachable: a catalog that cannot be built or answered is one
    IcebergConfigError line (no traceback out of the driver of a database or an HTTP client)."""
    from pyiceberg.catalog import load_catalog as _load

    where = properties.get("uri") or properties.get("warehouse") or name
    try:
        catalog = _load(name, **dict(properties))
        catalog.list_namespaces()  # the first round trip: an unreachable or refusing catalog fails here
    except IcebergConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any client's failure is a catalog we cannot use
        raise IcebergConfigError(f"catalog {name!r} at {where}: {_one_line(exc)}") from None
    return catalog


def open_catalog(warehouse: str | os.PathLike | None = None, catalog: Any = None) -> tuple[Any, str | None]:
    """(catalog, local warehouse dir or None) from the sync's arguments: ``warehouse`` (the embedded catalog, the
    dir created when missing), ``catalog`` (a pyiceberg Catalog, a config file path, or a properties mapping)."""
    if (warehouse is None) == (catalog is None):
        raise IcebergConfigError("give one of warehouse (--warehouse DIR) and catalog (--catalog-config FILE)")
    if warehouse is not None:
        root = os.path.abspath(os.path.expanduser(str(warehouse)))
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise IcebergConfigError(f"{root}: cannot create the warehouse dir: {exc.strerror or exc}") from None
        return load_catalog(CATALOG_NAME, embedded_properties(root)), root
    if isinstance(catalog, (str, os.PathLike)):
        name, props = read_catalog_config(catalog)
    elif isinstance(catalog, Mapping):
        props = {str(k): str(v) for k, v in catalog.items()}
        name = props.pop("name", CATALOG_NAME)
    else:
        return catalog, local_warehouse(getattr(catalog, "properties", {}) or {})
    return load_catalog(name, props), local_warehouse(props)


def local_warehouse(props: Mapping[str, str]) -> str | None:
    """The local dir of a ``file://`` (or plain path) warehouse, where syncs can take a lock; None otherwise."""
    wh = str(props.get("warehouse", "") or "")
    if wh.startswith("file://"):
        return wh[len("file://"):]
    return wh if wh.startswith("/") else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

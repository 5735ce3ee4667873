"""``kafkalog.iceberg.sync``: append to an Iceberg table every record of an archive that the table lacks.

One sync: open the catalog, create the namespace and table on first use (refusing a table that is not
kafkalog's), remove what killed syncs left behind (:mod:`.orphans`), read the resume point from the table
(:mod:`.offsets`), decode only the new records (in this process, or in Spark tasks for big syncs: :mod:`.spark`),
and commit every data file in **one** snapshot whose summary holds the new ``kafkalog.next-offsets``. Nothing new:
no snapshot. The commit is Iceberg's optimistic one: when another writer committed first, this sync's files are
deleted and it starts again from what the table now says (:data:`COMMIT_ATTEMPTS` times), so a record is never
added twice.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.archive.tiered import as_rsm_config
from kafkalog.errors import IcebergCommitError, IcebergConfigError, InvalidArgumentError, NothingToCheckError
from kafkalog.iceberg.catalog import open_catalog, split_table_name
from kafkalog.iceberg.offsets import NEXT_OFFSETS, SKIPPED, plan_partitions, table_next_offsets
from kafkalog.iceberg.orphans import ORPHAN_MIN_AGE, clean_orphans, sync_lock
from kafkalog.iceberg.schema import check_table_schema, iceberg_schema, partition_spec
from kafkalog.iceberg.write import TaskOutput, make_reader, remove_files, segment_parts, write_parts

__all__ = ["COMMIT_ATTEMPTS", "IN_PROCESS_MAX_BYTES", "ISOLATION_PROPERTY", "SyncResult", "sync"]

#: pyiceberg's own retry re-applies an append on top of whatever was committed meanwhile, which would add the
#: same records twice after a concurrent sync: kafkalog tables turn it off and retry from a fresh plan instead
NO_REBASE = {"commit.retry.num-retries": "0"}
#: how often a sync starts again after another writer's commit won
COMMIT_ATTEMPTS = 4
#: the table property recording the isolation its rows were read with (a sync with the other one is refused)
ISOLATION_PROPERTY = "kafkalog.isolation"
#: bytes to read up to which a sync without ``spark``/``master`` runs in this process: a local Spark session costs
#: ~20 s to start on a small machine, the time one process takes to decode and write well over 2 GB
IN_PROCESS_MAX_BYTES = 2 << 30
ISOLATIONS = ("read_committed", "read_uncommitted")
ON_CORRUPT = ("fail", "skip")
#: progress steps: ("plan" | "write" | "commit", done, total)
ProgressCallback = Callable[[str, int, int], None]


@dataclass
class SyncResult:
    """What a sync did. ``snapshot_id`` is None when nothing was new (no snapshot committed)."""

    table: str
    snapshot_id: int | None
    rows: int
    files: list[str]
    bytes: int
    next_offsets: dict[str, int]
    partitions: int  # topic-partitions that got rows (or moved their next offset)
    segments: int
    isolation: str
    engine: str  # "in-process" or "spark"
    skipped: list[dict[str, Any]] = field(default_factory=list)
    orphans_removed: int = 0
    attempts: int = 1
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # seconds of the last attempt: plan, write, commit
    latest: dict[str, Any] | None = None  # the latest-value-per-key view's update (``latest_table``), else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync(roots: str | os.PathLike | Sequence[str | os.PathLike], table: str, *, warehouse: str | None = None,
         catalog: Any = None, isolation: str = "read_committed", spark: Any = None, rsm_config: Any = None,
         on_corrupt: str = "fail", master: str | None = None, storage_options: dict[str, str] | None = None,
         clean_orphans_files: bool | None = None, on_progress: ProgressCallback | None = None,
         latest_table: str | None = None) -> SyncResult:  # fmt: skip
    """Append to ``table`` (``NAMESPACE.TABLE``) every record under ``roots`` it does not hold yet.

    ``warehouse``: a dir for the embedded SQLite catalog; ``catalog``: a pyiceberg Catalog, a catalog config file,
    or its properties. ``spark``: a session to run the decode on; without one (and without ``master``) syncs that
    read more than :data:`IN_PROCESS_MAX_BYTES` start a ``local[*]`` session, smaller ones run here.
    ``on_corrupt``: ``fail`` (a corrupt segment raises ``CorruptRecordError`` naming it; the table is unchanged)
    or ``skip`` (read past it; what was skipped is in the snapshot summary's ``kafkalog.skipped``).
    ``clean_orphans_files``: remove files of killed syncs (default: when a local warehouse lock makes it safe).
    ``latest_table``: ``NAMESPACE.TABLE`` of a latest-value-per-key view of the table (:mod:`.latest`), in the same
    catalog, brought up to the table's next offsets after the table's commit.
    """
    started = time.perf_counter()
    if isolation not in ISOLATIONS:
        raise InvalidArgumentError(f"isolation must be read_committed or read_uncommitted, not {isolation!r}")
    if on_corrupt not in ON_CORRUPT:
        raise InvalidArgumentError(f"on_corrupt must be fail or skip, not {on_corrupt!r}")
    root_list = [os.fspath(roots)] if isinstance(roots, (str, os.PathLike)) else [os.fspath(r) for r in roots]
    if not root_list:
        raise InvalidArgumentError("give at least one root")
    namespace, name = split_table_name(table)
    options = storage.storage_options(storage_options or {})
    rsm = as_rsm_config(rsm_config)
    cat, local_dir = open_catalog(warehouse, catalog)
    if on_progress is not None:
        on_progress("plan", 0, 0)
    items = discover_segments(root_list, options=options, key_prefix=rsm.key_prefix if rsm is not None else "")
    if not items:
        raise NothingToCheckError("no segments found", path=", ".join(root_list))
    full = f"{namespace}.{name}"
    latest_name = None if latest_table is None else split_table_name(latest_table)
    if latest_name is not None and ".".join(latest_name) == full:
        raise InvalidArgumentError(f"the latest-value-per-key table must be another table than {full}")
    with sync_lock(local_dir, full) as locked:
        tbl = _open_table(cat, namespace, name, isolation)
        view = None if latest_name is None else _open_view(cat, latest_name, full, isolation)
        removed: list[str] = []
        if clean_orphans_files or (clean_orphans_files is None and locked):
            removed = clean_orphans(tbl, min_age=0.0 if locked else ORPHAN_MIN_AGE, locked=locked)
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            result = _attempt(tbl, full, items, root_list, isolation, on_corrupt, options, rsm, spark, master,
                              on_progress)  # fmt: skip
            if result is not None:
                result.orphans_removed, result.attempts = len(removed), attempt
                if view is not None:
                    result.latest = _update_latest(cat, _refresh(cat, tbl, namespace, name), view)
                result.seconds = time.perf_counter() - started
                return result
            tbl = _refresh(cat, tbl, namespace, name)
    raise IcebergCommitError(f"table {full}: other writers committed first {COMMIT_ATTEMPTS} times; nothing was "
                             "added (run the sync again)")  # fmt: skip


def _open_table(cat: Any, namespace: str, name: str, isolation: str, spec: Any = None,
                extra: dict[str, str] | None = None) -> Any:  # fmt: skip
    """The table, created (with its namespace) on first use; refused when it is not kafkalog's or was synced
    with the other isolation (mixing them would leave some rows of open transactions, or lose aborted ones)."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

    ident = (namespace, name)
    try:
        tbl = cat.load_table(ident)
    except NoSuchTableError:
        try:
            cat.create_namespace(namespace)
        except NamespaceAlreadyExistsError:
            pass
        try:
            tbl = cat.create_table(ident, schema=iceberg_schema(), partition_spec=spec or partition_spec(),
                                   properties={ISOLATION_PROPERTY: isolation, **NO_REBASE, **(extra or {}),
                                               "write.parquet.compression-codec": "snappy"})  # fmt: skip
        except TableAlreadyExistsError:  # another sync created it first
            tbl = cat.load_table(ident)
    except Exception as exc:  # noqa: BLE001 - a catalog that fails to answer is a config problem
        raise IcebergConfigError(f"table {namespace}.{name}: {type(exc).__name__}: {exc}") from None
    check_table_schema(tbl, f"{namespace}.{name}")
    if spec is None and "kafkalog.latest-of" in tbl.properties:
        raise IcebergConfigError(f"table {namespace}.{name} is the latest-value-per-key view of "
                                 f"{tbl.properties['kafkalog.latest-of']}: sync into that table instead")  # fmt: skip
    had = tbl.properties.get(ISOLATION_PROPERTY)
    if had is not None and had != isolation:
        raise IcebergConfigError(f"table {namespace}.{name} holds {had} rows; a {isolation} sync would mix them "
                                 "(use another table)")  # fmt: skip
    if any(tbl.properties.get(k) != v for k, v in NO_REBASE.items()):
        with tbl.transaction() as tx:
            tx.set_properties(**NO_REBASE)
    return tbl


def _open_view(cat: Any, latest_name: tuple[str, str], full: str, isolation: str) -> Any:
    """The latest-value-per-key view of ``full`` (created on first use), refused before anything is written when
    it is another table."""
    from kafkalog.iceberg.latest import LATEST_OF, latest_partition_spec

    ns, name = latest_name
    view = _open_table(cat, ns, name, isolation, spec=latest_partition_spec(), extra={LATEST_OF: full})
    if view.properties.get(LATEST_OF) != full:
        raise IcebergConfigError(f"table {ns}.{name} is not the latest-value-per-key view of {full} "
                                 f"({LATEST_OF}={view.properties.get(LATEST_OF)!r})")  # fmt: skip
    return view


def _update_latest(cat: Any, main: Any, view: Any) -> dict[str, Any]:
    """Bring the view up to the main table; another writer's view commit makes it plan again from the view's own
    offsets."""
    from pyiceberg.exceptions import CommitFailedException

    from kafkalog.iceberg.latest import update_latest

    label = ".".join(view.name())
    for _ in range(COMMIT_ATTEMPTS):
        try:
            return dict(update_latest(main, view), table=label)
        except CommitFailedException:
            view = _refresh(cat, view, *label.rsplit(".", 1))
    raise IcebergCommitError(f"table {label}: other writers committed first {COMMIT_ATTEMPTS} times; the view "
                             "lags its table until the next sync")  # fmt: skip


def _refresh(cat: Any, tbl: Any, namespace: str, name: str) -> Any:
    try:
        return tbl.refresh()
    except Exception:  # noqa: BLE001 - reload through the catalog instead
        return cat.load_table((namespace, name))


def _attempt(tbl: Any, full: str, items: list, roots: list[str], isolation: str, on_corrupt: str,
             options: dict[str, str], rsm: Any, spark: Any, master: str | None,
             on_progress: ProgressCallback | None) -> SyncResult | None:  # fmt: skip
    """Plan, write and commit once; None when another writer's commit won (the files written were removed)."""
    t0 = time.perf_counter()
    resume = table_next_offsets(tbl)
    plans = plan_partitions(items, resume, isolation, options=options, rsm=rsm)
    reader = make_reader(roots, isolation, on_corrupt, options, rsm)
    parts = [p for plan in plans for p in segment_parts(plan, reader)]
    if on_progress is not None:
        on_progress("plan", len(parts), len(parts))
    next_offsets = {**resume, **{p.key: p.stop for p in plans}}
    engine = "in-process"
    t1 = time.perf_counter()
    if not plans:
        return SyncResult(full, None, 0, [], 0, next_offsets, 0, 0, isolation, engine, timings={"plan": t1 - t0})
    read_bytes = sum(p.read_bytes for p in plans)
    if spark is not None or master is not None or read_bytes > IN_PROCESS_MAX_BYTES:
        from kafkalog.iceberg.spark import write_on_spark

        engine = "spark"
        out = write_on_spark(spark, master, reader, parts, tbl, on_progress)
    else:
        if on_progress is not None:
            on_progress("write", 0, len(parts))
        out = write_parts(reader, parts, tbl.metadata, tbl.io)
        if on_progress is not None:
            on_progress("write", len(parts), len(parts))
    t2 = time.perf_counter()
    if on_progress is not None:
        on_progress("commit", 0, 1)
    props = {NEXT_OFFSETS: json.dumps(dict(sorted(next_offsets.items())), separators=(",", ":"))}
    if out.skipped:
        props[SKIPPED] = json.dumps(out.skipped, separators=(",", ":"))
    snapshot_id = _commit(tbl, out, props)
    if snapshot_id is None:
        return None
    if on_progress is not None:
        on_progress("commit", 1, 1)
    timings = {"plan": t1 - t0, "write": t2 - t1, "commit": time.perf_counter() - t2}
    if out.task_seconds:  # on Spark: the slowest task's own time (the rest of "write" is Spark's)
        timings["slowest_task"] = max(out.task_seconds)
    return SyncResult(full, snapshot_id, out.rows, [f.file_path for f in out.data_files],
                      sum(int(f.file_size_in_bytes) for f in out.data_files), next_offsets, len(plans),
                      out.segments, isolation, engine, out.skipped, timings=timings)  # fmt: skip


def _commit(tbl: Any, out: TaskOutput, props: dict[str, str]) -> int | None:
    """Commit the files in one snapshot; None (files removed) when the table moved on since it was read."""
    from pyiceberg.exceptions import CommitFailedException

    try:
        with tbl.transaction() as tx:
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                for f in out.data_files:
                    append.append_data_file(f)
    except CommitFailedException:
        remove_files(tbl.io, out.data_files)
        return None
    # any other failure may have come after the catalog took the commit: the files stay (orphans, if it did not)
    snap = tbl.current_snapshot()
    return None if snap is None else int(snap.snapshot_id)

"""``kafkalog iceberg sync``: an archive's new records appended to an Iceberg table (``kafkalog.iceberg.sync``).

Progress on a terminal (planning, writing segments, committing) like ``spark export``; the result is one line, or
one JSON object with ``--json`` (rows added, snapshot id, next offsets, files, bytes). Errors are the library's,
rendered by :mod:`.errors`: a corrupt segment is exit 1 and names it (the table unchanged); a bad catalog config,
an unreachable catalog, a table that is not kafkalog's: one line, exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from kafkalog.spark.channel import lost_text

from .errors import CliState, CommandError
from .output import Event, make_output
from .storage_opts import rsm_config_option, storage_option

_STEPS = {"plan": "planning", "write": "writing data files", "commit": "committing"}


@dataclass
class SyncEvent(Event):
    """``{"type": "iceberg-sync", "table", "snapshot_id", "rows", "files", "bytes", "next_offsets", ...}``."""

    result: dict[str, Any]
    type = "iceberg-sync"  # type: ignore[misc]

    def text(self) -> str:
        r = self.result
        v = r.get("latest")
        view = "" if not v else (f"; {v['table']}: up to date" if v["snapshot_id"] is None else
                                 f"; {v['table']}: {v['partitions']} partitions rewritten, {v['keys_written']} "
                                 f"keys, {v['tombstones']} deleted by tombstones")  # fmt: skip
        return self._main(r) + view

    @staticmethod
    def _main(r: dict[str, Any]) -> str:
        if r["snapshot_id"] is None:
            return f"{r['table']}: nothing new (next offsets of {len(r['next_offsets'])} partitions unchanged)"
        lost = [x for s in r["skipped"] for x in s.get("lost_offsets") or ()]
        skipped = f"; --on-corrupt skip: {lost_text(lost)} in {len(r['skipped'])} segments" if r["skipped"] else ""
        return (f"{r['table']}: added {r['rows']} records of {r['partitions']} partitions in snapshot "
                f"{r['snapshot_id']}: {len(r['files'])} files, {r['bytes']} bytes, {r['seconds']:.2f}s "
                f"({r['engine']}){skipped}")  # fmt: skip

    def fields(self) -> dict[str, Any]:
        return dict(self.result)


@click.group()
def iceberg() -> None:
    """Kafka history as Apache Iceberg tables."""


@iceberg.command("sync")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--table", required=True, metavar="NAMESPACE.TABLE", help="The table to append to (created).")
@click.option("--warehouse", default=None, metavar="DIR",
              help="Embedded catalog: SQLite at DIR/catalog.db, warehouse file://DIR.")
@click.option("--catalog-config", default=None, metavar="FILE",
              help="pyiceberg catalog properties (JSON or YAML): REST, Glue, Hive, an S3 warehouse ...")
@click.option("--isolation", type=click.Choice(["read_committed", "read_uncommitted"]), default="read_committed",
              show_default=True)
@click.option("--master", default=None, help="Run the decode on Spark at this master (default: in this process "
              "up to 2 GiB to read, else local[*]).")
@click.option("--on-corrupt", type=click.Choice(["fail", "skip"]), default="fail", show_default=True)
@click.option("--clean-orphans", is_flag=True, default=None,
              help="Remove files of killed syncs (always done on a local warehouse; elsewhere files over 1 h old).")
@click.option("--latest-by-key", "latest_table", default=None, metavar="NAMESPACE.TABLE",
              help="Also keep this table at one row per (topic, partition, key): the latest value, tombstones "
              "deleting the key (created).")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object with what was added.")
@rsm_config_option
@storage_option
@click.pass_obj
def sync(state: CliState | None, roots: tuple[str, ...], table: str, warehouse: str | None,
         catalog_config: str | None, isolation: str, master: str | None, on_corrupt: str,
         clean_orphans: bool | None, latest_table: str | None, json_mode: bool, rsm: Any,
         storage_opts: dict[str, str]) -> None:  # fmt: skip
    """Append to --table every record under ROOT... (log dirs, partition dirs, URLs, tiered buckets) that the
    table does not hold yet, in one snapshot; resume offsets live in the snapshot (kafkalog.next-offsets).

    Exit 0 synced (also when nothing was new), 1 a corrupt segment (--on-corrupt fail), 2 usage, catalog or I/O
    error.
    """
    if (warehouse is None) == (catalog_config is None):
        raise CommandError("give one of --warehouse DIR and --catalog-config FILE")
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        raise CommandError("pyiceberg is not installed: pip install 'kafkalog[spark]'") from None
    from kafkalog.iceberg import sync as run_sync

    state = state or CliState()
    output = make_output(json_mode=json_mode, quiet=state.quiet)
    with output.progress("planning") as bar:
        current: dict[str, Any] = {"step": "", "done": 0}

        def progress(step: str, done: int, total: int) -> None:
            if step != current["step"]:
                current["step"] = step
                bar.update(description=_STEPS.get(step, step), total=total if step == "write" else None)
            if step == "write" and done > current["done"]:
                bar.advance(done - current["done"])
                current["done"] = done

        result = run_sync(list(roots), table, warehouse=warehouse, catalog=catalog_config, isolation=isolation,
                          rsm_config=rsm, on_corrupt=on_corrupt, master=master, storage_options=storage_opts,
                          clean_orphans_files=clean_orphans, on_progress=progress,
                          latest_table=latest_table)  # fmt: skip
    output.emit(SyncEvent(result.to_dict()))

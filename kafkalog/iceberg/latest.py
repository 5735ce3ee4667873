"""The latest-value-per-key view of a synced table: one row per (topic, partition, key), a compacted topic as a
table.

The view is a second Iceberg table with the main table's columns, partitioned by ``identity(topic)`` and
``identity(partition)``. It holds, for every key of every topic-partition, the row of the record with the highest
offset among the main table's rows, and no row for a key whose latest record is a tombstone (null value): what a
consumer that read the whole log keeps in a map, and what Kafka's cleaner converges to (the view of a partition
before and after compaction is the same; ``tests/iceberg/test_iceberg_latest.py`` checks both against Kafka's dump).
Records without a key belong to no key: they are not in the view (a compacted topic's leader refuses them and the
cleaner drops them).

The view is derived from the main table, never from the archive: its own snapshots carry ``kafkalog.next-offsets``
too, the offsets of the main table it has folded in. A sync commits the main table first, then folds the main
table's rows in [view's next offset, main table's next offset) of each partition into the view, in one overwrite
snapshot: the files of the partitions that changed are replaced by files holding the merged rows (copy-on-write per
Kafka partition: its cost is the size of the changed partitions' views, not of the history). A sync killed between
the two commits leaves the view behind the main table, never ahead or wrong; the next sync (also one with nothing
new in the archive) folds in what is missing first. The view is read_committed exactly when the main table is.
"""

from __future__ import annotations

import json
from typing import Any

from kafkalog.iceberg.offsets import NEXT_OFFSETS, table_next_offsets

__all__ = ["LATEST_OF", "LatestResult", "latest_partition_spec", "latest_rows", "update_latest"]

#: the view's table property naming the main table it is the view of
LATEST_OF = "kafkalog.latest-of"
_KEY_COLUMNS = ("topic", "partition", "key")


class LatestResult(dict):
    """What a view update did: ``snapshot_id`` (None: the view already held everything), ``keys_written`` (rows
    of the changed partitions after the merge), ``tombstones`` (keys deleted), ``partitions`` (changed)."""


def latest_partition_spec() -> Any:
    """identity(topic), identity(partition): a sync replaces the view files of the partitions it changed only."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "topic"),
                         PartitionField(2, 1001, IdentityTransform(), "partition"))  # fmt: skip


def latest_rows(rows: Any) -> Any:
    """The row of the highest offset of every (topic, partition, key) of ``rows`` (an Arrow table with the main
    table's columns), rows without a key left out; tombstones (null value) kept, as rows with a null value."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = rows.filter(pc.is_valid(rows.column("key")))
    n = rows.num_rows
    if n == 0:
        return rows
    order = pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in (*_KEY_COLUMNS, "offset")])
    ordered = rows.take(order)
    last = np.ones(n, dtype=bool)  # the last row of each key in (key, offset) order holds its highest offset
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for name in _KEY_COLUMNS:
            col = ordered.column(name)
            same &= pc.equal(col.slice(0, n - 1), col.slice(1)).to_numpy(zero_copy_only=False)
        last[:-1] = ~same
    return ordered.filter(pa.array(last))


def _tp_filter(tps: list[tuple[str, int]]) -> Any:
    from pyiceberg.expressions import And, EqualTo, Or

    parts = [And(EqualTo("topic", t), EqualTo("partition", p)) for t, p in tps]
    return parts[0] if len(parts) == 1 else Or(*parts)


def _new_rows(main: Any, ranges: dict[tuple[str, int], tuple[int, int]]) -> Any:
    """The main table's rows of offsets [lo, hi) per partition (data files pruned by their statistics)."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan, Or

    parts = [And(EqualTo("topic", t), EqualTo("partition", p), GreaterThanOrEqual("offset", lo), LessThan("offset", hi))
             for (t, p), (lo, hi) in sorted(ranges.items())]  # fmt: skip
    return main.scan(row_filter=parts[0] if len(parts) == 1 else Or(*parts)).to_arrow()


def _merge(old: Any, new_latest: Any) -> tuple[Any, int]:
    """``old`` view rows without the keys ``new_latest`` names, plus ``new_latest``'s non-tombstones; and the
    tombstone count."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kafkalog.iceberg.schema import arrow_schema

    schema = arrow_schema()
    old, new_latest = old.cast(schema), new_latest.cast(schema)
    keep = []
    for (topic, partition), group in _by_partition(new_latest).items():
        mine = old.filter(pc.and_(pc.equal(old.column("topic"), topic), pc.equal(old.column("partition"), partition)))
        keep.append(mine.filter(pc.invert(pc.is_in(mine.column("key"), value_set=group.column("key")))))
    live = pc.is_valid(new_latest.column("value"))
    tombstones = new_latest.num_rows - pc.sum(live.cast(pa.int64())).as_py() if new_latest.num_rows else 0
    merged = pa.concat_tables([*keep, new_latest.filter(live)]) if keep else new_latest.filter(live)
    return merged.sort_by([(c, "ascending") for c in ("topic", "partition", "offset")]), int(tombstones or 0)


def _by_partition(rows: Any) -> dict[tuple[str, int], Any]:
    import pyarrow.compute as pc

    out = {}
    pairs = rows.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([]).to_pylist()
    for d in pairs:
        out[(d["topic"], d["partition"])] = rows.filter(pc.and_(pc.equal(rows.column("topic"), d["topic"]),
                                                                 pc.equal(rows.column("partition"), d["partition"])))  # fmt: skip
    return out


def update_latest(main: Any, view: Any) -> LatestResult:
    """Fold the main table's rows the view lacks into the view, in one snapshot whose ``kafkalog.next-offsets`` is
    the main table's; raises pyiceberg's ``CommitFailedException`` when another writer committed to the view
    first (the caller refreshes and calls again: the plan is made from the view's own offsets)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from kafkalog.iceberg.write import remove_files

    target = table_next_offsets(main)
    have = table_next_offsets(view)
    if have == target and (view.current_snapshot() is not None or not target):
        return LatestResult(snapshot_id=None, keys_written=0, tombstones=0, partitions=0)
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for key, stop in target.items():
        lo = have.get(key, 0)
        if stop > lo:
            topic, _, p = key.rpartition("-")
            ranges[(topic, int(p))] = (lo, stop)
    new_latest = latest_rows(_new_rows(main, ranges)) if ranges else None
    changed = sorted(_by_partition(new_latest)) if new_latest is not None and new_latest.num_rows else []
    props = {NEXT_OFFSETS: json.dumps(dict(sorted({**have, **target}.items())), separators=(",", ":"))}
    old_files, written, tombstones, files = [], 0, 0, []
    if changed:
        scan = view.scan(row_filter=_tp_filter(changed))
        old_files = [task.file for task in scan.plan_files()]
        merged, tombstones = _merge(scan.to_arrow(), new_latest)
        written = merged.num_rows
        if written:
            files = list(_dataframe_to_data_files(table_metadata=view.metadata, df=merged, io=view.io))
    try:
        with view.transaction() as tx:
            update = tx.update_snapshot(snapshot_properties=props)
            with update.overwrite() if old_files else update.fast_append() as ow:  # nothing replaced: an append
                for f in old_files:
                    ow.delete_data_file(f)
                for f in files:
                    ow.append_data_file(f)
    except CommitFailedException:
        remove_files(view.io, files)
        raise
    snap = view.current_snapshot()
    return LatestResult(snapshot_id=None if snap is None else int(snap.snapshot_id), keys_written=written,
                        tombstones=tombstones, partitions=len(changed))  # fmt: skip

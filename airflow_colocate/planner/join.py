"""What the control plane decides about a join before its Spark job is submitted: the SQL of a
structured join (:func:`structured_sql`), and what the catalog's sizes and file lists say of the
buckets read (:func:`bucket_facts`), which the plan carries to the job. The job weighs those facts
against what only the running Spark knows (:mod:`airflow_colocate.spark.bucket_join`), and predicts
each join of Spark's plan itself (:func:`airflow_colocate.spark.join_job.predict_join`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_colocate.core.contract import BucketFacts, ReadTable
from airflow_colocate.core.errors import InvalidArgument

if TYPE_CHECKING:
    from airflow_colocate.model.views import TableView


JOIN_SQL = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL OUTER JOIN",
            "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN"}


def structured_sql(views: Sequence[TableView], on: Sequence[Sequence[Sequence[str]]], how: str,
                   columns: Sequence[str]) -> str:
    """SQL for ``views[0] JOIN views[1] ON on[0] JOIN views[2] ON on[1] …``; tables partitioned
    alike also join on the partition column, the seeds' ``(dt, id)`` shape."""
    if how not in JOIN_SQL:
        raise InvalidArgument(f"invalid join type {how!r}: expected one of {', '.join(JOIN_SQL)}")
    if len(views) < 2 or len(on) != len(views) - 1:
        raise InvalidArgument(f"a structured join of {len(views)} tables needs {max(len(views) - 1, 1)} key lists in 'on', got {len(on)}")
    known = {c.lower() for v in views for c, _ in v.columns}
    for col in columns:
        if col.lower() not in known:
            raise InvalidArgument(f"column {col!r} is in none of the joined tables ({', '.join(v.name for v in views)})")
    sql = f"SELECT {', '.join(columns) or '*'} FROM {views[0].name}"
    for i, (view, pairs) in enumerate(zip(views[1:], on), 1):
        conds = []
        if view.partition_cols and views[0].partition_cols:
            conds.append(f"{views[0].name}.{views[0].partition_cols[0]} = {view.name}.{view.partition_cols[0]}")
        for pair in pairs:
            if len(pair) != 2:
                raise InvalidArgument(f"join key {pair!r} must be a [left column, right column] pair")
            conds.append(f"{pair[0]} = {view.name}.{pair[1]}")
        if not pairs:
            raise InvalidArgument(f"join {i} ({view.name}) has no equality keys")
        sql += f" {JOIN_SQL[how]} {view.name} ON " + " AND ".join(conds)
    return sql


# ---------------------------------------------------------------------- bucket-level hash join
#
# Doris joins bucket by bucket with a hash join; Spark's colocated join sorts both sides of every
# bucket first. A shuffled hash join of two bucketed scans keeps the zero-Exchange plan and drops
# the sorts, but it holds the whole build side of one bucket in an executor task's memory, with no
# spill. The catalog knows every bucket's bytes and rows, so the plan carries each table's largest
# bucket and the join job hints SHUFFLE_HASH only on the tables whose every bucket (summed over the
# partitions read) fits the budget (spark.bucket_join); Spark builds one
# of the hinted sides it may build for the join type (inner: the smaller; left outer, semi, anti:
# the right; right outer: the left; full outer: either), and sort-merges a join with no such side.

EXPANSION = 3  # decoded rows in a hash map take about this many times their parquet bytes, plus
ROW_OVERHEAD = 16  # bytes a row for the map's pointers


def build_estimate(bytes_: int, rows: int) -> int:
    """Estimated memory of one bucket's rows in a hash map, from its parquet bytes and rows."""
    return EXPANSION * bytes_ + ROW_OVERHEAD * rows


def bucket_sizes(table: ReadTable) -> list[tuple[int, int]] | None:
    """(bytes, rows) per bucket seq of a ReadTable, summed over the partitions it reads (a bucketed
    scan reads bucket b of every partition in one task), from the catalog's sizes of the chosen
    replica (the first candidate); None when the plan carries no sizes. A table read coalesced
    (``read_buckets``) is sized per task: bucket b with b+n, b+2n, ..."""
    sizes = [(0, 0)] * (table.read_buckets or table.bucket_num)
    for part in table.partitions:
        if not part.candidates:
            if any(part.bucket_paths):
                return None
            continue
        for seq, candidates in enumerate(part.candidates):
            if part.bucket_paths[seq] and candidates:
                b, r = sizes[seq % len(sizes)]
                sizes[seq % len(sizes)] = (b + candidates[0].bytes, r + candidates[0].rows)
    return sizes


def one_file_per_bucket(tables: Sequence[ReadTable]) -> bool:
    """Every bucket of every bucketed table holds one file per partition in the replica chosen to
    read (the catalog's file lists): what lets a bucket's files be read in key order, partition by
    partition, with no sort (``java/.../colocate/ordered/SkipSortedSort.java``). A replica whose
    files the catalog did not record counts as not known, so not one; nor does a table read
    coalesced (``read_buckets``), whose task reads several buckets' files."""
    for t in tables:
        if not t.bucketed:
            continue
        if t.read_buckets:
            return False
        for part in t.partitions:
            for seq, path in enumerate(part.bucket_paths):
                if not path:
                    continue
                if seq >= len(part.candidates) or not part.candidates[seq]:
                    return False
                files = part.candidates[seq][0].files
                if files is None or len(files) > 1:
                    return False
    return True


def read_orders(tables: Sequence[ReadTable]) -> list[list[str]]:
    """The column orders the colocated buckets are read in: (partition column, bucket key...) of
    each bucketed table, and the bucket key alone when the table reads one partition (lower case)."""
    orders = []
    for t in tables:
        if not t.bucketed:
            continue
        dist = [c.lower() for c in t.dist_cols]
        orders.append([c.lower() for c in t.partition_cols] + dist)
        if len(t.partitions) <= 1:
            orders.append(dist)
    return orders


def bucket_facts(tables: Sequence[ReadTable]) -> BucketFacts:
    """What the catalog's sizes and file lists say of the bucketed reads, for the join job: each
    table's largest bucket estimated in memory (:func:`build_estimate` of :func:`bucket_sizes`),
    the tables whose plan carries no sizes, :func:`one_file_per_bucket` and :func:`read_orders`.
    Worked out from the replica each bucket reads first; a failover reads another copy of the same
    files, which the catalog recorded with the same sizes."""
    largest: dict[str, int] = {}
    unsized = []
    for t in tables:
        if not t.bucketed:
            continue
        sizes = bucket_sizes(t)
        if sizes is None:
            unsized.append(t.name)
            continue
        largest[t.name] = max((build_estimate(b, r) for b, r in sizes), default=0)
    return BucketFacts(largest_bucket=largest, unsized=unsized, one_file_per_bucket=one_file_per_bucket(tables),
                       read_orders=read_orders(tables))

"""Register catalog tables in a Spark session so ``spark.sql`` can read (and join) them.

A bucketed table becomes a hidden backing table ``__cl_<name>``::

    CREATE TABLE `__cl_orders` (<columns>, `__bucket` INT) USING parquet
      PARTITIONED BY (<partition column>, `__bucket`)
      CLUSTERED BY (<distribution columns>) INTO <n> BUCKETS
      LOCATION '<an empty directory>'

with one catalog partition per (partition value, bucket) whose LOCATION is the replica directory
chosen for that bucket (all added by ONE ``ALTER TABLE … ADD PARTITION … PARTITION …`` statement),
and a temporary view ``orders`` that selects the table's columns, so nobody sees ``__bucket``.
Spark's bucketed scan then reports ``HashPartitioning(dist cols, n)`` and a join of two such
tables on the bucket key plans no Exchange. ``bucketed=False`` (the fallback for an unstable
group) registers the same partitions without ``CLUSTERED BY``, and Spark shuffles or broadcasts.
"""

from __future__ import annotations

import tempfile

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.planner.contract import ReadTable

BUCKET_COLUMN = "__bucket"
BACKING_PREFIX = "__cl_"

_empty_dirs: dict[int, str] = {}


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def backing_table_name(name: str) -> str:
    return f"{BACKING_PREFIX}{name}"


def _empty_location(spark) -> str:
    """An empty local directory for the backing tables' own LOCATION (every partition has its own)."""
    key = id(spark)
    if key not in _empty_dirs:
        _empty_dirs[key] = tempfile.mkdtemp(prefix="colocate-empty-")
    return "file://" + _empty_dirs[key]


def _check(table: ReadTable) -> None:
    names = [c[0] for c in table.columns]
    lower = {n.lower() for n in names}
    if len(table.partition_cols) > 1:
        raise ColocateError(f"table {table.name}: at most one partition column is supported, got {table.partition_cols}")
    for col in [*table.dist_cols, *table.partition_cols]:
        if col.lower() not in lower:
            raise ColocateError(f"table {table.name}: column {col!r} is not among its columns {names}")
    if BUCKET_COLUMN in lower:
        raise ColocateError(f"table {table.name}: the column name {BUCKET_COLUMN!r} is reserved")
    if not table.partition_cols and len(table.partitions) > 1:
        raise ColocateError(f"table {table.name}: an unpartitioned table has one partition, got {len(table.partitions)}")
    for part in table.partitions:
        if len(part.bucket_paths) != table.bucket_num:
            raise ColocateError(
                f"table {table.name} partition {part.value!r}: {len(part.bucket_paths)} bucket paths for "
                f"{table.bucket_num} buckets"
            )


def create_statements(table: ReadTable, location: str) -> list[str]:
    """The SQL that registers one table (exposed for tests and for the explain text)."""
    _check(table)
    part_cols = [c for c in table.partition_cols]
    part_lower = {c.lower() for c in part_cols}
    data_cols = [c for c in table.columns if c[0].lower() not in part_lower]
    part_defs = [c for p in part_cols for c in table.columns if c[0].lower() == p.lower()]
    backing = quote_ident(backing_table_name(table.name))
    col_defs = ", ".join(f"{quote_ident(n)} {t}" for n, t in [*data_cols, *part_defs, (BUCKET_COLUMN, "INT")])
    partitioned = ", ".join(quote_ident(n) for n, _ in [*part_defs, (BUCKET_COLUMN, "INT")])
    clustered = ""
    if table.bucketed:
        clustered = (
            f" CLUSTERED BY ({', '.join(quote_ident(c) for c in table.dist_cols)}) INTO {table.bucket_num} BUCKETS"
        )
    out = [
        f"DROP TABLE IF EXISTS {backing}",
        f"CREATE TABLE {backing} ({col_defs}) USING parquet PARTITIONED BY ({partitioned}){clustered} "
        f"LOCATION {quote_str(location)}",
    ]
    specs = []
    for part in table.partitions:
        for bucket, path in enumerate(part.bucket_paths):
            if not path:
                continue  # the bucket has no rows in this partition
            spec = [f"{quote_ident(part_defs[0][0])} = {quote_str(part.value)}"] if part_defs else []
            spec.append(f"{quote_ident(BUCKET_COLUMN)} = {bucket}")
            specs.append(f"PARTITION ({', '.join(spec)}) LOCATION {quote_str(path)}")
    if specs:
        out.append(f"ALTER TABLE {backing} ADD " + " ".join(specs))
    select = ", ".join(quote_ident(n) for n, _ in table.columns)
    out.append(f"CREATE OR REPLACE TEMP VIEW {quote_ident(table.name)} AS SELECT {select} FROM {backing}")
    return out


def register_tables(spark, tables: list[ReadTable]) -> None:
    """Register every table in the session's catalog: ``spark.sql('select … from <name>')`` works."""
    location = _empty_location(spark)
    for table in tables:
        for statement in create_statements(table, location):
            spark.sql(statement)

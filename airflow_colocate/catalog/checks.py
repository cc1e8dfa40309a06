"""Validation rules the catalog applies before a change: backend roots, columns, counts, the group schema."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlparse

from sqlalchemy import select
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.core import naming
from airflow_colocate.core.errors import (
    InvalidArgument,
    PlacementError,
    SchemaMismatch,
)
from airflow_colocate.core.sqltypes import normalize_type
from airflow_colocate.model.views import group_full_name

BACKEND_STATES = ("alive", "down", "decommissioning", "decommissioned")


ROOT_SCHEMES = ("file", "s3a", "s3", "hdfs", "gs", "abfs", "abfss", "wasbs")


MAX_BUCKETS = 65536


def normalize_root(uri: object) -> str:
    """Validate a backend root URI and drop a trailing slash so that roots compare exactly."""
    if not isinstance(uri, str) or not uri:
        raise InvalidArgument(f"invalid backend root {uri!r}: expected a URI such as 'file:///data/be1' or 's3a://lake-be1/'")
    parsed = urlparse(uri)
    if parsed.scheme not in ROOT_SCHEMES:
        raise InvalidArgument(
            f"invalid backend root {uri!r}: the scheme must be one of {', '.join(s + '://' for s in ROOT_SCHEMES)} "
            f"(e.g. 'file:///data/be1')"
        )
    if parsed.scheme == "file" and (parsed.netloc or not parsed.path.startswith("/")):
        raise InvalidArgument(f"invalid backend root {uri!r}: a local root needs an absolute path, e.g. 'file:///data/be1'")
    if parsed.scheme != "file" and not parsed.netloc:
        raise InvalidArgument(f"invalid backend root {uri!r}: {parsed.scheme}:// needs a bucket or host, e.g. '{parsed.scheme}://lake-be1/'")
    if parsed.query or parsed.fragment or any(part in ("..", ".") for part in parsed.path.split("/")):
        raise InvalidArgument(f"invalid backend root {uri!r}: no '..', '.', query or fragment allowed in a root")
    # 'file:///x/be//be1' is the folder of 'file:///x/be/be1': compare roots after collapsing slashes.
    path = re.sub(r"/{2,}", "/", parsed.path).rstrip("/")
    return f"{parsed.scheme}://{parsed.netloc}{path}"


def nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def check_columns(columns: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    cols: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in columns:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidArgument(f"invalid column {item!r}: expected a (name, type) pair such as ('o_orderkey', 'bigint')")
        name, typ = item
        naming.check_name("column", name)
        if name.lower() in seen:
            raise InvalidArgument(f"duplicate column {name!r}: column names must be unique (case-insensitively)")
        seen.add(name.lower())
        cols.append((name, normalize_type(typ)))
    if not cols:
        raise InvalidArgument("a table needs at least one column, e.g. 'o_orderkey bigint'")
    return cols


def check_col_list(kind: str, names: Sequence[str], col_types: dict[str, str], *, required: bool) -> list[str]:
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    if required and not names:
        raise InvalidArgument(f"a table needs at least one {kind} column (the bucket key), e.g. dist_cols=['o_orderkey']")
    for n in names:
        if n not in col_types:
            raise InvalidArgument(f"{kind} column {n!r} is not a column of the table: choose from {', '.join(col_types)}")
    if len(set(names)) != len(names):
        raise InvalidArgument(f"{kind} columns {names} name a column twice")
    return names


def check_counts(bucket_num: object, replication_num: object) -> None:
    if not isinstance(bucket_num, int) or isinstance(bucket_num, bool) or not 1 <= bucket_num <= MAX_BUCKETS:
        raise InvalidArgument(f"invalid bucket count {bucket_num!r}: expected an integer from 1 to {MAX_BUCKETS}, e.g. 16")
    if not isinstance(replication_num, int) or isinstance(replication_num, bool) or not 1 <= replication_num <= 16:
        raise InvalidArgument(f"invalid replication number {replication_num!r}: expected an integer from 1 to 16, e.g. 3")


def check_replication_vs_backends(s: Session, replication_num: int) -> None:
    alive = list(s.scalars(select(m.Backend).where(m.Backend.state == "alive").order_by(m.Backend.id)))
    hosts = {b.host for b in alive}
    if replication_num > len(hosts):
        listed = ", ".join(f"{b.name}@{b.host}" for b in alive) or "none"
        raise PlacementError(
            f"replication_num {replication_num} needs {replication_num} alive backends on distinct hosts, but only "
            f"{len(hosts)} are eligible ({listed}): add backends ('colocate backend add') or lower replication_num"
        )


def check_cgs(group: m.ColocateGroup, what: str, dist_types: list[str], bucket_num: int, replication_num: int) -> None:
    """Name every way ``what`` differs from the group's schema, not just the first."""
    problems = []
    want = list(group.dist_col_types)
    if len(dist_types) != len(want):
        problems.append(f"it has {len(dist_types)} distribution columns ({', '.join(dist_types)}), the group has {len(want)} ({', '.join(want)})")
    else:
        for i, (have, need) in enumerate(zip(dist_types, want)):
            if have != need:
                problems.append(f"distribution column {i + 1} has type {have}, the group needs {need}")
    if bucket_num != group.bucket_num:
        problems.append(f"bucket count is {bucket_num}, the group needs {group.bucket_num}")
    if replication_num != group.replication_num:
        problems.append(f"replication_num is {replication_num}, the group needs {group.replication_num}")
    if problems:
        raise SchemaMismatch(f"{what} does not match colocation group {group_full_name(group.db_id, group.name)}: " + "; ".join(problems))


def check_partition_of(t: m.Table, value: str) -> None:
    """The partition value must read back as the table's partition column type."""
    if t.partition_cols:
        column = t.partition_cols[0]
        col_type = {name.lower(): typ for name, typ in t.columns}[column.lower()]
        naming.check_partition_literal(value, column, col_type)


def check_duration(what: str, value, example: str) -> None:
    """A negative retention, grace or delay would act at once on what it exists to protect."""
    if value.total_seconds() < 0:
        raise InvalidArgument(f"invalid {what} {value}: it must not be negative (e.g. {example})")

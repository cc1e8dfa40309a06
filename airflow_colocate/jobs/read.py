"""Query catalog tables from your own Spark code.

    from airflow_colocate.jobs.read import register
    register(spark, {"orders": ["2026-11-01"], "lineitem": None})
    spark.sql("SELECT ... FROM orders JOIN lineitem ON o_orderkey = l_orderkey")

Tables of one stable group read bucket *b* from the same backend, so Spark joins them on the bucket
key without a shuffle. Each bucket's replica is checked against its recorded files before it is
registered; a replica that is not exact is marked bad in the catalog and the next one is used (or
the registration fails naming the bucket). Runs on the Spark driver (or a Spark Connect client),
which needs catalog access; Spark jobs launched by the operators get a plan instead.

What a call leaves in your session, and nothing else (settings and job group are restored):

- one temporary view per table, named as your query names it: ``orders`` for ``orders`` or
  ``tpch.orders``; when one call reads two tables of one name from two databases, ``a_orders`` and
  ``b_orders`` for ``a.orders`` and ``b.orders``;
- the view's hidden backing table ``colocate_registered.__cl_<view>`` (an external table over the
  replica directories, in a database of that name made for it; never your current database).

A temporary view of yours with one of those names is not replaced: the call stops naming it, unless
``replace_views=True``. :func:`unregister` (or ``with registered(...)``) drops what a call left.
A session whose catalog is Hive (your metastore) is refused: see ARCHITECTURE.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReadTable
from airflow_colocate.planner.reads import JoinReads, plan_reads


def read_plans(catalog: Catalog, tables: Mapping[str, Sequence[str] | None], *,
               disabled: bool = False, executor_hosts: Sequence[str] | None = None) -> JoinReads:
    """Read what the pure read planner needs from the catalog (the tables' replicas, their groups,
    the alive backends, the global flag) and let it decide: one place for joins and user reads."""
    return plan_query_reads(catalog, tables, disabled=disabled, executor_hosts=executor_hosts)[0]


def plan_query_reads(catalog: Catalog, tables: Mapping[str, Sequence[str] | None], *, disabled: bool = False,
                     executor_hosts: Sequence[str] | None = None, policy: str | None = None) -> tuple[JoinReads, list]:
    """:func:`read_plans` and the backends it read (a join's plan names their hosts): ONE catalog
    read transaction (``catalog.reads.query``), not one per table, group, backends, flags.
    Nothing is cached: the next query sees a commit or a backend marked down."""
    from airflow_colocate.spark.register import view_names

    views = view_names(list(tables))
    got = catalog.reads.query(tables)
    reads = {views[name]: got.reads[name] for name in tables}
    available = {b.id for b in got.backends if b.state == "alive"}
    disabled = disabled or got.flags["disable_colocate_join"]
    decided = plan_reads(reads, got.groups, available=available, disabled=disabled,
                         hosts={b.id: b.host for b in got.backends}, executor_hosts=executor_hosts,
                         names={b.id: b.name for b in got.backends}, policy=policy)
    return decided, got.backends


def register(spark, tables: Mapping[str, Sequence[str] | None], *, catalog: Catalog | None = None,
             replace_views: bool = False) -> list[ReadTable]:
    """Register ``tables`` (name -> partition values, or None for all committed) in ``spark``, a
    classic or a Spark Connect session; returns them as registered (``name``: the view; each
    bucket's checked replica in ``bucket_paths``). ``replace_views``: replace a temp view of one of
    those names that colocate did not create (else the call stops, naming it).

    With the jar's replica file system on the cluster (``spark.replica_paths.conf()`` in the session's
    or the Connect server's start settings, and a master that retries tasks), a bucket replica that
    fails while ``spark.sql`` reads it is read from the bucket's next good replica by the task's
    retry, and reported: the next call (or :func:`query`) marks it bad."""
    from airflow_colocate.spark.register import UnreadableBuckets, register_tables
    from airflow_colocate.storage import layout

    catalog = catalog or Catalog()
    reads, backends = plan_reported(catalog, tables)
    report_dirs = {b.id: layout.read_failures_dir(b.root_uri) for b in backends}
    plans = reads.tables
    try:
        registered = register_tables(spark, plans, replace_views=replace_views, report_dirs=report_dirs)
    except UnreadableBuckets as exc:
        if exc.bad:
            catalog.health.mark_replicas_bad(exc.bad)
        raise
    if registered.bad:
        catalog.health.mark_replicas_bad(registered.bad)
    return registered.tables


def query(spark, sql: str, tables: Mapping[str, Sequence[str] | None], *, catalog: Catalog | None = None,
          replace_views: bool = False) -> list:
    """Register ``tables`` as :func:`register` does, run ``sql`` and return its rows (collected).
    Unlike ``register`` + ``spark.sql``, a bucket replica that fails while the query reads it (a
    page checksum, a footer, a file gone, another bucket's rows) is marked bad and the query runs
    again reading that bucket's next replica (spark.failover); it fails only when a bucket has no
    good replica left, naming the bucket and each replica tried."""
    from airflow_colocate.core.errors import ColocateError
    from airflow_colocate.spark.failover import run_with_failover
    from airflow_colocate.spark.register import name_the_replica, register_tables

    catalog = catalog or Catalog()
    checked: list = []  # the replicas the last attempt's listing check found bad

    def attempt(current: list[ReadTable]) -> list:
        registered = register_tables(spark, current, replace_views=replace_views)
        checked[:] = registered.bad
        try:
            return spark.sql(sql).collect()
        except Exception as exc:  # the guard names table, partition, bucket: add the replica read
            named = name_the_replica(str(exc), registered.tables)
            if named is None:
                raise
            raise ColocateError(named) from exc

    try:
        rows, failover = run_with_failover(plan_reported(catalog, tables)[0].tables, attempt)
    except Exception as exc:
        if getattr(exc, "bad", None):
            catalog.health.mark_replicas_bad(exc.bad)
        raise
    if failover.bad or checked:
        catalog.health.mark_replicas_bad([*failover.bad, *checked])
        count_failovers([*failover.bad, *checked])
    return rows


def plan_reported(catalog: Catalog, tables: Mapping[str, Sequence[str] | None], **options) -> tuple[JoinReads, list]:
    """:func:`plan_query_reads` (``options`` are its own), again after marking the replicas an
    earlier registered read reported bad (:func:`collect_read_failures`), so this read does not
    choose them: every read the control plane plans is a "next time" for those reports."""
    reads, backends = plan_query_reads(catalog, tables, **options)
    if collect_read_failures(catalog, backends):
        reads, backends = plan_query_reads(catalog, tables, **options)
    return reads, backends


def collect_read_failures(catalog: Catalog, backends: Sequence) -> list:
    """Mark bad the replicas that registered tables' tasks passed over since the last call (the
    lines the replica file system left in each alive backend's read-failure folder, spark.replica_paths),
    count each as a failover, and delete the reports. Returns what was marked (paths). A backend
    that cannot be listed keeps its reports for the next call."""
    from airflow_colocate.spark.replica_paths import REPORT_SUFFIX, parse_report
    from airflow_colocate.storage import fs, layout

    found, done = [], []
    for backend in backends:
        if backend.state != "alive":
            continue
        folder = layout.read_failures_dir(backend.root_uri)
        try:
            names = [n for n, _ in fs.list_files(folder, missing_ok=True) if n.endswith(REPORT_SUFFIX)]
            for name in names:
                found += parse_report(fs.read_text(fs.join(folder, name)))
                done.append(fs.join(folder, name))
        except Exception:  # noqa: BLE001 - unreachable now (any file system's error): reports wait for the next read
            continue
    if not done:
        return []
    marked = catalog.health.mark_replicas_bad(found) if found else []
    count_failovers(found)
    for uri in done:
        try:
            fs.delete_file(uri)
        except Exception:  # noqa: BLE001 - read again next time: a replica no longer verified is left alone
            pass
    return marked


def count_failovers(bad: Sequence) -> None:
    """One ``colocate.read.failover`` per bucket a read that succeeded took from another replica
    (each replica it reported bad), tagged with the kind of failure (spark.failover)."""
    if not bad:
        return
    from airflow_colocate.jobs import metrics
    from airflow_colocate.spark.failover import failure_kind

    for b in bad:
        metrics.read_failover(b.table, reason=failure_kind(b.reason))


def unregister(spark, names: Iterable[str] | None = None) -> list[str]:
    """Drop the views ``names`` (as :func:`register` returned them; default: every view colocate
    registered in ``spark``) with their backing tables, and the ``colocate_registered`` database once
    empty; a view you replaced since is left alone. Returns the views dropped."""
    from airflow_colocate.spark.register import unregister_tables

    return unregister_tables(spark, names)


@contextmanager
def registered(spark, tables: Mapping[str, Sequence[str] | None], *, catalog: Catalog | None = None,
               replace_views: bool = False) -> Iterator[list[ReadTable]]:
    """``with registered(spark, {...}) as tables:`` :func:`register` for a block; afterwards (on
    failure too) the views it registered are dropped again."""
    done = register(spark, tables, catalog=catalog, replace_views=replace_views)
    try:
        yield done
    finally:
        unregister(spark, [t.name for t in done])

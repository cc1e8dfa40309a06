"""Per-bucket summaries of the replicas, kept current by the transaction that changes them.

A group's stability, the loads of the backends and a balance plan depend on buckets x backends, not
on how many days of history exist. ``bucket_replicas`` counts, per (table, bucket seq, backend), the
verified and bad replicas of the visible versions and their verified bytes; ``bucket_sizes`` sums,
per (table, bucket seq), the bytes of one verified replica of every visible version's bucket. A
check or a plan reads a few thousand such rows instead of millions of replica rows, and fetches
replica rows only where the counts show a problem.

Every change of a replica's state, a replica row or a visible version goes through
:func:`tracking`: it measures what the touched buckets contribute before and after the change and
adds the difference, so the summaries stay equal to a recount (:func:`drift` proves it), and it
bumps the generation of the groups of the touched tables (the incremental check reads it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Integer, and_, case, column, delete, func, select, text, true, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m

R, P = m.Replica, m.Partition

# A replica counts when it belongs to the visible version of its partition.
VISIBLE = and_(P.id == R.partition_id, P.visible_version == R.version)

_CHUNK = 400

Counts = dict[tuple[int, int, int], tuple[int, int, int]]  # (table, seq, backend) -> (verified, bytes, bad)
Sizes = dict[tuple[int, int], int]  # (table, seq) -> bytes of one replica, summed over partitions


def fetch(s: Session, q):
    """Run a query of columns on the session's connection, after flushing its pending changes:
    plain rows without the ORM's per-row result handling (a third less time on the thousands of
    rows a repair reads)."""
    s.flush()
    return s.connection().execute(q)


def fetch_sql(s: Session, sql: str) -> list:
    """Rows of a plain SQL query (no bound parameters) as the driver returns them, after flushing
    the session: for the generated ``VALUES`` joins of the repair's hot reads, which SQLAlchemy
    would compile anew on every call."""
    s.flush()
    return s.connection().exec_driver_sql(sql).fetchall()


_COMPILED: dict[str, tuple[str, list[int], list]] = {}


def run_many(s: Session, key: str, build: Callable[[], object], names: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Run the ``INSERT``/``UPDATE`` that ``build()`` makes once per row of ``rows`` (plain tuples
    of the parameters ``names``), as one executemany.

    On SQLite the statement is compiled once per process (cached under ``key``) and the tuples go
    to the driver's ``executemany`` with each column's bind processing (dates, JSON) applied as
    SQLAlchemy would: its own executemany builds and processes a parameter dict per row, most of
    the time of registering a repair's thousands of clones. Elsewhere SQLAlchemy's executemany
    (on PostgreSQL: its batched ``VALUES`` form) runs with a dict per row."""
    if not rows:
        return
    s.flush()
    conn = s.connection()
    if conn.dialect.name != "sqlite":
        conn.execute(build(), [dict(zip(names, r)) for r in rows])
        return
    cached = _COMPILED.get(key)
    if cached is None:
        compiled = build().compile(dialect=conn.dialect, column_keys=list(names))
        order = [list(names).index(n) for n in compiled.positiontup]
        procs = [compiled.binds[n].type.dialect_impl(conn.dialect).bind_processor(conn.dialect)
                 for n in compiled.positiontup]
        cached = _COMPILED[key] = (compiled.string, order, procs)
    sql, order, procs = cached
    if order == list(range(len(names))) and not any(procs):
        params = [tuple(r) for r in rows]
    else:
        params = list(zip(*[_processed([r[i] for r in rows], p) for i, p in zip(order, procs)]))
    conn.exec_driver_sql(sql, params)


def _processed(values: list, process) -> list:
    """One column's values through its bind processor, each distinct object once: a batch's rows
    share their timestamps (formatting one for SQLite costs 5 us)."""
    if process is None:
        return values
    done: dict[int, object] = {}
    out = []
    for v in values:
        key = id(v)
        if key not in done:
            done[key] = process(v)
        out.append(done[key])
    return out


def chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def int_values(names: Sequence[str], rows: Iterable[Sequence[int]]):
    """``rows`` of integers as a ``SELECT`` of a ``VALUES`` list with columns ``names``: one statement
    for any number of them (inline integers, no bound-parameter limit), rendered as plain text
    (SQLAlchemy's own ``values()`` renders each literal separately, milliseconds per hundred)."""
    listed = ", ".join("(" + ", ".join(str(int(x)) for x in row) + ")" for row in rows)
    named = ", ".join(f"column{i + 1} AS {n}" for i, n in enumerate(names))
    return text(f"SELECT {named} FROM (VALUES {listed}) AS v").columns(*[column(n, Integer) for n in names])


def key_chunks(s: Session, keys: list) -> Iterator[list]:
    """``keys`` in as few lists as one :func:`replica_keys` condition takes: all at once on SQLite
    (inline integers), :data:`_CHUNK` at a time elsewhere (bound parameters)."""
    return iter([keys] if keys and s.get_bind().dialect.name == "sqlite" else chunks(keys))


def replica_keys(s: Session, names: Sequence[str], keys: Sequence[Sequence[int]]):
    """A condition on ``replicas``: its columns ``names`` equal one of ``keys``.

    SQLite (3.40) never searches an index for a row-value ``IN`` list: it scans every replica and
    probes the list, so each such statement grew with the whole history. There the keys are a
    ``VALUES`` table joined to the replicas through their index, the rows picked by id; PostgreSQL
    plans the ``IN`` list as index scans (tests/catalog/test_query_plans.py)."""
    if s.get_bind().dialect.name == "sqlite":  # as text: building and compiling the ORM join cost more than running it
        listed = ", ".join("(" + ", ".join(str(int(x)) for x in row) + ")" for row in keys)
        on = " AND ".join(f"r.{R.__table__.c[n].name} = k.column{i + 1}" for i, n in enumerate(names))
        return R.id.in_(text(f"SELECT r.id FROM (VALUES {listed}) AS k JOIN replicas AS r ON {on}")
                        .columns(column("id", Integer)))
    return tuple_(*[getattr(R, n) for n in names]).in_([tuple(x) for x in keys])


def _conditions(s: Session, partitions: Iterable[int] = (), buckets: Iterable[tuple[int, int]] = (),
                columns: Iterable[tuple[int, int]] = ()) -> list:
    """Replica predicates covering whole buckets: a partition, a (partition, seq) or a (table, seq)."""
    conds = [R.partition_id.in_(c) for c in chunks(sorted(set(partitions)))]
    conds += [replica_keys(s, ("partition_id", "bucket_seq"), c) for c in chunks(sorted(set(buckets)))]
    conds += [replica_keys(s, ("table_id", "bucket_seq"), c) for c in chunks(sorted(set(columns)))]
    return conds


def measure(s: Session, cond) -> tuple[Counts, Sizes]:
    """What the replicas matching ``cond`` (whole buckets) contribute to the two summaries."""
    verified = R.state == "verified"
    q = (select(R.table_id, R.bucket_seq, R.backend_id, func.sum(case((verified, 1), else_=0)),
                func.sum(case((verified, R.bytes), else_=0)), func.sum(case((R.state == "bad", 1), else_=0)))
         .join(P, VISIBLE).where(R.state.in_(("verified", "bad")), cond)
         .group_by(R.table_id, R.bucket_seq, R.backend_id))
    counts: Counts = {(t, seq, be): (int(v), int(b), int(bad)) for t, seq, be, v, b, bad in s.execute(q)}
    one = (select(R.table_id.label("table_id"), R.bucket_seq.label("bucket_seq"), func.max(R.bytes).label("bytes"))
           .join(P, VISIBLE).where(verified, cond).group_by(R.table_id, R.partition_id, R.bucket_seq).subquery())
    q = select(one.c.table_id, one.c.bucket_seq, func.sum(one.c.bytes)).group_by(one.c.table_id, one.c.bucket_seq)
    sizes: Sizes = {(t, seq): int(b) for t, seq, b in s.execute(q)}
    return counts, sizes


def _measure_all(s: Session, conds: list) -> tuple[Counts, Sizes]:
    counts: dict = defaultdict(lambda: (0, 0, 0))
    sizes: dict = defaultdict(int)
    for cond in conds:
        c, z = measure(s, cond)
        for k, (v, b, bad) in c.items():
            v0, b0, bad0 = counts[k]
            counts[k] = (v0 + v, b0 + b, bad0 + bad)
        for k, b in z.items():
            sizes[k] += b
    return dict(counts), dict(sizes)


def _insert(s: Session, model):
    dialect = s.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(model)


def add(s: Session, counts: Counts, sizes: Sizes) -> None:
    """Add (signed) contributions to the summaries."""
    def replicas_upsert():
        ins = _insert(s, m.BucketReplicas.__table__)
        return ins.on_conflict_do_update(
            index_elements=["table_id", "bucket_seq", "backend_id"],
            set_={"verified": m.BucketReplicas.verified + ins.excluded.verified,
                  "bytes": m.BucketReplicas.bytes + ins.excluded.bytes,
                  "bad": m.BucketReplicas.bad + ins.excluded.bad})

    def sizes_upsert():
        ins = _insert(s, m.BucketSize.__table__)
        return ins.on_conflict_do_update(index_elements=["table_id", "bucket_seq"],
                                         set_={"bytes": m.BucketSize.bytes + ins.excluded.bytes})

    # sorted: concurrent writers on PostgreSQL take the rows' locks in one order (no deadlock)
    run_many(s, "summary.add.replicas", replicas_upsert, ("table_id", "bucket_seq", "backend_id", "verified", "bytes", "bad"),
             [(*k, *v) for k, v in sorted(counts.items()) if any(v)])
    run_many(s, "summary.add.sizes", sizes_upsert, ("table_id", "bucket_seq", "bytes"),
             [(*k, b) for k, b in sorted(sizes.items()) if b])


def touch_groups(s: Session, group_ids: Iterable[int | None]) -> None:
    """Something a stability check reads changed in these groups."""
    ids = sorted({g for g in group_ids if g is not None})
    if ids:
        s.execute(update(m.ColocateGroup).where(m.ColocateGroup.id.in_(ids))
                  .values(generation=m.ColocateGroup.generation + 1).execution_options(synchronize_session=False))
        for g in s.identity_map.values():  # keep loaded group rows in step with the database
            if isinstance(g, m.ColocateGroup) and g.id in ids:
                s.expire(g, ["generation"])


def touch_tables(s: Session, table_ids: Iterable[int]) -> None:
    ids = sorted(set(table_ids))
    groups: set[int] = set()
    for chunk in chunks(ids):
        groups.update(g for g in s.scalars(select(m.Table.group_id).where(m.Table.id.in_(chunk))) if g is not None)
    touch_groups(s, groups)


@contextmanager
def tracking(s: Session, *, partitions: Iterable[int] = (), buckets: Iterable[tuple[int, int]] = (),
             columns: Iterable[tuple[int, int]] = ()) -> Iterator[None]:
    """Keep the summaries exact across a change of the replicas of the given whole buckets
    (partitions, (partition, seq) pairs or (table, seq) columns) or of their visible versions, and
    bump the generation of their groups. The block must change nothing outside them."""
    partitions, buckets, columns = list(partitions), list(buckets), list(columns)
    conds = _conditions(s, partitions, buckets, columns)
    s.flush()
    before = _measure_all(s, conds)
    yield
    s.flush()
    after = _measure_all(s, conds)
    counts = {k: tuple(a - b for a, b in zip(after[0].get(k, (0, 0, 0)), before[0].get(k, (0, 0, 0))))
              for k in after[0].keys() | before[0].keys()}
    sizes = {k: after[1].get(k, 0) - before[1].get(k, 0) for k in after[1].keys() | before[1].keys()}
    add(s, {k: v for k, v in counts.items() if any(v)}, {k: v for k, v in sizes.items() if v})
    tables = {t for t, _ in columns}
    pids = sorted(set(partitions) | {p for p, _ in buckets})
    for chunk in chunks(pids):
        tables.update(s.scalars(select(P.table_id).where(P.id.in_(chunk)).distinct()))
    touch_tables(s, tables)


def forget_table(s: Session, table_id: int) -> None:
    """A purged table's rows go with it."""
    s.execute(delete(m.BucketReplicas).where(m.BucketReplicas.table_id == table_id))
    s.execute(delete(m.BucketSize).where(m.BucketSize.table_id == table_id))


def recount(s: Session) -> tuple[Counts, Sizes]:
    """The summaries computed from every replica row (a full scan: for checks and repairs only)."""
    return measure(s, true())


def remeasure(s: Session, columns: list[tuple[int, int]]) -> None:
    """Replace the summary rows of whole (table, seq) columns by a recount of their replicas: after
    a change whose difference is not known from the summaries themselves."""
    for chunk in chunks(sorted(set(columns))):
        s.execute(delete(m.BucketReplicas).where(tuple_(m.BucketReplicas.table_id, m.BucketReplicas.bucket_seq).in_(chunk)))
        s.execute(delete(m.BucketSize).where(tuple_(m.BucketSize.table_id, m.BucketSize.bucket_seq).in_(chunk)))
    if columns:
        add(s, *_measure_all(s, _conditions(s, columns=columns)))


def stored(s: Session) -> tuple[Counts, Sizes]:
    counts = {(r.table_id, r.bucket_seq, r.backend_id): (r.verified, r.bytes, r.bad)
              for r in s.scalars(select(m.BucketReplicas))}
    sizes = {(r.table_id, r.bucket_seq): r.bytes for r in s.scalars(select(m.BucketSize))}
    return ({k: v for k, v in counts.items() if any(v)}, {k: v for k, v in sizes.items() if v})


def drift(s: Session) -> list[str]:
    """Where the stored summaries differ from a recount; empty when they are exact."""
    (have_c, have_s), (want_c, want_s) = stored(s), recount(s)
    out = [f"bucket_replicas {k}: stored {have_c.get(k)}, recounted {want_c.get(k)}"
           for k in sorted(have_c.keys() | want_c.keys()) if have_c.get(k) != want_c.get(k)]
    out += [f"bucket_sizes {k}: stored {have_s.get(k)}, recounted {want_s.get(k)}"
            for k in sorted(have_s.keys() | want_s.keys()) if have_s.get(k) != want_s.get(k)]
    return out


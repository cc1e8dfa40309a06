"""The control plane at production volume: a 3-year lake must feel like a small one.

    .venv/bin/python bench/bench_catalog.py [--scales 1,10,100] [--dbs sqlite,postgresql]

Builds, at each scale (a share of 1,095 days of history), a catalog of one group of 10 tables x
64 buckets x 3 replicas on 24 backends, daily partitions, and times each control-plane operation
in a fresh child process on it (time of the catalog work after imports; peak RSS of the child).
At 100% the catalog holds about 2.1 million replica rows. Each table has 3 schema versions (a
column added, then widened), and the oldest third of the history (a year at 100%) has been dropped
by the tables' retention into the recycle bin: its replica rows stay (invisible, until purged), so
every query must skip them.

The catalog is built quickly but honestly: backends, group and tables through the real API, then
the rows of every daily write (partition, version, write job, replicas, events, bucket summaries,
and the gc of its staging directory) by bulk insert, exactly as the write path records them.
``--check`` (and tests/catalog/test_bench_catalog.py) builds a small catalog both ways and
requires every row of every table to be equal.

PostgreSQL: ``$COLOCATE_TEST_PG_URL`` if set, else a private server started with the test
suite's helper (tests/pgserver.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]
GROUP = "lake"
START = datetime(2023, 1, 1, 2, 0, tzinfo=timezone.utc)
FIRST_DAY = date(2023, 1, 1)


@dataclass(frozen=True)
class Shape:
    tables: int = 10
    days: int = 1095
    buckets: int = 64
    replicas: int = 3
    backends: int = 24

    def at(self, percent: float) -> Shape:
        return Shape(self.tables, max(1, round(self.days * percent / 100)), self.buckets, self.replicas, self.backends)

    @property
    def replica_rows(self) -> int:
        return self.tables * self.days * self.buckets * self.replicas


class Clock:
    def __init__(self, t: datetime = START) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t


def write_time(day: int, table: int) -> datetime:
    return START + timedelta(days=day, minutes=table)


def day_value(day: int) -> str:
    return (FIRST_DAY + timedelta(days=day)).isoformat()


def fake_report(plan, table: int, day: int):
    """What the write job reports for one daily write: equal rows and checksum on every replica of
    a bucket, sizes that differ between buckets and days."""
    from airflow_colocate.core.contract import ReplicaReport, WriteReport
    from airflow_colocate.storage import layout

    replicas = []
    for b in plan.buckets:
        rows = 500 + (table * 7919 + day * 104729 + b.bucket_seq * 1299709) % 1000
        checksum = hashlib.sha256(f"{table}:{day}:{b.bucket_seq}".encode()).hexdigest()
        name = layout.bucket_file_name(f"w{table}-{day}", b.bucket_seq)
        size = 1024 + rows * 40
        replicas += [ReplicaReport(b.bucket_seq, r.backend_id, r.path, [name], rows, size, checksum, {name: size})
                     for r in b.replicas]
    return WriteReport(job_id=plan.job_id, table=plan.table, partition_value=plan.partition_value, version=plan.version,
                       source_rows=sum(r.rows for r in replicas) // max(1, len(plan.buckets[0].replicas)),
                       replicas=replicas, seconds=0.0, spark_version="bench")


def daily_write(cat, table: int, day: int, work: str) -> None:
    """One daily write through the real API, catalog side (prepare_write, then commit_write)."""
    from airflow_colocate.core.contract import Source
    from airflow_colocate.planner.write import write_plan

    ticket = cat.writes.begin(f"t{table}", day_value(day))
    plan = write_plan(ticket, Source(format="parquet", path="file:///nowhere"), work)
    cat.writes.set_targets(ticket.job_id, {b.bucket_seq: [r.backend_id for r in b.replicas] for b in plan.buckets},
                          ticket.missing, {"staging_uri": plan.staging_uri})
    cat.writes.commit(ticket.job_id, fake_report(plan, table, day))


def setup(url: str, shape: Shape, root: Path):
    """Backends, the group and its tables, through the real API."""
    from airflow_colocate.catalog import Catalog

    clock = Clock(START - timedelta(days=1))
    cat = Catalog(url, actor="bench", clock=clock)
    cat.init()
    for i in range(1, shape.backends + 1):
        cat.backends.add((root / "backends" / f"be{i}").as_uri(), name=f"be{i}")
    for t in range(shape.tables):
        cat.tables.create(f"t{t}", COLUMNS, ["id"], bucket_num=shape.buckets, replication_num=shape.replicas,
                         partition_cols=["dt"], colocate_with=GROUP)
        cat.schemas.alter(f"t{t}", add=[("n", "int")])  # schema version 2
        cat.schemas.alter(f"t{t}", widen=[("n", "bigint")])  # schema version 3
    return cat, clock


def dropped_days(shape: Shape) -> int:
    """The oldest third of the history: a year of the three at 100%."""
    return shape.days // 3


def age(cat, shape: Shape, clock: Clock) -> None:
    """After the history: every table gets the retention that drops its oldest third, and the
    retention pass drops those partitions into the recycle bin, through the real API."""
    dropped = dropped_days(shape)
    if not dropped:
        return
    clock.t = write_time(shape.days, 0) + timedelta(hours=3)
    for t in range(shape.tables):
        cat.partitions.set_retention(f"t{t}", shape.days - dropped)
    cat.partitions.expire(today=FIRST_DAY + timedelta(days=shape.days))


def build_api(url: str, shape: Shape, root: Path) -> None:
    """The reference: every daily write through the API, then gc removes the staging directories."""
    cat, clock = setup(url, shape, root)
    work = (root / "runs").as_uri()
    for day in range(shape.days):
        for t in range(shape.tables):
            clock.t = write_time(day, t)
            daily_write(cat, t, day, work)
    clock.t = write_time(shape.days, 0) + timedelta(hours=2)
    cat.writes.forget_garbage(cat.writes.garbage())
    age(cat, shape, clock)
    cat.dispose()


def build_bulk(url: str, shape: Shape, root: Path, *, chunk_days: int = 20) -> None:
    """The same rows as :func:`build_api`, inserted in bulk."""
    from sqlalchemy import func, insert, select, update

    from airflow_colocate.catalog import models as m
    from airflow_colocate.model.views import WriteTicket
    from airflow_colocate.core.contract import Source
    from airflow_colocate.planner.write import write_plan
    from airflow_colocate.storage import layout

    cat, clock = setup(url, shape, root)
    work = (root / "runs").as_uri()
    group = cat.groups.get(GROUP)
    views = [cat.tables.get(f"t{t}") for t in range(shape.tables)]
    roots = {b.id: b.root_uri for b in cat.backends.list()}
    targets = tuple(tuple((be, roots[be]) for be in row) for row in group.bucket_map)
    with cat.engine.connect() as conn:
        ids = {name: (conn.scalar(select(func.max(model.id))) or 0)
               for name, model in (("partition", m.Partition), ("job", m.Job), ("replica", m.Replica), ("event", m.Event))}
    counts: dict[tuple[int, int, int], list[int]] = {}
    sizes: dict[tuple[int, int], int] = {}
    actor = cat.actor
    for first in range(0, shape.days, chunk_days):
        rows: dict[str, list[dict]] = {"partitions": [], "versions": [], "jobs": [], "replicas": [], "events": []}
        for day in range(first, min(shape.days, first + chunk_days)):
            for t, view in enumerate(views):
                now, value = write_time(day, t), day_value(day)
                ids["partition"] += 1
                ids["job"] += 1
                pid, job_id = ids["partition"], ids["job"]
                ticket = WriteTicket(job_id=job_id, table=view, partition_id=pid, partition_value=value, version=1,
                                     base_version=0, mode="overwrite", targets=targets,
                                     base_paths=tuple(tuple("" for _ in b) for b in targets), missing=())
                plan = write_plan(ticket, Source(format="parquet", path="file:///nowhere"), work)
                report = fake_report(plan, t, day)
                per_bucket = {r.bucket_seq: r.rows for r in report.replicas}
                total_rows = sum(per_bucket.values())
                dirs = sorted({layout.version_dir(root_uri, view.db, view.name, view.id, value, 1)
                               for bucket in targets for _, root_uri in bucket})
                rows["partitions"].append(dict(id=pid, table_id=view.id, value=value, bucket_num=shape.buckets,
                                               replication_num=shape.replicas, visible_version=1, next_version=2,
                                               created_at=now))
                rows["versions"].append(dict(partition_id=pid, version=1, state="committed", mode="overwrite",
                                             base_version=0, rows=total_rows, bytes=sum(r.bytes for r in report.replicas),
                                             created_at=now, finished_at=now, job_id=job_id))
                plan_json = {"table_id": view.id, "partition_id": pid, "version": 1, "dirs": dirs,
                             "targets": {str(b.bucket_seq): [r.backend_id for r in b.replicas] for b in plan.buckets},
                             "missing": []}
                rows["jobs"].append(dict(id=job_id, kind="write", group_id=group.grp_id, state="committed", plan=plan_json,
                                         progress={"rows": total_rows, "replicas": len(report.replicas)},
                                         created_at=now, updated_at=now, gc_pending=False))
                for r in report.replicas:
                    ids["replica"] += 1
                    rows["replicas"].append(dict(id=ids["replica"], table_id=view.id, partition_id=pid, version=1,
                                                 bucket_seq=r.bucket_seq, backend_id=r.backend_id, state="verified",
                                                 path=r.path, rows=r.rows, bytes=r.bytes, checksum=r.checksum,
                                                 created_at=now, verified_at=None, drop_after=None,
                                                 files=[[n, r.sizes[n]] for n in sorted(r.files)]))
                    c = counts.setdefault((view.id, r.bucket_seq, r.backend_id), [0, 0])
                    c[0] += 1
                    c[1] += r.bytes
                for seq, size in {r.bucket_seq: r.bytes for r in report.replicas}.items():
                    sizes[(view.id, seq)] = sizes.get((view.id, seq), 0) + size
                subject = f"{view.qualified_name}/{value}"
                for kind, detail in (("write.begin", {"job_id": job_id, "version": 1, "mode": "overwrite", "base_version": 0,
                                                      "missing": []}),
                                     ("write.commit", {"job_id": job_id, "version": 1, "previous": 0, "rows": total_rows,
                                                       "mode": "overwrite"})):
                    ids["event"] += 1
                    rows["events"].append(dict(id=ids["event"], ts=now, kind=kind, subject=subject, detail=detail, actor=actor))
        with cat.engine.begin() as conn:
            for model, key in ((m.Partition, "partitions"), (m.Job, "jobs"), (m.PartitionVersion, "versions"),
                               (m.Replica, "replicas"), (m.Event, "events")):
                if rows[key] and conn.dialect.name == "postgresql":
                    _copy(conn, model.__table__, rows[key])
                elif rows[key]:
                    conn.execute(insert(model.__table__), rows[key])
    writes = shape.days * shape.tables
    with cat.engine.begin() as conn:
        if counts:
            conn.execute(insert(m.BucketReplicas.__table__),
                         [dict(table_id=t, bucket_seq=seq, backend_id=be, verified=n, bytes=b, bad=0)
                          for (t, seq, be), (n, b) in sorted(counts.items())])
            conn.execute(insert(m.BucketSize.__table__),
                         [dict(table_id=t, bucket_seq=seq, bytes=b) for (t, seq), b in sorted(sizes.items())])
        conn.execute(update(m.ColocateGroup.__table__).where(m.ColocateGroup.id == group.grp_id)
                     .values(generation=m.ColocateGroup.generation + writes))
        conn.execute(insert(m.Event.__table__), [dict(id=ids["event"] + 1, ts=write_time(shape.days, 0) + timedelta(hours=2),
                                                     kind="gc", subject="catalog", detail={"versions": 0, "items": writes},
                                                     actor=actor)])
    if cat.engine.dialect.name == "postgresql":
        with cat.engine.connect() as conn:
            for name in ("partitions", "jobs", "replicas", "events"):  # the API's inserts advance the sequences
                conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), (SELECT max(id) FROM {name}))")
            conn.commit()
    age(cat, shape, clock)  # after the sequences are set: the API inserts events
    if cat.engine.dialect.name == "postgresql":
        with cat.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    else:
        with cat.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
    cat.dispose()


# What differs between any two catalogs by design: each catalog's own id and the random tokens of
# its backends' identity markers.
UNIQUE_PER_CATALOG = {"catalog_info": None, "backends": {"marker_token"}}


def _copy_value(v) -> str:
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, (dict, list)):
        v = json.dumps(v)
    return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _copy(conn, table, rows: list[dict]) -> None:
    """PostgreSQL's COPY: the same values an INSERT would store, without a round trip per batch."""
    import io

    cols = list(rows[0])
    buf = io.StringIO("".join("\t".join(_copy_value(r[c]) for c in cols) + "\n" for r in rows))
    conn.connection.cursor().copy_expert(f"COPY {table.name} ({', '.join(cols)}) FROM STDIN", buf)


def snapshot(url: str) -> dict[str, list]:
    """Every row of every table, for comparing two catalogs (minus what is unique to each)."""
    from sqlalchemy import MetaData, create_engine, select

    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    out = {}
    with engine.connect() as conn:
        for name, t in meta.tables.items():
            if name in UNIQUE_PER_CATALOG and UNIQUE_PER_CATALOG[name] is None:
                continue
            cols = [c for c in t.columns if c.name not in (UNIQUE_PER_CATALOG.get(name) or ())]
            out[name] = sorted(map(repr, conn.execute(select(*cols)).all()))
    engine.dispose()
    return out


def compare(a: dict[str, list], b: dict[str, list]) -> list[str]:
    out = []
    for name in sorted(a.keys() | b.keys()):
        x, y = a.get(name, []), b.get(name, [])
        if x != y:
            extra, missing = sorted(set(y) - set(x)), sorted(set(x) - set(y))
            out.append(f"{name}: {len(x)} rows via the API, {len(y)} in bulk; first only via the API: "
                       f"{missing[:1]}, first only in bulk: {extra[:1]}")
    return out


# ---------------------------------------------------------------------- operations (child processes)

OPERATIONS = [
    ("check", "`colocate group check` (first check after the history was written)"),
    ("check_unchanged", "the same check again, nothing changed"),
    ("loads", "backend loads (per-backend replicas and bytes)"),
    ("balance_added", "`colocate balance --dry-run` after adding a backend"),
    ("mark_down", "`colocate backend mark-down` (+ check of every group)"),
    ("balance_down", "`colocate balance --dry-run` with that backend down past the relocate delay"),
    ("mark_up", "`colocate backend mark-up` (+ check of every group)"),
    ("probe", "probe results of every backend recorded (+ check of every group)"),
    ("gc", "`colocate gc`, steady state (nothing to do)"),
    ("commit", "commit one daily write (catalog side: begin, targets, commit)"),
    ("check_after_commit", "group check after that write"),
    ("join_plan", "plan a 30-day join of two tables (replica choice per bucket)"),
    ("expire", "retention pass of every table, steady state (nothing newly expired)"),
    ("recycle_bin", "the recycle bin of every table (the Colocation page's tables)"),
]


def run_operation(url: str, op: str, shape: Shape, round_: int = 0) -> None:
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.jobs.balance import BalanceOptions, describe_plans, plan
    from airflow_colocate.jobs.read import read_plans
    from airflow_colocate.storage import fs

    started = time.perf_counter()
    cat = Catalog(url, actor="bench")
    cat.check_schema()
    if op in ("check", "check_unchanged", "check_after_commit"):
        cat.health.check_groups()
    elif op == "loads":
        cat.backends.loads()
    elif op in ("balance_added", "balance_down"):
        names = {b.id: b.name for b in cat.backends.list()}
        delay = timedelta(0) if op == "balance_down" else timedelta(minutes=30)
        describe_plans(plan(cat, BalanceOptions(relocate_delay=delay)), names)
    elif op in ("mark_down", "mark_up"):
        cat.backends.set_state("be1", "down" if op == "mark_down" else "alive", reason="bench")
        cat.health.check_groups()
    elif op == "probe":
        for b in cat.backends.list():
            cat.health.record_probe(b.id, True)
        cat.health.check_groups()
    elif op == "gc":
        items = cat.writes.garbage()
        for item in items:
            fs.delete_tree(item.uri)
        cat.writes.forget_garbage(items)
    elif op == "commit":
        daily_write(cat, 0, shape.days + round_, "file:///nowhere/runs")
    elif op == "join_plan":
        days = [day_value(d) for d in range(max(0, shape.days - 30), shape.days)]
        read_plans(cat, {"default.t0": days, "default.t1": days})
    elif op == "expire":
        cat.partitions.expire(today=FIRST_DAY + timedelta(days=shape.days))
    elif op == "recycle_bin":
        cat.partitions.recycle_bin()
    else:
        raise SystemExit(f"unknown operation {op!r}")
    seconds = time.perf_counter() - started
    cat.dispose()
    print(json.dumps({"op": op, "seconds": seconds, "rss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident set. Linux's getrusage() counts the memory of the parent
    before exec (the bench process that built the catalog), so read the high-water mark of this
    process's own address space when the system has one."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(url: str, op: str, shape: Shape, round_: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", op, "--url", url, "--shape", json.dumps(asdict(shape)),
                          "--round", str(round_)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{op} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def forget_checks(url: str) -> None:
    """Drop the recorded check answers (a cache), so that the next check computes from scratch."""
    from sqlalchemy import create_engine, delete

    from airflow_colocate.catalog import models as m

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(delete(m.GroupCheck.__table__))
    engine.dispose()


def run_interleaved(catalogs: dict[str, tuple[str, Shape]], rounds: int) -> dict[str, dict[str, dict]]:
    """Each operation ``rounds`` times in a fresh process on every catalog, the catalogs taking turns
    operation by operation, so that a busy moment of the machine hits every scale alike: median
    time, largest peak RSS per (catalog, operation)."""
    from airflow_colocate.catalog import Catalog

    runs: dict[str, dict[str, list[dict]]] = {key: {op: [] for op, _ in OPERATIONS} for key in catalogs}
    for r in range(rounds):
        for op, _ in OPERATIONS:
            for key, (url, shape) in catalogs.items():
                if op == "check":
                    forget_checks(url)
                if op == "balance_added":
                    with tempfile.TemporaryDirectory() as extra:
                        admin = Catalog(url, actor="bench")
                        added = admin.backends.add(Path(extra).as_uri(), name="be_new")
                        runs[key][op].append(measure(url, op, shape, r))
                        admin.backends.remove(added.id)
                        admin.dispose()
                    continue
                runs[key][op].append(measure(url, op, shape, r))
        print(f"round {r + 1} of {rounds} done", flush=True)
    return {key: {op: {"seconds": statistics.median(x["seconds"] for x in got), "rss_mb": max(x["rss_mb"] for x in got),
                       "all": [round(x["seconds"], 3) for x in got]} for op, got in ops.items()}
            for key, ops in runs.items()}


# ---------------------------------------------------------------------- main


def pg_server(base: Path):
    url = os.environ.get("COLOCATE_TEST_PG_URL")
    if url:
        return url, None
    sys.path.insert(0, str(REPO / "tests"))
    from pgserver import start_postgres

    server = start_postgres(base / "pg")
    return server.url, server


def fresh_url(kind: str, base: Path, label: str, pg_url: str | None) -> str:
    if kind == "sqlite":
        path = base / f"{label}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    sys.path.insert(0, str(REPO / "tests"))
    from pgserver import fresh_pg_database

    return fresh_pg_database(pg_url)


def cross_check(kind: str, base: Path, pg_url: str | None, shape: Shape) -> None:
    api, bulk = fresh_url(kind, base, "check-api", pg_url), fresh_url(kind, base, "check-bulk", pg_url)
    build_api(api, shape, base / "check")
    build_bulk(bulk, shape, base / "check")
    problems = compare(snapshot(api), snapshot(bulk))
    if problems:
        raise SystemExit("the bulk builder does not record what the write path records:\n" + "\n".join(problems))
    print(f"{kind}: bulk build equals the API build row for row ({shape})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="1,10,100", help="shares of 1,095 days, in percent")
    ap.add_argument("--dbs", default="sqlite,postgresql")
    ap.add_argument("--dir", default=None, help="where the SQLite files and the PostgreSQL server live")
    ap.add_argument("--check", action="store_true", help="only cross-check the bulk builder against the API")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each operation (the median is shown)")
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        run_operation(a.url, a.child, Shape(**json.loads(a.shape)), a.round)
        return
    base = Path(a.dir or tempfile.mkdtemp(prefix="colocate-bench-catalog-"))
    base.mkdir(parents=True, exist_ok=True)
    dbs = [d.strip() for d in a.dbs.split(",") if d.strip()]
    scales = [float(x) for x in a.scales.split(",")]
    pg_url, server = (pg_server(base) if "postgresql" in dbs else (None, None))
    try:
        for kind in dbs:
            cross_check(kind, base, pg_url, Shape(tables=2, days=3, buckets=4, replicas=2, backends=4))
        if a.check:
            return
        catalogs: dict[str, tuple[str, Shape]] = {}
        for kind in dbs:
            for pct in scales:
                shape = Shape().at(pct)
                url = fresh_url(kind, base, f"lake-{pct:g}", pg_url)
                t0 = time.perf_counter()
                build_bulk(url, shape, base / "lake")
                catalogs[f"{kind}:{pct:g}"] = (url, shape)
                print(f"{kind} {pct:g}%: built {shape.replica_rows:,} replica rows ({shape.days} days) in "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
        results = run_interleaved(catalogs, a.rounds)
        table: dict[str, dict[float, dict]] = {}
        for kind in dbs:
            for pct in scales:
                print(f"{kind} {pct:g}%:")
                for op, res in results[f"{kind}:{pct:g}"].items():
                    table.setdefault(f"{kind}:{op}", {})[pct] = res
                    print(f"  {op:<20} {res['seconds']:7.2f} s  {res['rss_mb']:6.0f} MB  (runs: {res['all']})", flush=True)
        print()
        print("| operation | " + " | ".join(f"{k} {p:g}%" for k in dbs for p in scales) + " |")
        print("| --- | " + " | ".join("---" for _ in dbs for _ in scales) + " |")
        for op, label in OPERATIONS:
            cells = []
            for kind in dbs:
                for pct in scales:
                    r = table[f"{kind}:{op}"][pct]
                    cells.append(f"{r['seconds']:.2f} s, {r['rss_mb']:.0f} MB")
            print(f"| {label} | " + " | ".join(cells) + " |")
        if len(scales) >= 2:
            lo, hi = scales[-2], scales[-1]
            print(f"\ngrowth {lo:g}% -> {hi:g}% (median time at {hi:g}% / at {lo:g}%):")
            for kind in dbs:
                ratios = {op: table[f"{kind}:{op}"][hi]["seconds"] / table[f"{kind}:{op}"][lo]["seconds"]
                          for op, _ in OPERATIONS}
                print(f"  {kind}: " + ", ".join(f"{op} {x:.2f}x" for op, x in ratios.items()))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()

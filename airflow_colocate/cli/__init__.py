"""The ``colocate`` command: administer backends, tables and colocation groups.

Errors print one line on stderr (what was wrong, what would be right) and exit 2; the catalog is
unchanged because every command is one catalog transaction.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime, timedelta

from airflow_colocate.catalog import DEFAULT_DB, FLAGS, Catalog
from airflow_colocate.core.errors import ColocateError, InvalidArgument
from airflow_colocate.core.sqltypes import parse_columns

GROUP_COLUMNS = ["GroupId", "GroupName", "TableIds", "BucketsNum", "ReplicationNum", "DistCols", "IsStable"]
MAP_COLUMNS = ["BucketIndex", "BackendIds"]


# ---------------------------------------------------------------------- output


def _jsonable(value):
    if is_dataclass(value):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def emit(args: argparse.Namespace, columns: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None) -> None:
    """Print rows as an aligned table, or as a JSON list of objects with ``--json``."""
    if getattr(args, "json", False):
        print(json.dumps([dict(zip(columns, (_jsonable(v) for v in row))) for row in rows], indent=2))
        return
    if title:
        print(title)
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    print(line)
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths)) + " |")
    print(line)
    for r in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
    print(line)
    print(f"{len(rows)} row{'s' if len(rows) != 1 else ''} in set")


def group_rows(catalog: Catalog) -> list[list[object]]:
    """``SHOW PROC '/colocation_group'``."""
    return [[g.group_id, g.full_name, ", ".join(map(str, g.table_ids)), g.bucket_num, g.replication_num,
             ", ".join(g.dist_col_types), str(g.stable).lower()] for g in catalog.groups()]


def map_rows(catalog: Catalog, ref: str, db: str) -> tuple[str, list[list[object]]]:
    """``SHOW PROC '/colocation_group/<id>'``."""
    g = catalog.group(ref, db=db)
    title = f"group {g.full_name} ({g.group_id}): {'stable' if g.stable else 'UNSTABLE: ' + (g.unstable_reason or '')}"
    return title, [[i, ", ".join(map(str, ids))] for i, ids in enumerate(g.bucket_map)]


# ---------------------------------------------------------------------- commands


def cmd_init(c: Catalog, a) -> None:
    c.init()
    print(f"catalog ready at {c.engine.url.render_as_string(hide_password=True)}")


def cmd_backend_add(c: Catalog, a) -> None:
    b = c.add_backend(a.root, name=a.name, host=a.host, capacity_bytes=_size(a.capacity))
    print(f"backend {b.name} (id {b.id}) added: root {b.root_uri}, host {b.host}")


def cmd_backend_list(c: Catalog, a) -> None:
    rows = [[b.id, b.name, b.root_uri, b.host, b.capacity_bytes, b.state, b.state_since.isoformat(timespec="seconds")]
            for b in c.backends()]
    emit(a, ["BackendId", "Name", "Root", "Host", "CapacityBytes", "State", "Since"], rows)


def cmd_backend_decommission(c: Catalog, a) -> None:
    b = c.decommission_backend(a.backend)
    c.check_groups()
    print(f"backend {b.name} (id {b.id}) is decommissioning: the next balance moves its replicas away")


def cmd_backend_remove(c: Catalog, a) -> None:
    c.remove_backend(a.backend)
    print(f"backend {a.backend} removed")


def cmd_backend_mark(c: Catalog, a) -> None:
    b = c.set_backend_state(a.backend, "down" if a.command == "mark-down" else "alive", reason=a.reason or "admin")
    c.check_groups()
    print(f"backend {b.name} (id {b.id}) is now {b.state}")


def cmd_table_create(c: Catalog, a) -> None:
    t = c.create_table(a.table, parse_columns(a.columns), [x.strip() for x in a.distributed_by.split(",") if x.strip()],
                       bucket_num=a.buckets, replication_num=a.replication,
                       partition_cols=[x.strip() for x in (a.partition_by or "").split(",") if x.strip()],
                       colocate_with=a.colocate_with, db=a.db, if_not_exists=a.if_not_exists)
    where = f" in colocation group {t.group_name} ({t.group_id})" if t.group_id else ""
    print(f"table {t.qualified_name} (id {t.id}) created{where}")


def cmd_table_alter(c: Catalog, a) -> None:
    if a.colocate_with is None and a.replication is None:
        raise InvalidArgument("nothing to alter: give --colocate-with GROUP (or '' to leave the group) and/or --replication N")
    if a.colocate_with is not None:
        t = c.alter_colocate_with(a.table, a.colocate_with, db=a.db)
    if a.replication is not None:
        t = c.set_replication_num(a.table, a.replication, db=a.db)
    print(f"table {t.qualified_name}: group {t.group_name or '(none)'}, replication_num {t.replication_num}")


def cmd_table_drop(c: Catalog, a) -> None:
    t = c.drop_table(a.table, db=a.db, force=a.force)
    if a.force:
        print(f"table {t.qualified_name} (id {t.id}) dropped and purged")
    else:
        print(f"table {t.qualified_name} (id {t.id}) dropped; 'colocate table recover {t.qualified_name}' brings it back within the retention")


def cmd_table_recover(c: Catalog, a) -> None:
    t = c.recover_table(a.table, db=a.db)
    print(f"table {t.qualified_name} (id {t.id}) recovered")


def cmd_table_purge(c: Catalog, a) -> None:
    purged = c.purge_dropped(retention=timedelta(hours=a.retention_hours))
    emit(a, ["TableId", "Table"], [[t.id, t.qualified_name] for t in purged])


def cmd_table_list(c: Catalog, a) -> None:
    rows = [[t.id, t.qualified_name, ", ".join(t.dist_cols), ", ".join(t.partition_cols), t.bucket_num,
             t.replication_num, t.group_name or "", t.state] for t in c.tables(include_dropped=a.all)]
    emit(a, ["TableId", "Table", "DistCols", "PartitionCols", "BucketsNum", "ReplicationNum", "Group", "State"], rows)


def cmd_table_show(c: Catalog, a) -> None:
    t = c.table(a.table, db=a.db)
    parts = c.partitions(a.table, db=a.db)
    if a.json:
        print(json.dumps({"table": _jsonable(t), "partitions": _jsonable(parts)}, indent=2))
        return
    print(f"table {t.qualified_name} (id {t.id})")
    print(f"  columns:         {', '.join(f'{n} {ty}' for n, ty in t.columns)}")
    print(f"  distributed by:  {', '.join(t.dist_cols)} into {t.bucket_num} buckets, replication_num {t.replication_num}")
    print(f"  partitioned by:  {', '.join(t.partition_cols) or '(not partitioned)'}")
    print(f"  colocate_with:   {t.group_name or '(none)'}{' (' + t.group_id + ')' if t.group_id else ''}")
    emit(a, ["Partition", "BucketsNum", "ReplicationNum", "VisibleVersion"],
         [[p.value, p.bucket_num, p.replication_num, p.visible_version] for p in parts])


def cmd_partition_add(c: Catalog, a) -> None:
    p = c.add_partition(a.table, a.value, bucket_num=a.buckets, replication_num=a.replication, db=a.db)
    print(f"partition {p.value} added to {a.table} ({p.bucket_num} buckets, replication_num {p.replication_num})")


def cmd_show_groups(c: Catalog, a) -> None:
    emit(a, GROUP_COLUMNS, group_rows(c))


def cmd_show_group(c: Catalog, a) -> None:
    title, rows = map_rows(c, a.group, a.db)
    emit(a, MAP_COLUMNS, rows, title=title)
    health = c.group_health(a.group, db=a.db)
    if not health.stable and not getattr(a, "json", False):
        print(f"unstable because ({health.problems} problems, checked {health.checked_at.isoformat(timespec='seconds')}):")
        for r in health.reasons:
            print(f"  - {r.text}")


def cmd_group_mark(c: Catalog, a) -> None:
    g = c.set_group_stable(a.group, a.command == "mark-stable", reason=a.reason, db=a.db)
    print(f"group {g.full_name} ({g.group_id}) marked {'stable' if g.stable else 'unstable'}")


def cmd_flag_set(c: Catalog, a) -> None:
    c.set_flag(a.flag, _bool(a.value))
    print(f"{a.flag} = {str(_bool(a.value)).lower()}")


def cmd_flag_list(c: Catalog, a) -> None:
    emit(a, ["Flag", "Value"], [[k, str(v).lower()] for k, v in c.flags().items()])


def cmd_events(c: Catalog, a) -> None:
    rows = [[e.id, e.ts.isoformat(timespec="seconds"), e.actor, e.kind, e.subject, json.dumps(e.detail, default=str)]
            for e in c.events(limit=a.limit, kind=a.kind)]
    emit(a, ["EventId", "Time", "Actor", "Kind", "Subject", "Detail"], rows)


def cmd_gc(c: Catalog, a) -> None:
    """Delete files no visible version needs, then forget their rows (a crash in between only
    means the next gc deletes nothing and forgets them)."""
    from airflow_colocate.storage import fs

    items = c.garbage(grace=timedelta(minutes=a.grace_minutes), stale_after=timedelta(hours=a.stale_hours))
    if not a.dry_run:
        for item in items:
            fs.delete_tree(item.uri)
        c.forget_garbage(items)
    emit(a, ["Reason", "Uri", "Removed"], [[i.reason, i.uri, "no (dry run)" if a.dry_run else "yes"] for i in items])


def _delay(a):
    from airflow_colocate.jobs.health import relocate_delay_from_env

    minutes = getattr(a, "relocate_delay_minutes", None)
    return relocate_delay_from_env() if minutes is None else timedelta(minutes=minutes)


def cmd_backend_probe(c: Catalog, a) -> None:
    from airflow_colocate.jobs.health import probe_backends

    results = probe_backends(c, backends=a.backends or None, timeout=a.timeout, relocate_delay=_delay(a))
    rows = [[r.backend.id, r.backend.name, r.backend.state, "ok" if r.ok else f"FAILED: {r.error}",
             r.backend.state_since.isoformat(timespec="seconds") if r.backend.state != "alive" else "",
             r.backend.last_heartbeat.isoformat(timespec="seconds") if r.backend.last_heartbeat else "",
             str(r.backend.unavailable).lower()] for r in results]
    emit(a, ["BackendId", "Name", "State", "Probe", "DownSince", "LastHeartbeat", "Unavailable"], rows)


def cmd_group_check(c: Catalog, a) -> None:
    healths = [c.check_group(a.group, db=a.db)] if a.group else c.check_groups()
    if a.json:
        print(json.dumps([h.to_dict() for h in healths], indent=2))
        return
    emit(a, ["GroupId", "GroupName", "IsStable", "Problems", "Reason"],
         [[h.group_id, h.full_name, str(h.stable).lower(), h.problems, h.reason or ""] for h in healths])
    if a.group and not healths[0].stable:
        for r in healths[0].reasons:
            print(f"  - {r.text}")


def cmd_balance(c: Catalog, a) -> None:
    from airflow_colocate.jobs.balance import Balancer, BalanceOptions, describe_plans, plan, summary_json

    options = BalanceOptions(strategy=a.strategy, threshold=a.threshold, relocate_delay=_delay(a),
                             grace=timedelta(minutes=a.grace_minutes), groups=a.group or None, verify=a.verify)
    names = {b.id: b.name for b in c.backends()}
    if a.dry_run:
        plans = plan(c, options)
        if a.json:
            print(json.dumps([dict(p.to_plan(), group=p.full_name, kind=p.kind, bytes=p.bytes) for p in plans], indent=2))
            return
        print("dry run: nothing is changed")
        for line in describe_plans(plans, names):
            print(line)
        moves = [[p.full_name, mv.bucket_seq, names.get(mv.src, mv.src), names.get(mv.dst, mv.dst), mv.bytes, mv.why]
                 for p in plans for mv in p.moves]
        if moves:
            emit(a, ["Group", "Bucket", "From", "To", "Bytes", "Why"], moves)
        return
    from pyspark.sql import SparkSession

    from airflow_colocate.jobs.balance import session_runner
    from airflow_colocate.spark.session import get_spark

    owned = SparkSession.getActiveSession() is None  # stop only a session this command started
    spark = get_spark("colocate-balance", master=a.master, conf={"spark.ui.enabled": "false"})
    try:
        if owned:
            spark.sparkContext.setLogLevel("ERROR")
        echo = (lambda line: None) if a.json else (lambda line: print(line, flush=True))
        summary = Balancer(c, session_runner(spark), options, echo=echo).run()
    finally:
        if owned:
            spark.stop()
    out = summary_json(summary)
    if a.json:
        print(json.dumps(out, indent=2, default=str))
        return
    emit(a, ["JobId", "Group", "Kind", "State", "Step", "Moves", "Cloned", "Bytes"],
         [[j["job_id"], j["group"], j["kind"], j["state"], j["step"], j["moves"], j["cloned"], j["bytes"]]
          for j in out["jobs"]], title="balance jobs")
    print(f"dropped {out['dropped']} redundant replicas; decommissioned: {', '.join(out['decommissioned']) or 'none'}")
    emit(a, ["GroupId", "GroupName", "IsStable", "Reason"],
         [[g["group_id"], g["group"], str(g["stable"]).lower(), g["reason"] or ""] for g in out["groups"]])


def cmd_jobs_list(c: Catalog, a) -> None:
    rows = [[j.id, j.kind, j.state, j.group, j.step, len(j.plan.get("moves", [])) if j.kind != "write" else "",
             j.progress.get("cloned", j.progress.get("rows", "")), j.updated_at.isoformat(timespec="seconds")]
            for j in c.jobs(kind=a.kind, state=a.state, limit=a.limit)]
    emit(a, ["JobId", "Kind", "State", "Group", "Step", "Moves", "Done", "Updated"], rows)


def cmd_jobs_cancel(c: Catalog, a) -> None:
    j = c.cancel_balance_job(a.job_id, a.reason or "cancelled by an operator")
    print(f"balance job {j.id} is {j.state}")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise InvalidArgument(f"invalid boolean {text!r}: expected true or false")


def _size(text: str | None) -> int | None:
    """``500G`` / ``2TiB`` / ``1048576`` -> bytes."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise InvalidArgument(f"invalid capacity {text!r}: expected a positive size such as 1048576, 500G or 2T")
    return int(float(match.group(1)) * 1024 ** " kmgtp".index(match.group(2) or " "))


# ---------------------------------------------------------------------- parser


class UsageError(Exception):
    """A command line argparse refused; main() prints it on one line, like every other error."""


class Parser(argparse.ArgumentParser):
    """argparse prints a usage block and exits; a script that greps stderr, or a tired engineer,
    wants one line that says what was wrong and where the help is."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}; see '{self.prog} --help'")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="colocate", description="Colocation groups for Spark data lakes.")
    p.add_argument("--catalog", help="catalog URL (default: $COLOCATE_CATALOG_URL or sqlite under $COLOCATE_HOME)")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database for bare table and group names (default {DEFAULT_DB})")
    sub = p.add_subparsers(dest="area", required=True, metavar="command")

    def listing(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return parser

    sub.add_parser("init", help="create or upgrade the catalog").set_defaults(fn=cmd_init, no_check=True)

    be = sub.add_parser("backend", help="storage backends").add_subparsers(dest="command", required=True)
    x = be.add_parser("add", help="register a backend root")
    x.add_argument("root", help="root URI, e.g. file:///data/be1 or s3a://lake-be1/")
    x.add_argument("--name")
    x.add_argument("--host", help="failure domain; backends on one host never share a bucket (default: the backend name)")
    x.add_argument("--capacity", help="capacity, e.g. 500G (used by the size balancer)")
    x.set_defaults(fn=cmd_backend_add)
    listing(be.add_parser("list", help="list backends")).set_defaults(fn=cmd_backend_list)
    for name, fn, help_ in [("decommission", cmd_backend_decommission, "drain a backend"),
                            ("remove", cmd_backend_remove, "delete an empty backend")]:
        x = be.add_parser(name, help=help_)
        x.add_argument("backend", help="backend id or name")
        x.set_defaults(fn=fn)
    x = listing(be.add_parser("probe", help="write, read and delete a heartbeat on each backend; record alive / down"))
    x.add_argument("backends", nargs="*", help="backend ids or names (default: all that are not decommissioned)")
    x.add_argument("--timeout", type=float, default=20.0, help="seconds before a backend counts as down")
    x.add_argument("--relocate-delay-minutes", type=float, help="down longer than this is unavailable (default 30)")
    x.set_defaults(fn=cmd_backend_probe)
    for name in ("mark-down", "mark-up"):
        x = be.add_parser(name, help=f"admin: {name.replace('-', ' ')} a backend")
        x.add_argument("backend", help="backend id or name")
        x.add_argument("--reason")
        x.set_defaults(fn=cmd_backend_mark)

    tb = sub.add_parser("table", help="tables").add_subparsers(dest="command", required=True)
    x = tb.add_parser("create", help="create a table, optionally in a colocation group")
    x.add_argument("table", help="table or db.table")
    x.add_argument("--columns", required=True, help="'o_orderkey bigint, o_orderdate date, ...'")
    x.add_argument("--distributed-by", required=True, help="bucket key column(s), comma separated")
    x.add_argument("--buckets", type=int, required=True)
    x.add_argument("--replication", type=int, default=1)
    x.add_argument("--partition-by", help="partition column(s), comma separated")
    x.add_argument("--colocate-with", help="group name; created from this table when missing")
    x.add_argument("--if-not-exists", action="store_true")
    x.set_defaults(fn=cmd_table_create)
    x = tb.add_parser("alter", help="move to another group ('' leaves the group) or set replication")
    x.add_argument("table")
    x.add_argument("--colocate-with")
    x.add_argument("--replication", type=int)
    x.set_defaults(fn=cmd_table_alter)
    x = tb.add_parser("drop", help="drop (recoverable for the retention, default one day)")
    x.add_argument("table")
    x.add_argument("--force", action="store_true", help="purge now; cannot be recovered")
    x.set_defaults(fn=cmd_table_drop)
    x = tb.add_parser("recover", help="bring back a dropped table")
    x.add_argument("table")
    x.set_defaults(fn=cmd_table_recover)
    x = listing(tb.add_parser("purge", help="erase tables dropped longer than the retention ago"))
    x.add_argument("--retention-hours", type=float, default=24.0)
    x.set_defaults(fn=cmd_table_purge)
    x = listing(tb.add_parser("list", help="list tables"))
    x.add_argument("--all", action="store_true", help="include dropped tables")
    x.set_defaults(fn=cmd_table_list)
    x = listing(tb.add_parser("show", help="a table and its partitions"))
    x.add_argument("table")
    x.set_defaults(fn=cmd_table_show)

    pt = sub.add_parser("partition", help="partitions").add_subparsers(dest="command", required=True)
    x = pt.add_parser("add", help="add a partition, checked against the group schema")
    x.add_argument("table")
    x.add_argument("value", help="partition value, e.g. 2026-11-01")
    x.add_argument("--buckets", type=int)
    x.add_argument("--replication", type=int)
    x.set_defaults(fn=cmd_partition_add)

    sh = sub.add_parser("show", help="SHOW PROC '/colocation_group'").add_subparsers(dest="command", required=True)
    listing(sh.add_parser("groups", help="all colocation groups")).set_defaults(fn=cmd_show_groups)
    x = listing(sh.add_parser("group", help="one group's bucket map"))
    x.add_argument("group", help="group id (dbId.grpId), full name (dbId_name) or name")
    x.set_defaults(fn=cmd_show_group)

    gr = sub.add_parser("group", help="stability of groups, operator overrides").add_subparsers(dest="command", required=True)
    x = listing(gr.add_parser("check", help="recompute stability from the replicas and say why a group is unstable"))
    x.add_argument("group", nargs="?", help="one group (default: all)")
    x.set_defaults(fn=cmd_group_check)
    for name in ("mark-stable", "mark-unstable"):
        x = gr.add_parser(name)
        x.add_argument("group")
        x.add_argument("--reason")
        x.set_defaults(fn=cmd_group_mark)

    fl = sub.add_parser("flag", help="global switches").add_subparsers(dest="command", required=True)
    x = fl.add_parser("set")
    x.add_argument("flag", choices=FLAGS)
    x.add_argument("value", help="true or false")
    x.set_defaults(fn=cmd_flag_set)
    listing(fl.add_parser("list")).set_defaults(fn=cmd_flag_list)

    x = listing(sub.add_parser("gc", help="remove files of aborted, superseded and purged data"))
    x.add_argument("--grace-minutes", type=float, default=60.0, help="keep superseded versions this long for running readers")
    x.add_argument("--stale-hours", type=float, default=24.0, help="a write still staging after this long is dead")
    x.add_argument("--dry-run", action="store_true")
    x.set_defaults(fn=cmd_gc)

    x = listing(sub.add_parser("balance", help="repair and balance groups with clone-and-drop (Spark clone job)"))
    x.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    x.add_argument("--strategy", choices=("count", "size"), default="count",
                   help="count: even bucket slots per backend; size: bytes against capacity")
    x.add_argument("--group", action="append", help="only this group (repeatable)")
    x.add_argument("--threshold", type=float, default=0.0, help="skip moves that gain less than this fraction")
    x.add_argument("--relocate-delay-minutes", type=float, help="down longer than this is relocated (default 30)")
    x.add_argument("--grace-minutes", type=float, default=10.0, help="keep replicas the map dropped this long")
    x.add_argument("--verify", action="store_true", help="re-hash replicas first; repair the ones that changed")
    x.add_argument("--master", help="Spark master for the clone job (default $SPARK_MASTER or local[*])")
    x.set_defaults(fn=cmd_balance)

    jb = sub.add_parser("jobs", help="write, balance and gc jobs").add_subparsers(dest="command", required=True)
    x = listing(jb.add_parser("list", help="jobs, newest first"))
    x.add_argument("--kind", help="write, relocate, balance, repair or gc")
    x.add_argument("--state", help="running, done, cancelled, committed, failed, ...")
    x.add_argument("--limit", type=int, default=50)
    x.set_defaults(fn=cmd_jobs_list)
    x = jb.add_parser("cancel", help="cancel a balance job that has not switched its map yet")
    x.add_argument("job_id", type=int)
    x.add_argument("--reason")
    x.set_defaults(fn=cmd_jobs_cancel)

    x = listing(sub.add_parser("events", help="the audit log, newest first"))
    x.add_argument("--limit", type=int, default=50)
    x.add_argument("--kind")
    x.set_defaults(fn=cmd_events)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"colocate: error: {exc}", file=sys.stderr)
        return 2
    try:
        catalog = Catalog(args.catalog)
        if not getattr(args, "no_check", False):
            catalog.check_schema()
        args.fn(catalog, args)
    except ColocateError as exc:
        print(f"colocate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("colocate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an unexpected failure still gets one line, with where to look
        print(f"colocate: internal error: {type(exc).__name__}: {exc} (set COLOCATE_DEBUG=1 for a traceback)", file=sys.stderr)
        if os.environ.get("COLOCATE_DEBUG"):
            raise
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

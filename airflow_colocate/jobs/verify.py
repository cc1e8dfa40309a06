"""``colocate verify``: prove every replica to the byte and to the row, and mark the ones that lie.

Spark's bucketed scan trusts a file's name for its bucket, so a replica whose rows belong to other
buckets joins silently wrong, and its bytes can still match the checksum the catalog recorded (a
writer that misplaced rows). Verify therefore checks both:

1. plan (:func:`plan_verify`): the verified replicas of the visible versions of the group tables in
   scope, on alive backends, the least recently verified first (at most ``limit``);
2. run the Spark verify job (:mod:`airflow_colocate.spark.verify_job`) through a ``runner``: it
   re-hashes every file and re-computes every row's ``pmod(hash(dist cols), n)``;
3. record (:func:`verdicts`, then :meth:`Catalog.record_verify`, the path ``balance --verify``
   takes, which keeps the bucket summaries current): a replica that failed either check is
   ``bad`` — never chosen for a read again — its group unstable with the reason, and the next
   ``colocate balance`` repairs it from a good replica; the others are stamped verified now.

The runner is a function from :class:`~airflow_colocate.core.contract.VerifyPlan` to
:class:`~airflow_colocate.core.contract.VerifyReport`: :func:`session_runner` in a Spark session
(the CLI), or spark-submit (:class:`~airflow_colocate.operators.verify.ColocateVerifyOperator`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_colocate.jobs.iceberg import follow_all
from airflow_colocate.model.views import TableView
from airflow_colocate.core.contract import (
    RowCheck,
    RowCheckTable,
    VerifyPlan,
    VerifyReport,
    VerifyResult,
    VerifyTask,
)
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.core.paths import default_work_dir
from airflow_colocate.jobs import metrics

Runner = Callable[[VerifyPlan], VerifyReport]

log = logging.getLogger("airflow_colocate.jobs.verify")


def session_runner(spark) -> Runner:
    """Run verify plans in a Spark session you already have."""
    from airflow_colocate.spark.verify_job import run_verify

    return lambda plan: run_verify(spark, plan)


@dataclass(frozen=True)
class Target:
    """What a verdict names: one replica of one bucket of one partition."""

    replica_id: int
    table: str  # db.table
    partition: str
    bucket_seq: int
    backend_id: int
    path: str
    bytes: int
    rows: int


def scope(catalog, group: str | None = None, table: str | None = None) -> tuple[list[TableView], list[str] | None]:
    """The live tables to verify and their groups (None: every group). Only group tables: their
    bucket ids are what colocated joins trust."""
    if table is not None:
        view = catalog.tables.get(table)
        if view.group_id is None:
            raise InvalidArgument(f"table {view.qualified_name} is in no colocation group: verify checks the tables "
                                  f"of groups (see 'colocate show groups')")
        if group is not None and catalog.groups.get(group).group_id != view.group_id:
            raise InvalidArgument(f"table {view.qualified_name} is in group {view.group_name}, not in {group}: "
                                  f"give --table alone, or a table of that group")
        return [view], [view.group_id]
    if group is not None:
        g = catalog.groups.get(group)
        return [t for t in catalog.tables.list() if t.group_id == g.group_id], [g.group_id]
    return [t for t in catalog.tables.list() if t.group_id is not None], None


def plan_verify(catalog, *, group: str | None = None, table: str | None = None, limit: int | None = None,
                work_dir: str | Path | None = None,
                skip_backends: frozenset[int] | set[int] = frozenset()) -> tuple[VerifyPlan, dict[int, Target]]:
    """The verify plan for the scope, and what each replica in it is (for the summary).
    ``skip_backends``: backend ids whose replicas are left out (unreachable: they would all read as
    bad, which they are not)."""
    if limit is not None and limit < 1:
        raise InvalidArgument(f"invalid limit {limit}: verify at least 1 replica (or give no limit for all)")
    views, groups = scope(catalog, group, table)
    by_id = {v.id: v for v in views}
    # the least recently verified first, with what the summary names: no replica is loaded twice,
    # and --limit reads only the rows it verifies (a 3-year lake holds millions)
    needs = catalog.health.replicas_to_verify(groups=groups, limit=limit, table_ids=sorted(by_id))
    needs = [n for n in needs if n.backend_id not in skip_backends]
    targets = {n.replica_id: Target(n.replica_id, by_id[n.table_id].qualified_name, n.partition, n.bucket_seq,
                                    n.backend_id, n.path, n.bytes, n.rows) for n in sorted(needs, key=lambda n: n.replica_id)}
    wanted = {n.replica_id: n for n in needs}
    per_table: dict[str, list[RowCheck]] = {}
    for t in targets.values():
        per_table.setdefault(t.table, []).append(RowCheck(replica_id=t.replica_id, path=t.path, partition=t.partition,
                                                          bucket_seq=t.bucket_seq, rows=t.rows,
                                                          layout_buckets=wanted[t.replica_id].layout_buckets))
    tables = []
    for view in views:
        checks = per_table.get(view.qualified_name)
        if checks:
            by_name = {n.lower(): [n, t] for n, t in view.columns}
            columns = [by_name[d.lower()] for d in view.dist_cols]  # in the hash's order
            tables.append(RowCheckTable(table=view.qualified_name, columns=columns, bucket_num=view.bucket_num,
                                        replicas=checks))
    hashes = [VerifyTask(n.replica_id, n.backend_id, n.path, n.checksum, n.bytes) for n in wanted.values()]
    job_id = f"verify-{catalog.now().strftime('%Y%m%dT%H%M%S')}-{os.urandom(3).hex()}"
    work = str(work_dir or default_work_dir()).rstrip("/")
    return VerifyPlan(job_id=job_id, hashes=hashes, tables=tables, report_uri=f"{work}/{job_id}/report.json"), targets


def verdicts(report: VerifyReport) -> list[VerifyResult]:
    """One result per replica: good only when its bytes and its rows are (the first problem found
    is the reason)."""
    out: dict[int, VerifyResult] = {h.replica_id: h for h in report.hashes}
    for r in report.rows:
        seen = out.get(r.replica_id)
        if seen is None:
            out[r.replica_id] = VerifyResult(r.replica_id, r.ok, error=r.error)
        elif seen.ok and not r.ok:
            out[r.replica_id] = VerifyResult(r.replica_id, False, seen.bytes, seen.checksum, r.error)
    return list(out.values())


def verify(catalog, runner: Runner, *, group: str | None = None, table: str | None = None,
           limit: int | None = None, work_dir: str | Path | None = None,
           echo: Callable[[str], None] | None = None) -> dict:
    """Plan, run and record one verify; returns its summary (plain JSON)."""
    echo = echo or log.info
    from airflow_colocate.jobs.health import unreachable_backends

    alive = [b for b in catalog.backends.list() if b.state == "alive"]
    unreachable = unreachable_backends(alive)
    names = {b.id: b.name for b in alive}
    for backend_id, reason in unreachable.items():
        echo(f"backend {names[backend_id]} unreachable, its replicas are not verified this run: {reason}")
    plan, targets = plan_verify(catalog, group=group, table=table, limit=limit, work_dir=work_dir,
                                skip_backends=set(unreachable))
    size = sum(t.bytes for t in targets.values())
    echo(f"verify job {plan.job_id}: {len(targets)} replicas of {len(plan.tables)} tables ({size} bytes)")
    report = runner(plan) if targets else VerifyReport(plan.job_id, [], [], 0.0, 0, "")
    results = verdicts(report)
    marked = catalog.health.record_verify(results)
    if marked:  # an Iceberg table naming a replica now bad names a good one instead
        follow_all(catalog)
    bad = []
    for res in sorted((r for r in results if not r.ok), key=lambda r: r.replica_id):
        t = targets[res.replica_id]
        bad.append({"table": t.table, "partition": t.partition, "bucket": t.bucket_seq, "backend_id": t.backend_id,
                    "path": t.path, "reason": res.error or "checksum mismatch"})
        echo(f"BAD replica {t.path} ({t.table}/{t.partition} bucket {t.bucket_seq}): {res.error}")
    metrics.verify_findings(len(results), len(bad))
    refs = sorted({g for g in _groups(catalog, targets.values(), group, table)})
    groups = [catalog.health.check_group(ref).to_dict() for ref in refs]
    for g in groups:
        echo(f"group {g['group']}: {'stable' if g['stable'] else 'UNSTABLE: ' + (g['reason'] or '')}")
    return {"job_id": plan.job_id, "replicas": len(targets), "bytes": report.bytes,
            "rows": sum(r.rows for r in report.rows), "seconds": report.seconds, "bad": bad, "marked_bad": marked,
            "groups": groups,
            "unreachable": [{"backend_id": i, "backend": names[i], "reason": r} for i, r in sorted(unreachable.items())]}


def _groups(catalog, targets, group: str | None, table: str | None) -> Sequence[str]:
    """The groups to report on: the one asked for, else those of the tables checked."""
    if group is not None:
        return [catalog.groups.get(group).group_id]
    if table is not None:
        return [catalog.tables.get(table).group_id]
    names = {t.table for t in targets}
    return [v.group_id for v in catalog.tables.list() if v.qualified_name in names and v.group_id]


__all__ = ["Runner", "Target", "plan_verify", "scope", "session_runner", "verdicts", "verify"]

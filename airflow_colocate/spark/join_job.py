"""Spark join job: register the plan's tables, run the query, prove from the physical plan which
joins ran without a shuffle, and write the result (to a path or, as a colocated write, into a
catalog table). Runs under spark-submit, through :mod:`airflow_colocate.spark.entry` (which writes
the report or the one-line error); never touches the catalog.

    spark-submit …/entry.py --kind join --plan plan.json
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, replace

from airflow_colocate.core.contract import (
    BadReplica,
    BucketJoin,
    JoinExplain,
    JoinPlan,
    JoinReport,
)
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.planner.explain import explain_text as render_explain
from airflow_colocate.planner.explain import key_names
from airflow_colocate.model.reasons import Fallback
from airflow_colocate.spark import locality
from airflow_colocate.spark.bucket_join import HASH, SORT_MERGE, plan_bucket_join
from airflow_colocate.spark.connect import is_connect
from airflow_colocate.spark.physical_plan import (
    JoinNode,
    final_plan,
    joins_of,
    joins_of_text,
    ordered_reads,
    plan_text,
)
from airflow_colocate.spark.register import name_the_replica, register_tables
from airflow_colocate.spark.session import scoped
from airflow_colocate.spark.timing import DriverClock
from airflow_colocate.storage import fs

# Next to the report: the replicas a failed job found bad, for the control plane to record (a
# failed job writes no report, but what it learnt about the replicas must not be lost).
BAD_SUFFIX = ".bad.json"


def bad_replicas_uri(plan: JoinPlan) -> str:
    return plan.report_uri + BAD_SUFFIX


def load_bad_replicas(plan: JoinPlan) -> list[BadReplica]:
    """The replicas a failed run of ``plan`` found bad (none if it wrote nothing)."""
    uri = bad_replicas_uri(plan)
    try:
        if not fs.exists(uri):
            return []
        return [BadReplica(**b) for b in json.loads(fs.read_text(uri))]
    except Exception:  # unreadable: the next read finds them again
        return []


log = logging.getLogger("airflow_colocate.spark.join")  # shown as colocate-join: … (spark.entry)


def keys_cover(left_dist: Sequence[str], right_dist: Sequence[str], pairs: Sequence[tuple[str, str]]) -> bool:
    """Equality keys cover the distribution columns position by position: for every i, the pair
    (left_dist[i], right_dist[i]) is among the join's equality pairs. More pairs (``dt``) are fine."""
    have = {(a.lower(), b.lower()) for a, b in pairs}
    return len(left_dist) == len(right_dist) and all(
        (lc.lower(), rc.lower()) in have for lc, rc in zip(left_dist, right_dist))


Column = tuple[str, str]  # (table alias, column)


def predict_join(left: Sequence[str], right: Sequence[str], carriers: tuple[Sequence[str], Sequence[str]],
                 keys: Sequence[tuple[Column | None, Column | None]], *, reasons: Mapping[str, str],
                 groups: Mapping[str, str], dist_cols: Mapping[str, Sequence[str]],
                 peers: Mapping[str, str] | None = None) -> tuple[bool, str | None]:
    """Whether one join of the query can run without a shuffle, and if not, why, from what the plan
    registered (``reasons``, ``groups``, ``dist_cols`` per table alias), the tables under each side,
    the tables whose bucketing still partitions each side (``carriers``), and the join's equality
    keys resolved to table columns. The join job compares this prediction with Spark's plan; it is
    made here because a SQL query's joins and their keys exist only once Spark has analysed it.
    ``peers``: group id -> the group it joins bucket by bucket (``JoinPlan.bucket_peers``)."""
    for table in [*left, *right]:
        if reasons.get(table):
            return False, reasons[table]
    domain = {t: (peers or {}).get(groups.get(t, ""), groups.get(t, "")) for t in [*left, *right]}
    if not left or not right or len(set(domain.values())) != 1:
        return False, Fallback.NOT_SAME_GROUP.because()
    if not carriers[0] or not carriers[1]:
        return False, Fallback.NOT_COVERED.because(
            "an input is not partitioned by a bucket key any more (it comes out of a full outer join)")
    for lt in carriers[0]:
        for rt in carriers[1]:
            pairs = [(lk[1], rk[1]) for lk, rk in keys if lk and rk and lk[0] == lt and rk[0] == rt]
            if keys_cover(dist_cols[lt], dist_cols[rt], pairs):
                return True, None
    return False, Fallback.NOT_COVERED.because()


def join_method(description: str) -> tuple[str, str | None]:
    """What Spark did inside the join (hash, sort-merge, broadcast), and a hash join's build side."""
    if description.startswith("ShuffledHashJoin"):
        return HASH, "left" if "BuildLeft" in description else "right"
    if description.startswith("SortMergeJoin"):
        return SORT_MERGE, None
    if description.startswith("Broadcast"):
        return "broadcast", None
    return description.split(" ", 1)[0], None


def explain_join(j: JoinNode, plan: JoinPlan) -> JoinExplain:
    """colocate: true exactly when no Exchange feeds the join (what Spark did), next to what the
    planner predicted; the reason of a shuffled join is the planner's."""
    # Spark folds identifiers to lower case (``FROM A A`` scans ``__cl_a``): match the plan's
    # tables case-insensitively, and show the names the plan used.
    planned, planned_reason = predict_join(
        j.left.tables, j.right.tables, (j.left.carriers, j.right.carriers), j.keys,
        reasons=_folded(plan.reasons), groups=_folded(plan.groups),
        dist_cols={t.name.lower(): t.dist_cols for t in plan.tables}, peers=plan.bucket_peers)
    shown = {t.name.lower(): t.name for t in plan.tables}
    colocate = j.left.exchanges == 0 and j.right.exchanges == 0
    reason = None
    if not colocate:
        if planned_reason:
            reason = planned_reason
        elif j.description.startswith("Broadcast"):
            reason = "Spark chose a broadcast join"
        else:
            reason = "Spark shuffled a join the planner expected to be colocated"
    method, build = join_method(j.description)
    left, right = [shown.get(t, t) for t in j.left.tables], [shown.get(t, t) for t in j.right.tables]
    return JoinExplain(join=j.description, left_tables=left, right_tables=right,
                       exchanges_left=j.left.exchanges, exchanges_right=j.right.exchanges,
                       colocate=colocate, reason=reason, planned=planned, method=method,
                       build_tables={"left": left, "right": right}.get(build or "", []),
                       kind=j.kind, keys=key_names(j.keys, shown))


def _folded(by_table: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in by_table.items()}


def should_be_colocated(e: JoinExplain, plan: JoinPlan) -> bool:
    """Both sides come from one colocation group: the user asked for this join to be local."""
    groups = {plan.bucket_peers.get(g, g) for g in (_folded(plan.groups).get(t.lower(), "")
                                                     for t in e.left_tables + e.right_tables)}
    return len(groups) == 1 and "" not in groups and bool(e.left_tables) and bool(e.right_tables)


def bucket_join_line(choice: BucketJoin | None, explains: list[JoinExplain]) -> str | None:
    """One line: how the colocated joins join inside a bucket, and why (None: nothing read bucketed)."""
    if choice is None:
        return None
    colocated = [e for e in explains if e.colocate]
    methods = sorted({e.method for e in colocated}) or [choice.method]
    if choice.method == HASH and methods != [HASH]:
        detail = (f"{choice.reason}; Spark may build only {', '.join(choice.build_tables)} and did not for every "
                  f"join of this type")
    else:
        detail = choice.reason
    return f"bucket join: {'/'.join(methods)} ({detail})"


def explain_text(explains: list[JoinExplain], choice: BucketJoin | None = None) -> str:
    """The explain people read (planner.explain): every join, then the bucket-join line."""
    line = bucket_join_line(choice, explains) if explains else None
    return render_explain(explains, [line] if line else [])


def _rows(df) -> list[dict]:
    return [json.loads(json.dumps(r.asDict(), default=str)) for r in df.collect()]


def _execute(spark, plan: JoinPlan, df, registered) -> tuple[int, list[dict], object]:
    """Run the query once, into its output (a path, a catalog table, or nothing: count only), and
    read a preview back from what was written."""
    write_report = None
    preview: list[dict] = []
    if plan.output is not None:
        from airflow_colocate.spark.write_job import run_write

        # the write reads the tables just checked: register the replicas chosen, not check again
        checked = {t.name: t for t in registered.tables}
        source = plan.output.source
        output = replace(plan.output, source=replace(source, tables=[checked.get(t.name, t) for t in source.tables]))
        write_report = run_write(spark, output)
        locality.untrack(spark)
        rows = write_report.source_rows
        written = [r.path for r in write_report.replicas if r.rows and r.backend_id == plan.output.buckets[r.bucket_seq].replicas[0].backend_id]
        if written:
            preview = _rows(spark.read.parquet(*written).limit(plan.preview_rows))
    elif plan.output_path:
        df.write.mode("overwrite").parquet(plan.output_path)
        locality.untrack(spark)
        result = spark.read.parquet(plan.output_path)
        rows = result.count()  # from parquet footers
        preview = _rows(result.limit(plan.preview_rows))
    else:
        rows = df.collect()[0][0]  # explain-only run: df is the count (run_join), no preview
    return rows, preview, write_report


def counted(spark, query: str):
    """The count of ``query``'s rows as one statement, ``SELECT count(*) FROM (<query>)``: parsed and
    analysed once, where ``spark.sql(query).groupBy().count()`` analyses the query's plan twice
    (~30 ms of SQL1's planning). A query that does not read as a subquery (or fails to plan) is
    counted the other way, which raises the query's own error if it has one; so is any query on
    Spark Connect, whose ``spark.sql`` plans nothing until the query is used."""
    if is_connect(spark):
        return spark.sql(query).groupBy().count()
    try:
        return spark.sql(f"SELECT count(*) FROM (\n{query.strip().rstrip(';').rstrip()}\n)")
    except Exception:  # noqa: BLE001 - the query as it is: its own error, or its count
        return spark.sql(query).groupBy().count()


DPP_CONF = "spark.sql.optimizer.dynamicPartitionPruning.enabled"
_SUBQUERY = re.compile(r"subquery|dynamicpruning", re.I)
_TEXT_JOINS = ("SortMergeJoin ", "ShuffledHashJoin ", "BroadcastHashJoin ")  # "<name> [keys], [keys], <type>, …"


def planned_joins(df) -> list[JoinNode]:
    """The joins of ``df``'s physical plan before it runs (spark.physical_plan.joins_of), read from
    the plan's text (``joins_of_text``, as on Spark Connect) when that text is the whole plan: a few
    ms, where walking the JVM plan through py4j takes ~300 calls, 40-50 ms at SQL1. Not when the
    text holds a subquery's plan (dynamic partition pruning's too), which the text reader cannot
    place, nor for a join whose line the text reader does not take apart as the walk does (a nested
    loop join's, whose type follows its build side), nor a line too long to be its whole
    description: then the JVM walk."""
    if is_connect(df.sparkSession):
        return joins_of(df)
    text = plan_text(df)
    if _SUBQUERY.search(text):
        return joins_of(df)
    joins = joins_of_text(text)
    if any(len(j.description) >= 200 or not j.description.startswith(_TEXT_JOINS) for j in joins):
        return joins_of(df)
    return joins


def executed_text(df) -> str:
    """``df``'s physical plan text (spark.physical_plan.plan_text) after it ran. An adaptive plan that
    ran to its end is printed as its final plan only, as Spark prints it under ``== Final Plan ==``:
    the report keeps only that part (``final_plan``), and Spark's text of the initial plan, the
    part left out, took ~45 ms of a 47 ms explain at SQL1's 1/10 (the final one: ~1 ms)."""
    if is_connect(df.sparkSession):
        return plan_text(df)
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() != "AdaptiveSparkPlanExec" or "isFinalPlan=true" not in plan.simpleString(25):
        return plan_text(df)
    final = "".join(f"   {line}\n" for line in str(plan.executedPlan().treeString()).splitlines())
    return f"{plan.simpleString(25)}\n+- == Final Plan ==\n{final}"


_ORDER_MESSAGE = re.compile(r"colocate: table \S+ bucket \d+ is not in \(.*?\) order at its row .*")


def out_of_order(message: str) -> str | None:
    """The ordered read's one line (java/.../colocate/ordered/AssertOrderedExec.java) from a
    failed query's Java trace; None when there is none."""
    m = _ORDER_MESSAGE.search(message)
    return m.group(0).rstrip(". ") if m else None


def run_join(spark, plan: JoinPlan, *, replace_views: bool = False, clock: DriverClock | None = None) -> JoinReport:
    """Run the join of ``plan`` into its output and return its report (the entry writes it).
    ``replace_views``: the registration may replace a caller's temp view of a table's name.
    A bucket replica that fails while read is read from the bucket's next replica, the query run
    again (spark.failover); the replicas that failed are in the report's ``bad_replicas`` (or,
    when no replica of a bucket was left, next to the report) for the control plane to mark.
    ``clock``: records the driver's phases (choice and planning, replica check, views, run, explain)
    for a caller that prints where a query's fixed cost goes (bench/bench_seeds.py)."""
    from airflow_colocate.spark.failover import run_with_failover

    try:
        report, failover = run_with_failover(
            plan.tables, lambda tables: _run_join_once(spark, replace(plan, tables=tables), replace_views=replace_views,
                                          clock=clock))
    except Exception as exc:
        if getattr(exc, "bad", None):
            fs.write_text_atomic(bad_replicas_uri(plan), json.dumps([asdict(b) for b in exc.bad]))
        raise
    if failover.bad:
        report = replace(report, bad_replicas=[*failover.bad, *report.bad_replicas],
                         explain="\n".join([*failover.lines, report.explain]))
    fs.delete_file(bad_replicas_uri(plan))  # an earlier attempt's (a re-submitted application): this one's report says it all
    return report


def coalesced_or_plain(spark, plan: JoinPlan) -> JoinPlan:
    """A table of a group created at k·n buckets joins an n-bucket group through the jar's coalesced
    read (``ReadTable.read_buckets``); a session without the jar's extension would plan it at k·n
    and shuffle a side anyway, so it is read plain here, with that reason in the explain."""
    coalesced = [t for t in plan.tables if t.bucketed and t.read_buckets]
    if not coalesced or locality.extension_loaded(spark):
        return plan
    reasons = dict(plan.reasons)
    for t in coalesced:
        reasons[t.name] = Fallback.NOT_SAME_GROUP.because(
            f"{t.name}'s {t.bucket_num} buckets are read {t.read_buckets} to a bucket by the jar's extension "
            f"({locality.EXTENSIONS_CLASS}), which this session does not run")
    tables = [replace(t, bucketed=False, read_buckets=0) if t in coalesced else t for t in plan.tables]
    return replace(plan, tables=tables, reasons=reasons)


def _phase(clock: DriverClock | None, name: str):
    return clock.phase(name) if clock is not None else nullcontext()


def _run_join_once(spark, plan: JoinPlan, *, replace_views: bool = False,
                   clock: DriverClock | None = None) -> JoinReport:
    """One attempt of :func:`run_join` on ``plan``'s replicas as they are."""
    started = time.time()
    if plan.output is not None and is_connect(spark):
        raise ColocateError(f"a join into catalog table {plan.output.table} needs a classic Spark session (its write "
                            f"places bucket files with RDD tasks, which Spark Connect has not): write to a path "
                            f"(output_path) or run it with the join operator")
    names = ", ".join(t.name + ("" if t.bucketed else " (plain)") for t in plan.tables)
    log.info(f"job {plan.job_id}: registering {len(plan.tables)} tables ({names})")
    plan = coalesced_or_plain(spark, plan)
    plan, choice = plan_bucket_join(spark, plan, clock)
    # For the job only: the caller's session keeps its settings and job group (session.scoped).
    conf, local_off = locality.settings(spark, plan.backend_hosts)  # read each replica where it lies, if possible
    if any(t.bucketed for t in plan.tables):
        # A colocated join reads each bucket where it lies; a broadcast would ship a whole table to
        # every executor instead, so Doris-style we prefer the colocated sort-merge join.
        conf["spark.sql.autoBroadcastJoinThreshold"] = "-1"
        # With no broadcast to reuse, Spark drops every dynamic partition pruning filter it plans
        # (reuseBroadcastOnly): planning them cost ~15 ms a query at SQL1 and hid the plan's text.
        conf[DPP_CONF] = "false"
    with scoped(spark, conf):
        # no replica of a bucket left raises UnreadableBuckets, whose bad replicas run_join leaves
        # next to the report (the failover adds those found bad while read)
        registered = register_tables(spark, plan.tables, replace_views=replace_views, clock=clock)
        for b in registered.bad:
            log.info(f"replica {b.path} ({b.table}/{b.partition} bucket {b.bucket_seq}) is not read: {b.reason}")
        log.info(f"checked {registered.checked} replica directories")
        registered_at = time.time()
        try:
            with _phase(clock, "plan"):
                if plan.output is None and not plan.output_path:
                    # explain-only: what runs is the count of the rows, so plan the count, once, for both
                    # the explain and the run (df.count() would plan it all again: ~0.1 s a query)
                    df = counted(spark, plan.query)
                else:
                    df = spark.sql(plan.query)
                explains = [explain_join(j, plan) for j in planned_joins(df)]
        except Exception as exc:
            raise ColocateError(f"the join query failed to plan: {str(exc).strip().splitlines()[0]}") from exc
        text = "\n".join([explain_text(explains, choice), *plan.read_notes])
        # The operator's summary prints the explain from the report (which also reaches a task log
        # in cluster deploy mode, where this driver's log does not): printed here too it read twice.
        for line in text.splitlines():
            log.debug(line)
        planned_at = time.time()
        if plan.require_colocate:
            bad = [e for e in explains if not e.colocate and should_be_colocated(e, plan)]
            if bad:
                raise ColocateError(
                    "require_colocate is set but the plan shuffles a colocated side, nothing was written: "
                    + "; ".join(f"{'+'.join(e.left_tables)} ⋈ {'+'.join(e.right_tables)}: {e.reason}" for e in bad))
        group = locality.track(spark, plan.job_id, locality.bucket_hosts(registered.tables, plan.backend_hosts))
        try:
            with _phase(clock, "run"):
                rows, preview, write_report = _execute(spark, plan, df, registered)
        except Exception as exc:
            named = name_the_replica(str(exc), registered.tables) or out_of_order(str(exc))
            if named is None:
                raise
            raise ColocateError(named) from exc
        locality.untrack(spark)
        with _phase(clock, "explain"):
            executed = executed_text(df)
            if choice is not None:
                line = ordered_reads(spark, df, executed)
                log.debug(line)  # in the report's explain, which the summary prints
                text += f"\n{line}"
            where = locality.measure(spark, group, locality.bucket_hosts(registered.tables, plan.backend_hosts),
                                     note=local_off or "")
        log.debug(locality.line(where))  # in the report's explain when tasks ran, which the summary prints
        text += f"\n{locality.line(where)}" if where.tasks else ""  # none on a local master
        done_at = time.time()
        phases = {"register": registered_at - started, "plan": planned_at - registered_at, "run": done_at - planned_at}
        report = JoinReport(job_id=plan.job_id, rows=rows, joins=explains, explain=text,
                            physical_plan=final_plan(executed),  # after an explain-only run: the plan that ran
                            seconds=done_at - started, write=write_report, preview=preview, bad_replicas=registered.bad,
                            bucket_join=choice, locality=where, phases={k: round(v, 3) for k, v in phases.items()})
        log.info(f"{rows} rows in {report.seconds:.1f}s (" + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items()) + ")")
        return report

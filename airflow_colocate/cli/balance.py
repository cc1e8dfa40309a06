"""``colocate balance`` and ``colocate jobs``: repair and balance groups with clone-and-drop, and
the jobs that do it."""

from __future__ import annotations

import logging
from datetime import timedelta

import click

from airflow_colocate.placement.strategies import STRATEGIES

from airflow_colocate.cli import output, params
from airflow_colocate.cli.base import Command, Env, Group, pass_env
from airflow_colocate.cli.output import Report, Table, json_option


@click.command("balance", cls=Command, help="Repair and balance groups with clone-and-drop. Runs the Spark clone job; --dry-run only prints the plan.")
@click.option("--dry-run", is_flag=True, help="Print the plan, change nothing.")
@click.option("--strategy", type=params.Choice(list(STRATEGIES)), default="count", show_default=True,
              help="count: even bucket slots per backend; size: bytes against capacity.")
@click.option("--group", "groups", multiple=True, help="Only this group (repeatable).")
@click.option("--threshold", type=params.FLOAT, default=0.0, show_default=True,
              help="Skip moves that gain less than this fraction.")
@click.option("--relocate-delay-minutes", type=params.FLOAT,
              help="Down longer than this is relocated (default $COLOCATE_RELOCATE_DELAY_MINUTES or 30).")
@click.option("--relocate-now", is_flag=True,
              help="Relocate the buckets of down backends now, without waiting for the relocate delay "
                   "(recorded as a balance.relocate_now event with the actor).")
@click.option("--grace-minutes", type=params.FLOAT, default=10.0, show_default=True,
              help="Keep replicas the map dropped this long.")
@click.option("--verify", is_flag=True, help="Re-hash replicas first; repair the ones that changed.")
@click.option("--master", help="Spark master for the clone job (default $SPARK_MASTER or local[*]).")
@click.option("--runner", type=params.Choice(["spark", "local"]), default="spark", show_default=True,
              help="Run clones as a Spark job, or in this process (small lakes; every backend must be reachable here).")
@json_option
@pass_env
def balance(env: Env, dry_run: bool, strategy: str, groups: tuple[str, ...], threshold: float,
            relocate_delay_minutes: float | None, relocate_now: bool, grace_minutes: float, verify: bool,
            master: str | None, runner: str) -> Report:
    from airflow_colocate.jobs.balance import Balancer, BalanceOptions, describe_plans, plan
    from airflow_colocate.jobs.balance_outcome import CLI_HINT, outcome_line, pending_line

    catalog = env.catalog()
    options = BalanceOptions(strategy=strategy, threshold=threshold, relocate_delay=params.relocate_delay(relocate_delay_minutes),
                             relocate_delay_source=("COLOCATE_RELOCATE_DELAY_MINUTES" if relocate_delay_minutes is None
                                                    else "--relocate-delay-minutes"),
                             grace=timedelta(minutes=grace_minutes), groups=list(groups) or None, verify=verify,
                             relocate_now=relocate_now)
    names = {b.id: b.name for b in catalog.backends.list()}
    if dry_run:
        plans = plan(catalog, options)
        moves = [[p.full_name, mv.bucket_seq, names.get(mv.src, mv.src), names.get(mv.dst, mv.dst), mv.bytes, mv.why]
                 for p in plans for mv in p.moves]
        pending = Balancer(catalog, None, options).pending()
        blocks = ["dry run: nothing is changed", *describe_plans(plans, names, with_moves=False),
                  *([f"pending: {pending_line(pending, catalog.now(), CLI_HINT)}"] if pending else [])]
        if moves:
            blocks.append(Table(["Group", "Bucket", "From", "To", "Bytes", "Why"], moves))
        return Report(blocks, data=[p.summary() for p in plans])
    out = _run(catalog, options, master) if runner == "spark" else _run_local(catalog, options)
    out["outcome"] = outcome_line(out, catalog.now(), CLI_HINT)
    return Report([
        Table(["JobId", "Group", "Kind", "State", "Step", "Moves", "Cloned", "Bytes"],
              [[j["job_id"], j["group"], j["kind"], j["state"], j["step"], j["moves"], j["cloned"], j["bytes"]]
               for j in out["jobs"]], title="balance jobs"),
        f"dropped {out['dropped']} redundant replicas; decommissioned: {', '.join(out['decommissioned']) or 'none'}",
        *[f"waiting: {line}" for line in out.get("waiting", [])],
        Table(["GroupId", "GroupName", "IsStable", "Reason"],
              [[g["group_id"], g["group"], g["stable"], g["reason"]] for g in out["groups"]]),
        out["outcome"],
    ], data=out)


def _run(catalog, options, master: str | None) -> dict:
    """Run the Balancer with a Spark session for its clone jobs; stop the session only if this
    command started it (an embedding process, e.g. a test, keeps its own)."""
    from pyspark.sql import SparkSession

    from airflow_colocate.jobs.balance import Balancer, session_runner, summary_json
    from airflow_colocate.spark.session import get_spark

    logging.getLogger("py4j").setLevel(logging.WARNING)  # its "Closing down clientserver connection" ended the output
    owned = SparkSession.getActiveSession() is None
    spark = get_spark("colocate-balance", master=master, conf={"spark.ui.enabled": "false"})
    try:
        if owned:
            spark.sparkContext.setLogLevel("ERROR")
        summary = Balancer(catalog, session_runner(spark), options, echo=output.progress()).run()
    finally:
        if owned:
            spark.stop()
    return summary_json(summary)


def _run_local(catalog, options) -> dict:
    """The same balance run, cloning in this process with the clone job's own task function."""
    from airflow_colocate.jobs.balance import Balancer, summary_json
    from airflow_colocate.jobs.runners import local_runner

    with local_runner() as runner:  # its worker processes stop with the run
        return summary_json(Balancer(catalog, runner, options, echo=output.progress()).run())


@click.group("jobs", cls=Group, help="Write, balance and gc jobs: list, cancel.")
def jobs() -> None:
    pass


@jobs.command("list", help="Jobs, newest first.")
@click.option("--kind", help="write, relocate, balance, repair or gc.")
@click.option("--state", help="running, done, cancelled, committed, failed, ...")
@click.option("--limit", type=params.INT, default=50, show_default=True, help="At most this many jobs.")
@json_option
@pass_env
def list_(env: Env, kind: str | None, state: str | None, limit: int) -> Table:
    from airflow_colocate.jobs.balance_outcome import job_progress

    catalog = env.catalog()
    now = catalog.now()
    rows = []
    for j in catalog.jobs.list(kinds=[kind] if kind else None, states=[state] if state else None, limit=limit):
        moving = j.kind not in ("write", "gc")
        progress = job_progress(j, now) if moving else {"percent": None, "eta_seconds": None}
        rows.append([j.id, j.kind, j.state, j.group or None, j.step or None,
                     len(j.plan.get("moves", [])) if j.kind != "write" else None,
                     j.progress.get("cloned", j.progress.get("rows")), progress["percent"], progress["eta_seconds"],
                     j.updated_at])
    return Table(["JobId", "Kind", "State", "Group", "Step", "Moves", "Done", "Percent", "EtaSeconds", "Updated"], rows)


@jobs.command("cancel", help="Cancel balance job JOB_ID if it has not switched its map yet.")
@click.argument("job_id", type=params.INT)
@click.option("--reason", help="Why (default: cancelled by an operator).")
@pass_env
def cancel(env: Env, job_id: int, reason: str | None) -> str:
    j = env.catalog().balance.cancel(job_id, reason or "cancelled by an operator")
    return f"balance job {j.id} is {j.state}"

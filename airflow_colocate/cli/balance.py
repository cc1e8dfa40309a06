"""``colocate balance`` and ``colocate jobs``: repair and balance groups with clone-and-drop, and
the jobs that do it."""

from __future__ import annotations

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
@click.option("--threshold", type=params.FRACTION, default=0.0, show_default=True,
              help="Skip moves that gain less than this fraction.")
@click.option("--relocate-delay-minutes", type=params.MINUTES,
              help="Down longer than this is relocated (default $COLOCATE_RELOCATE_DELAY_MINUTES or 30).")
@click.option("--relocate-now", is_flag=True,
              help="Relocate the buckets of down backends now, without waiting for the relocate delay "
                   "(recorded as a balance.relocate_now event with the actor).")
@click.option("--grace-minutes", type=params.MINUTES, default=10.0, show_default=True,
              help="Keep replicas the map dropped this long.")
@click.option("--verify", is_flag=True, help="Re-hash replicas first; repair the ones that changed.")
@click.option("--master", type=params.MASTER, help="Spark master for the clone job (default $SPARK_MASTER or local[*]).")
@click.option("--runner", type=params.Choice(["spark", "local"]), default="spark", show_default=True,
              help="Run clones as a Spark job, or in this process (small lakes; every backend must be reachable here).")
@json_option
@pass_env
def balance(env: Env, dry_run: bool, strategy: str, groups: tuple[str, ...], threshold: float,
            relocate_delay_minutes: float | None, relocate_now: bool, grace_minutes: float, verify: bool,
            master: str | None, runner: str) -> Report:
    from airflow_colocate.jobs import balance_run
    from airflow_colocate.jobs.balance import BalanceOptions
    from airflow_colocate.jobs.balance_outcome import CLI_HINT

    catalog = env.catalog()
    options = BalanceOptions(strategy=strategy, threshold=threshold, relocate_delay=params.relocate_delay(relocate_delay_minutes),
                             relocate_delay_source=("COLOCATE_RELOCATE_DELAY_MINUTES" if relocate_delay_minutes is None
                                                    else "--relocate-delay-minutes"),
                             grace=timedelta(minutes=grace_minutes), groups=list(groups) or None, verify=verify,
                             relocate_now=relocate_now)
    out = balance_run.start(catalog, options, dry_run=dry_run, runner=runner, master=master,
                            info=output.progress(), hint=CLI_HINT)
    if dry_run:
        blocks = ["dry run: nothing is changed", *out["headings"],
                  *([f"pending: {out['outcome'].removeprefix('dry run: ')}"] if out["outcome"] else [])]
        if out["moves"]:
            blocks.append(Table(["Group", "Bucket", "From", "To", "Bytes", "Why"], out["moves"]))
        return Report(blocks, data=out["plans"])
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


@click.group("jobs", cls=Group, help="Write, balance and gc jobs: list, cancel.")
def jobs() -> None:
    pass


@jobs.command("list", help="Jobs, newest first.")
@click.option("--kind", help="write, relocate, balance, repair or gc.")
@click.option("--state", help="running, done, cancelled, committed, failed, ...")
@click.option("--limit", type=params.COUNT, default=50, show_default=True, help="At most this many jobs.")
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
@click.argument("job_id", type=params.ID)
@click.option("--reason", type=params.REASON, help="Why (default: cancelled by an operator).")
@pass_env
def cancel(env: Env, job_id: int, reason: str | None) -> str:
    j = env.catalog().balance.cancel(job_id, reason or "cancelled by an operator")
    return f"balance job {j.id} is {j.state}"

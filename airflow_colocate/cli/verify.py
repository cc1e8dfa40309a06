"""``colocate verify``: re-hash every replica and re-compute every row's bucket with Spark; mark the
replicas that fail bad, so no read chooses them and ``colocate balance`` repairs them."""

from __future__ import annotations

import contextlib
import sys

import click

from airflow_colocate.cli import output, params
from airflow_colocate.cli.base import Command, Env, pass_env
from airflow_colocate.cli.output import Report, Table, json_option


@click.command("verify", cls=Command, help=(
    "Prove replicas: re-hash their files against the catalog's checksums and re-compute every row's bucket "
    "(pmod(hash(dist cols), n)) with a Spark job. A replica that fails is marked bad and its group unstable; "
    "the next 'colocate balance' repairs it from a good replica."))
@click.option("--group", help="Only the tables of this group (default: every group).")
@click.option("--table", help="Only this table (of a group).")
@click.option("--limit", type=params.COUNT, help="At most this many replicas, the least recently verified first.")
@click.option("--master", type=params.MASTER, help="Spark master for the verify job (default $SPARK_MASTER or local[*]).")
@json_option
@pass_env
def verify(env: Env, group: str | None, table: str | None, limit: int | None, master: str | None) -> Report:
    from airflow_colocate.jobs.verify import plan_verify

    catalog = env.catalog()
    plan_verify(catalog, group=group, table=table, limit=limit)  # a bad scope is refused before Spark starts
    out = _run(catalog, group, table, limit, master)
    head = (f"verified {out['replicas']} replicas: {out['bytes']} bytes re-hashed, {out['rows']} rows' buckets "
            f"re-computed in {out['seconds']:.1f}s; {len(out['bad'])} bad")
    blocks: list = [head]
    if out["bad"]:
        blocks.append(Table(["Table", "Partition", "Bucket", "BackendId", "Path", "Problem"],
                            [[b["table"], b["partition"], b["bucket"], b["backend_id"], b["path"], b["reason"]]
                             for b in out["bad"]],
                            title="bad replicas (marked bad: no read uses them; 'colocate balance' repairs them)"))
    blocks.append(Table(["GroupId", "GroupName", "IsStable", "Reason"],
                        [[g["group_id"], g["group"], g["stable"], g["reason"]] for g in out["groups"]]))
    from airflow_colocate.cli.maintenance import exit_if

    return exit_if(Report(blocks, data=out), [
        f"backend {u['backend']} unreachable ({u['reason']}): its replicas were not verified; the others were"
        for u in out.get("unreachable", [])], "verify")


def _run(catalog, group: str | None, table: str | None, limit: int | None, master: str | None) -> dict:
    """Run the verify with a Spark session; stop it only if this command started it. Under
    ``--json`` the job's progress lines go to stderr, so stdout holds the one JSON document."""
    from pyspark.sql import SparkSession

    from airflow_colocate.jobs.verify import session_runner
    from airflow_colocate.jobs.verify import verify as run_verify
    from airflow_colocate.spark.session import get_spark

    owned = SparkSession.getActiveSession() is None
    spark = get_spark("colocate-verify", master=master, conf={"spark.ui.enabled": "false"})
    quiet = contextlib.redirect_stdout(sys.stderr) if output.wants_json() else contextlib.nullcontext()
    try:
        if owned:
            spark.sparkContext.setLogLevel("ERROR")
        with quiet:
            return run_verify(catalog, session_runner(spark), group=group, table=table, limit=limit,
                              echo=output.progress())
    finally:
        if owned:
            spark.stop()

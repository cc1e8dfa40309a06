"""Maintenance of colocation groups: probe backends, verify, repair, balance, decommission.

Scheduled every 30 minutes it probes every backend, repairs and balances every group and drops the partitions
past their table's retention (each a no-op
when all is well). Triggered from the Airflow UI ("Trigger DAG w/ config") it shows a form:
action, dry run, group, table and backend, e.g. to drain a backend before retiring its disk, or to
verify a group (re-hash every replica and re-compute every row's bucket) and repair what failed.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.operators.balance import ColocateBalanceOperator
from airflow_colocate.operators.verify import ColocateVerifyOperator

with DAG(
    dag_id="colocate_maintenance",
    description="Probe backends, verify replicas, repair and balance colocation groups (clone-and-drop)",
    schedule="*/30 * * * *",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["colocate", "example", "maintenance"],
    params={
        "action": Param("balance", enum=["probe", "repair", "balance", "decommission", "verify", "retention"],
                        description="probe: heartbeat only; repair: relocate buckets off unavailable backends; "
                                    "balance: repair, then even out buckets; decommission: drain 'backend'; "
                                    "verify: re-hash every replica and re-check every row's bucket, mark the bad "
                                    "ones, then repair them; retention: only drop partitions past their table's "
                                    "retention (balance runs it too)"),
        "dry_run": Param(False, type="boolean", description="only print the plan"),
        "group": Param(None, type=["null", "string"], description="one group (name or dbId.grpId); empty = every group"),
        "table": Param(None, type=["null", "string"], description="one table, for verify; empty = every table of the group(s)"),
        "backend": Param(None, type=["null", "string"], description="backend name or id, for decommission; empty for every other action"),
        "today": Param(None, type=["null", "string"], format="date",
                       description="retention counts back from this day (YYYY-MM-DD); empty = today (UTC)"),
        "strategy": Param("count", enum=["count", "size"], description="count: even bucket slots; size: bytes against capacity"),
        "alert_after_minutes": Param(None, type=["null", "number"], minimum=0,
                                     description="the alert task fails when a group has been unstable, or a backend "
                                                 "down, longer than this; empty = twice the relocate delay (at least 10)"),
    },
    doc_md=__doc__,
) as dag:

    @task.branch
    def choose(params: dict | None = None) -> list[str]:
        action = params["action"]
        if action == "probe":
            return ["probe"]
        if action == "decommission":
            return ["decommission"]
        if action == "verify":
            return ["verify"]
        if action == "retention":
            return ["retention"]
        if action == "repair":
            return ["balance"]
        return ["balance", "retention"]  # the scheduled run

    @task
    def probe() -> list[dict]:
        from airflow_colocate.jobs.health import probe_backends

        catalog = ColocateCatalogHook().get_conn()
        return [{"backend": r.backend.name, "state": r.backend.state, "ok": r.ok, "error": r.error}
                for r in probe_backends(catalog)]

    @task
    def decommission(params: dict | None = None) -> dict:
        if not params["backend"]:
            raise ValueError("action 'decommission' needs 'backend': the name or id of the backend to drain")
        catalog = ColocateCatalogHook().get_conn()
        if params["dry_run"]:
            return {"backend": catalog.backends.get(params["backend"]).name, "dry_run": True}
        b = catalog.backends.decommission(params["backend"])
        return {"backend": b.name, "state": b.state}

    balance = ColocateBalanceOperator(
        task_id="balance",
        groups="{{ params.group or None }}",
        strategy="{{ params.strategy }}",
        dry_run="{{ params.dry_run }}",
        # repair only relocates: no balance move gains enough to pass a threshold of 1.0
        threshold="{{ 1.0 if params.action == 'repair' else 0.0 }}",
        trigger_rule="none_failed_min_one_success",
        conf={"spark.ui.enabled": "false"},
    )
    verify = ColocateVerifyOperator(
        task_id="verify",
        group="{{ params.group or None }}",
        table="{{ params.table or None }}",
        dry_run="{{ params.dry_run }}",
        conf={"spark.ui.enabled": "false"},
    )
    @task
    def retention(params: dict | None = None) -> dict:
        """Drop partitions older than their table's retention into the recycle bin, purge the bin
        after its window, erase purged files after gc's grace (jobs/retention.py)."""
        from datetime import date

        from airflow_colocate.jobs.retention import apply_retention

        today = date.fromisoformat(params["today"]) if params.get("today") else None
        return apply_retention(ColocateCatalogHook().get_conn(), today=today, dry_run=bool(params["dry_run"])).as_dict()

    drain = decommission()
    expire = retention()
    choose() >> [probe(), drain, verify, balance, expire]
    drain >> balance
    verify >> balance  # what verify marked bad is repaired from a good replica at once

    @task(retries=0)
    def alert(params: dict | None = None) -> dict:
        """Fail, with the reason, when a group has stayed unstable or a backend down past the
        threshold: Airflow's own notifications of a failed task (email, Slack,
        on_failure_callback) then carry it. A task of its own, upstream of nothing and downstream of
        nothing: it runs whatever the action, reads what the last probes and checks recorded (the
        threshold is minutes long), and a failed action still fails the run."""
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_colocate.jobs.alerts import overdue, threshold_of

        threshold = threshold_of(params.get("alert_after_minutes"))
        lines = overdue(ColocateCatalogHook().get_conn(), threshold)
        if lines:
            raise AirflowFailException("; ".join(lines))
        return {"threshold_minutes": threshold.total_seconds() / 60, "overdue": []}

    alert()

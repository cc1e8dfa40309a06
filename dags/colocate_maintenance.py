"""Maintenance of colocation groups: probe backends, verify, repair, balance, decommission.

Scheduled every 30 minutes it probes every backend, repairs and balances every group and drops the partitions
past their table's retention (each a no-op
when all is well). Triggered from the Airflow UI ("Trigger DAG w/ config") it shows a form:
action, dry run, group, table and backend, e.g. to drain a backend before retiring its disk, or to
verify a group (re-hash every replica and re-compute every row's bucket) and repair what failed.

The first task, ``check_params``, refuses a run whose form lacks what its action needs (a
decommission without a backend, a group or table that does not exist) in one line, before
anything runs. A repair that moves nothing because a down backend is still inside its relocate
delay ends with its ``balance`` task **skipped**, saying when the relocation starts; ``relocate_now``
starts it at once (recorded with this run as the actor).

``dry_run`` changes nothing in the catalog, for every action: probe checks each backend's disk
(identity marker, heartbeat object) and reports what it would record, without recording a state
or a replica verdict; repair, balance and decommission print their plans (from the states the last
probe recorded: a dry run records no probe); verify says what it would re-hash; retention lists
what it would drop.
"""

from __future__ import annotations

import logging

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.operators.balance import ColocateBalanceOperator
from airflow_colocate.operators.verify import ColocateVerifyOperator

log = logging.getLogger(__name__)  # the root handler: the task log

ACTIONS = ("probe", "repair", "balance", "decommission", "verify", "retention")
RELOCATING = ("repair", "balance", "verify", "decommission")  # they run the balance task


def check_maintenance_params(catalog, params: dict) -> dict:
    """What the chosen action needs, checked against the catalog; the first problem raises
    ``ValueError`` with one line naming the field and what would be right."""
    from datetime import date

    action = params["action"]
    backends = [b for b in catalog.backends.list() if b.state != "decommissioned"]
    names = ", ".join(b.name for b in backends) or "none registered"
    if action == "decommission":
        if not params.get("backend"):
            raise ValueError(f"decommission needs a backend: set 'backend' to one of {names}")
        if params["backend"] not in {b.name for b in backends} | {str(b.id) for b in backends}:
            raise ValueError(f"decommission: no backend {params['backend']!r} to drain: set 'backend' to one of {names}")
    elif params.get("backend"):
        raise ValueError(f"'backend' is for decommission only ({action} works on every backend): clear it, "
                         "or choose action 'decommission'")
    if params.get("table") and action != "verify":
        raise ValueError("'table' is for verify only: clear it, or choose action 'verify'")
    if params.get("relocate_now") and action not in RELOCATING:
        raise ValueError(f"relocate_now applies to {', '.join(RELOCATING)} (they run the balance task), "
                         f"not to {action}: clear it, or choose action 'repair'")
    if params.get("group"):
        catalog.groups.get(params["group"])  # NotFound names the group and how to list them
    if params.get("table"):
        catalog.tables.get(params["table"])
    if params.get("today"):
        try:
            date.fromisoformat(params["today"])
        except ValueError:
            raise ValueError(f"today {params['today']!r} is not a date: expected YYYY-MM-DD, e.g. 2026-11-21") from None
    return {"action": action, "dry_run": bool(params.get("dry_run")), "relocate_now": bool(params.get("relocate_now"))}


def dry_probe(catalog) -> list[dict]:
    """A dry-run probe: each backend's disk is checked as the probe checks it (identity marker,
    then a heartbeat object written, read back and deleted on the backend itself), and what the
    probe would record is reported; nothing is recorded in the catalog (no state change, no
    heartbeat time, no replica marked bad)."""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_colocate.jobs.health import DEFAULT_PROBE_TIMEOUT, one_line_reason
    from airflow_colocate.storage.probe import probe_root

    targets = [b for b in catalog.backends.list() if b.state != "decommissioned"]
    tokens, uid = catalog.backends.markers(), catalog.backends.catalog_uid()

    def check(b) -> str | None:
        marker = {"backend_id": b.id, "catalog_id": uid, "token": tokens[b.id]} if tokens.get(b.id) else None
        try:
            probe_root(b.root_uri, marker=marker)
        except Exception as exc:  # noqa: BLE001 - any failure is what the probe would record as the reason
            return f"{type(exc).__name__}: {one_line_reason(exc)}"
        return None

    pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(targets))), thread_name_prefix="colocate-dry-probe")
    futures = {b.id: pool.submit(check, b) for b in targets}
    out = []
    try:
        for b in targets:
            try:
                error = futures[b.id].result(timeout=DEFAULT_PROBE_TIMEOUT)
            except TimeoutError:
                error = f"no answer within {DEFAULT_PROBE_TIMEOUT:g}s"
            # as record_probe decides: a failure marks an alive backend down; a success brings back
            # a backend the probe had marked down, not one an admin marked down
            by_probe = (getattr(b, "reason_source", None) == "probe"
                        or str(getattr(b, "state_reason", None) or "").startswith("probe"))
            if error is not None:
                would = "down" if b.state == "alive" else b.state
            else:
                would = "alive" if b.state == "alive" or (b.state == "down" and by_probe) else b.state
            out.append({"backend": b.name, "state": b.state, "reachable": error is None, "error": error,
                        "would_be": would, "dry_run": True})
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a hung disk must not hang the task
    return out


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
        "action": Param("balance", enum=list(ACTIONS),
                        description="probe: heartbeat only; repair: relocate buckets off unavailable backends; "
                                    "balance: repair, then even out buckets; decommission: drain 'backend'; "
                                    "verify: re-hash every replica and re-check every row's bucket, mark the bad "
                                    "ones, then repair them; retention: only drop partitions past their table's "
                                    "retention (balance runs it too)"),
        # nullable: Airflow's trigger form marks a typed, non-nullable field as required
        "dry_run": Param(False, type=["boolean", "null"],
                         description="change nothing: report what the action would do (every action)"),
        "relocate_now": Param(False, type=["boolean", "null"],
                              description="repair, balance, verify, decommission: relocate the buckets of down "
                                          "backends now instead of after the relocate delay (recorded with this run)"),
        "group": Param(None, type=["null", "string"], description="one group (name or dbId.grpId); empty = every group"),
        "table": Param(None, type=["null", "string"], description="one table, for verify; empty = every table of the group(s)"),
        "backend": Param(None, type=["null", "string"], description="backend name or id, for decommission; empty for every other action"),
        # a text field, not format="date": Airflow's date picker shows the browser's locale (mm/dd/yyyy)
        "today": Param(None, type=["null", "string"], pattern=r"^\d{4}-\d{2}-\d{2}$",
                       description="retention counts back from this day (YYYY-MM-DD); empty = today (UTC)"),
        "strategy": Param("count", enum=["count", "size"], description="count: even bucket slots; size: bytes against capacity"),
        "alert_after_minutes": Param(None, type=["null", "number"], minimum=0,
                                     description="the alert task fails when a group has been unstable, or a backend "
                                                 "down, longer than this; empty = twice the relocate delay (at least 10)"),
    },
    doc_md=__doc__,
) as dag:

    @task(retries=0, show_return_value_in_logs=False)
    def check_params(params: dict | None = None) -> dict:
        """Refuse, in one line, a run whose form lacks what its action needs or names what does
        not exist: it fails here, before any other task starts, not half-way through."""
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_colocate.core.errors import ColocateError

        try:
            checked = check_maintenance_params(ColocateCatalogHook().get_conn(), params)
        except (ColocateError, ValueError) as exc:
            log.error("form refused: %s", exc)  # the one line; Airflow prints its own traceback after it
            raise AirflowFailException(str(exc)) from None
        log.info("form accepted: action %s%s%s", checked["action"], ", dry run" if checked["dry_run"] else "",
                 ", relocate now" if checked["relocate_now"] else "")
        return checked

    @task.branch(show_return_value_in_logs=False)
    def choose(params: dict | None = None) -> list[str]:
        action = params["action"]
        chosen = {"probe": ["probe"], "decommission": ["decommission"], "verify": ["verify"],
                  "retention": ["retention"], "repair": ["balance"]}.get(action, ["balance", "retention"])
        if action in ("probe", "decommission", "verify", "retention", "repair"):
            log.info("action %s: runs %s; the other actions' tasks are skipped", action, ", ".join(chosen))
        else:  # the scheduled run
            log.info("scheduled run: balance (which probes every backend first) and retention; the probe task "
                     "is skipped because the balance probes")
        return chosen

    @task
    def probe(params: dict | None = None) -> list[dict]:
        from airflow_colocate.jobs.health import probe_backends

        catalog = ColocateCatalogHook().get_conn()
        if params.get("dry_run"):
            return dry_probe(catalog)
        # the state (an admin's mark holds it) apart from what the probe found ('reachable')
        return [r.to_dict() for r in probe_backends(catalog)]

    @task
    def decommission(params: dict | None = None) -> dict:
        if not params["backend"]:
            raise ValueError("action 'decommission' needs 'backend': the name or id of the backend to drain")
        catalog = ColocateCatalogHook().get_conn()
        if params["dry_run"]:
            return {"backend": catalog.backends.get(params["backend"]).name, "dry_run": True}
        from airflow_colocate.jobs.backends import change_state

        b, _ = change_state(catalog, params["backend"], "decommission")  # as `colocate backend decommission`
        return {"backend": b.name, "state": b.state}

    balance = ColocateBalanceOperator(
        task_id="balance",
        groups="{{ params.group or None }}",
        strategy="{{ params.strategy }}",
        dry_run="{{ params.dry_run }}",
        relocate_now="{{ params.relocate_now }}",
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
    @task(show_return_value_in_logs=False)  # its one sentence says what it did; the dict is its XCom
    def retention(params: dict | None = None) -> dict:
        """Drop partitions older than their table's retention into the recycle bin, purge the bin
        after its window, erase purged files after gc's grace (jobs/retention.py)."""
        from datetime import date

        from airflow_colocate.jobs.retention import apply_retention

        today = date.fromisoformat(params["today"]) if params.get("today") else None
        result = apply_retention(ColocateCatalogHook().get_conn(), today=today, dry_run=bool(params["dry_run"]))
        log.info(result.sentence())
        return result.as_dict()

    drain = decommission()
    expire = retention()
    check_params() >> choose() >> [probe(), drain, verify, balance, expire]
    drain >> balance
    verify >> balance  # what verify marked bad is repaired from a good replica at once

    @task(retries=0, show_return_value_in_logs=False)
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
        minutes = threshold.total_seconds() / 60
        log.info("alert: nothing overdue: no group unstable and no backend down longer than %g min", minutes)
        return {"threshold_minutes": minutes, "overdue": []}

    alert()

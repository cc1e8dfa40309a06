"""``ColocateBalanceOperator``: probe, repair and balance colocation groups with clone-and-drop."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow_colocate.core.contract import CloneReport
from airflow_colocate.jobs import balance_run
from airflow_colocate.jobs.balance import BalanceOptions
from airflow_colocate.operators.base import ColocateSparkOperator
from airflow_colocate.operators.links import ColocationLink


class ColocateBalanceOperator(ColocateSparkOperator):
    """Keep every group's buckets local and whole while backends fail, come back, join and leave.

    One run: probe every backend (heartbeat), optionally re-hash replicas (``verify``), resume any
    balance job a killed run left behind, plan relocation (backends down longer than
    ``relocate_delay_minutes`` or decommissioning) and balance (``strategy``) per group, and run
    each plan as a job: mark the group unstable → clone the replicas with the Spark clone job
    (``spark/clone_job.py`` through spark-submit; verified by size and checksum) → switch the
    bucket map → clone writes that landed meanwhile → mark stable → drop the old replicas after
    ``grace_minutes``. Honours ``disable_colocate_relocate`` and ``disable_colocate_balance``.

    The plan (moves per group) and a summary go to the log and XCom, with an ``outcome`` line; a
    run that moved nothing while a relocation waits for its delay is *skipped* with that line
    (``nothing moved: relocation of be2's buckets starts at 14:32 UTC (delay 30 min); trigger with
    relocate_now to start it now``; the report still goes to XCom), so it does not show as a green
    run that repaired something. ``dry_run=True`` only plans.

    :param groups: a group (name, ``dbId_name`` or ``dbId.grpId``) or a list; default every group.
    :param strategy: ``count`` (even bucket slots per backend) or ``size`` (bytes against capacity).
    :param threshold: skip moves that gain less than this fraction of the average load.
    :param relocate_now: relocate the buckets of down backends now, whatever the delay (recorded
        as a ``balance.relocate_now`` event naming this task).
    """

    job_kind = "clone"
    report_type = CloneReport
    template_fields: Sequence[str] = (
        *ColocateSparkOperator.template_fields,
        "groups", "strategy", "threshold", "dry_run", "relocate_delay_minutes", "grace_minutes", "verify",
        "relocate_now",
    )
    ui_color = "#f3e3c8"
    operator_extra_links = (ColocationLink(),)

    def __init__(self, *, groups: str | Sequence[str] | None = None, strategy: str = "count", threshold: float = 0.0,
                 dry_run: bool = False, probe: bool = True, verify: bool = False, verify_limit: int | None = None,
                 relocate_delay_minutes: float | None = None, grace_minutes: float = 10.0,
                 comeback_fraction: float = 0.5, max_rounds: int = 4, relocate_now: bool = False,
                 **kwargs: Any) -> None:
        kwargs.setdefault("name", f"colocate-balance-{kwargs.get('task_id', 'balance')}")
        super().__init__(**kwargs)
        self.groups = groups
        self.strategy = strategy
        self.threshold = threshold
        self.dry_run = dry_run
        self.probe = probe
        self.verify = verify
        self.verify_limit = verify_limit
        self.relocate_delay_minutes = relocate_delay_minutes
        self.grace_minutes = grace_minutes
        self.comeback_fraction = comeback_fraction
        self.max_rounds = max_rounds
        self.relocate_now = relocate_now

    def _options(self) -> BalanceOptions:
        from airflow_colocate.jobs.health import relocate_delay_from_env

        groups = [self.groups] if isinstance(self.groups, str) else list(self.groups or [])
        groups = [g for g in groups if g and g not in ("None", "null")]  # a template rendered to text
        delay = (relocate_delay_from_env() if self.relocate_delay_minutes in (None, "")
                 else timedelta(minutes=float(self.relocate_delay_minutes)))
        return BalanceOptions(strategy=self.strategy, threshold=float(self.threshold), relocate_delay=delay,
                              relocate_delay_source=("COLOCATE_RELOCATE_DELAY_MINUTES" if self.relocate_delay_minutes
                                                     in (None, "") else "relocate_delay_minutes"),
                              grace=timedelta(minutes=float(self.grace_minutes)),
                              comeback_fraction=float(self.comeback_fraction), max_rounds=int(self.max_rounds),
                              groups=groups or None, verify=_truthy(self.verify), verify_limit=self.verify_limit,
                              relocate_now=_truthy(self.relocate_now))

    def execute(self, context) -> dict:
        dry_run = _truthy(self.dry_run)
        info = lambda line: self.log.info("colocate: %s", line)  # noqa: E731
        warn = lambda line: self.log.warning("colocate: %s", line)  # noqa: E731
        if dry_run and self.probe:  # a dry run changes nothing in the catalog, a probe's verdicts included
            info("dry run: planned from the backend states the last probe recorded (no probe)")
        out = balance_run.start(self.catalog, self._options(), dry_run=dry_run, probe=self.probe,
                                runner=lambda clone: self.run_job(context, clone), work_dir=self.work_dir,
                                info=info, warn=warn)
        if dry_run:
            for line in out.pop("lines"):
                self.log.info("colocate plan: %s", line)
            out.pop("moves")
            out.pop("headings")
            if out["outcome"]:
                warn(out["outcome"])
            else:
                out.pop("outcome")
            return out
        for g in out["groups"]:
            (info if g["stable"] else warn)(f"group {g['group']}: " + ("stable" if g["stable"] else f"UNSTABLE: {g['reason']}"))
        info(out["outcome"])
        if balance_run.skipped(out):
            # skipped, not green: nothing was repaired because a relocation waits for its delay; the
            # report stays readable in XCom as a successful run's would
            from airflow.sdk.exceptions import AirflowSkipException

            ti = context.get("ti") if hasattr(context, "get") else None
            if ti is not None:
                ti.xcom_push(key="return_value", value=out)
            raise AirflowSkipException(out["outcome"])
        return out


def _truthy(value) -> bool:
    """A flag that may arrive as text from a template ("False", "true", "0")."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


__all__ = ["ColocateBalanceOperator"]

"""``GroupStableSensor``: wait until a colocation group is stable (its joins are colocated again).

Use it before a join that must not fall back, or after a ``ColocateBalanceOperator`` to wait for a
repair started elsewhere. Each poke recomputes stability from the replicas (``check=True``) and
records it, so the sensor also keeps ``IsStable`` fresh. The group state — stable or not, and the
reasons (which table, partition, bucket, backend) while it is not — goes to the task log and to
XCom under ``group_state``; the sensor returns it as its XCom value when it succeeds.

Modes: ``poke`` (holds a worker slot), ``reschedule`` (frees it between pokes) and
``deferrable=True`` (waits in the triggerer with :class:`~airflow_colocate.triggers.stable.GroupStableTrigger`).
``timeout`` and ``soft_fail`` behave as for any sensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

from airflow_colocate.hooks.catalog import ColocateCatalogHook
from airflow_colocate.jobs import metrics

XCOM_KEY = "group_state"


class GroupStableSensor(BaseSensorOperator):
    """Wait until colocation group ``group`` is stable.

    :param group: group name, full name (``dbId_name``) or id (``dbId.grpId``); templated.
    :param db: database of a bare group name.
    :param check: recompute stability from the replicas on every poke (default) instead of reading
        the recorded flag.
    :param deferrable: wait in the triggerer instead of a worker slot.
    """

    template_fields: Sequence[str] = ("group", "db")
    ui_color = "#e4f0e8"

    def __init__(self, *, group: str, db: str = "default", check: bool = True, deferrable: bool = False,
                 colocate_conn_id: str = ColocateCatalogHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.db = db
        self.check = check
        self.deferrable = deferrable
        self.colocate_conn_id = colocate_conn_id
        self._catalog = None

    def _report(self, context, state: dict) -> None:
        metrics.group_waited(state.get("group") or self.group, bool(state.get("stable")))
        if state.get("stable"):
            self.log.info("colocate: group %s (%s) is stable", state.get("group"), state.get("group_id"))
        else:
            n = state.get("problems")
            self.log.info("colocate: group %s (%s) is not stable (%s problem%s):", state.get("group"),
                          state.get("group_id"), n, "" if n == 1 else "s")
            for reason in state.get("reasons", [])[:20]:
                self.log.info("colocate:   %s", reason)
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key=XCOM_KEY, value=state)

    def _state(self) -> dict:
        from airflow_colocate.jobs.health import group_state

        if self._catalog is None:  # one per task run: poke mode polls many times
            self._catalog = ColocateCatalogHook(self.colocate_conn_id).get_conn()
        return group_state(self._catalog, self.group, check=self.check, db=self.db)

    def poke(self, context) -> PokeReturnValue:
        state = self._state()
        self._report(context, state)
        return PokeReturnValue(is_done=bool(state["stable"]), xcom_value=state)

    def execute(self, context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        from airflow_colocate.triggers.stable import GroupStableTrigger

        timeout_at = datetime.now(timezone.utc) + timedelta(seconds=self.timeout)
        self.defer(
            trigger=GroupStableTrigger(self.group, colocate_conn_id=self.colocate_conn_id, db=self.db,
                                       check=self.check, poll_interval=self.poke_interval,
                                       timeout_at=timeout_at.isoformat()),
            method_name="execute_complete",
            # the trigger fires its own timeout event first, so soft_fail sees the group state
            timeout=timedelta(seconds=self.timeout + max(60.0, 2 * self.poke_interval)),
        )

    def execute_complete(self, context, event: dict[str, Any] | None = None) -> dict:
        event = event or {"status": "error", "message": "the trigger sent no event"}
        status = event.get("status")
        state = {k: v for k, v in event.items() if k not in ("status", "message")}
        if status == "stable":
            self._report(context, state)
            return state
        if status == "timeout":
            self._report(context, state)
            message = (f"group {state.get('group')} was not stable within {self.timeout:g}s: "
                       f"{state.get('reason') or 'no reason recorded'}")
            if self.soft_fail:
                raise AirflowSkipException(message)
            raise AirflowSensorTimeout(message)
        message = f"waiting for group {self.group} failed: {event.get('message')}"
        if self.soft_fail:
            raise AirflowSkipException(message)
        raise AirflowException(message)


__all__ = ["GroupStableSensor", "XCOM_KEY"]

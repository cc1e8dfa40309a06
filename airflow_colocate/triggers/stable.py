"""``GroupStableTrigger``: wait in the triggerer until a colocation group is stable.

The catalog API is blocking (SQLAlchemy), so each poll runs it in a worker thread with
:func:`asyncio.to_thread`; the event loop of the triggerer is never blocked. The trigger fires
once: ``{"status": "stable", ...}`` when the group is stable, ``{"status": "timeout", ...}`` when
``timeout_at`` passes first (so the sensor can honour ``soft_fail``), or ``{"status": "error",
"message": ...}`` when the catalog cannot be read. Every event carries the group state: the
group, ``stable``, ``reason`` and ``reasons``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CLASSPATH = "airflow_colocate.triggers.stable.GroupStableTrigger"


class GroupStableTrigger(BaseTrigger):
    """Poll the catalog every ``poll_interval`` seconds until ``group`` is stable.

    :param group: group name, full name (``dbId_name``) or id (``dbId.grpId``).
    :param colocate_conn_id: the catalog connection, resolved in the triggerer.
    :param catalog_url: a catalog URL instead of the connection (tests, local runs).
    :param check: recompute stability from the replicas on each poll (else read the recorded flag).
    :param timeout_at: ISO timestamp after which the trigger fires ``timeout``.
    """

    def __init__(self, group: str, *, colocate_conn_id: str = "colocate_default", catalog_url: str | None = None,
                 db: str = "default", check: bool = True, poll_interval: float = 60.0,
                 timeout_at: str | None = None) -> None:
        super().__init__()
        self.group = group
        self.colocate_conn_id = colocate_conn_id
        self.catalog_url = catalog_url
        self.db = db
        self.check = check
        self.poll_interval = float(poll_interval)
        self.timeout_at = timeout_at
        self._catalog = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {"group": self.group, "colocate_conn_id": self.colocate_conn_id,
                           "catalog_url": self.catalog_url, "db": self.db, "check": self.check,
                           "poll_interval": self.poll_interval, "timeout_at": self.timeout_at}

    def _get_catalog(self):
        if self._catalog is None:
            if self.catalog_url:
                from airflow_colocate.catalog import Catalog

                self._catalog = Catalog(self.catalog_url, actor="airflow-triggerer")
                self._catalog.check_schema()
            else:
                from airflow_colocate.hooks.catalog import ColocateCatalogHook

                self._catalog = ColocateCatalogHook(self.colocate_conn_id).get_conn()
        return self._catalog

    def _state(self) -> dict:
        from airflow_colocate.jobs.health import group_state

        return group_state(self._get_catalog(), self.group, check=self.check, db=self.db)

    def _deadline(self) -> datetime | None:
        if not self.timeout_at:
            return None
        at = datetime.fromisoformat(self.timeout_at)
        return at if at.tzinfo else at.replace(tzinfo=timezone.utc)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = self._deadline()
        last_reason = None
        while True:
            try:
                state = await asyncio.to_thread(self._state)
            except Exception as exc:  # an unreadable catalog ends the wait with the reason
                yield TriggerEvent({"status": "error", "group": self.group, "stable": False,
                                    "message": f"{type(exc).__name__}: {exc}"})
                return
            if state["stable"]:
                self.log.info("colocate: group %s is stable", state["group"])
                yield TriggerEvent({"status": "stable", **state})
                return
            if state["reason"] != last_reason:
                self.log.info("colocate: group %s is not stable: %s", state["group"], state["reason"])
                last_reason = state["reason"]
            if deadline is not None and datetime.now(timezone.utc) >= deadline:
                yield TriggerEvent({"status": "timeout", **state})
                return
            await asyncio.sleep(self.poll_interval)

    def cleanup(self) -> None:
        if self._catalog is not None and self.catalog_url:
            self._catalog.dispose()
        self._catalog = None

"""Where a task's Spark job can be looked at after the fact: the Spark history server.

A spark-submit job's own UI (port 4040 on the driver) is gone when the task ends, so the link
points at a history server, when one is configured (it shows jobs whose ``spark.eventLog.enabled``
is true and whose ``spark.eventLog.dir`` it reads):

1. ``COLOCATE_SPARK_HISTORY_URL`` in the worker's environment (``http://history:18080``), else
2. ``spark.colocate.historyUrl`` in the operator's ``conf``, else
3. ``spark.yarn.historyServer.address`` in the operator's ``conf`` (YARN's own setting).

With the application id known (spark-submit prints it on YARN) the link opens that application;
otherwise the history server's list, where the job is named ``colocate-<kind> …``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

HISTORY_ENV = "COLOCATE_SPARK_HISTORY_URL"
HISTORY_CONF = ("spark.colocate.historyUrl", "spark.yarn.historyServer.address")
XCOM_FIELD = "spark_ui"  # in the summary a write or join returns


def history_url(conf: Mapping[str, str] | None, app_id: str | None = None,
                env: Mapping[str, str] | None = None) -> str | None:
    """The history server page of ``app_id`` (or its application list), or None if none is configured."""
    env = os.environ if env is None else env
    conf = conf or {}
    base = env.get(HISTORY_ENV) or next((str(conf[k]) for k in HISTORY_CONF if conf.get(k)), None)
    if not base:
        return None
    if "://" not in base:
        base = f"http://{base}"  # YARN's setting is host:port
    base = base.rstrip("/")
    return f"{base}/history/{quote(app_id, safe='')}/jobs/" if app_id else f"{base}/"


class SparkHistoryLink(BaseOperatorLink):
    """The "Spark UI" button: the history server page the task's summary names (empty when none)."""

    name = "Spark UI"

    def get_link(self, operator, *, ti_key) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        try:
            result = XCom.get_value(ti_key=ti_key, key="return_value")
        except Exception:  # no result yet: nothing to point at
            return ""
        return str(result.get(XCOM_FIELD) or "") if isinstance(result, dict) else ""


__all__ = ["HISTORY_CONF", "HISTORY_ENV", "SparkHistoryLink", "history_url"]

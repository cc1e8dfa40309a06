"""The S3 key and address of the backends, from an Airflow connection.

A deployment keeps secrets in connections (a secrets backend, the UI), not in the workers'
environment. The ``colocate_s3`` connection (type ``aws``: ``login`` the access key id,
``password`` the secret key, extra ``endpoint_url`` and ``region_name``) becomes the ``AWS_*``
variables every reader of the store already looks at (pyarrow and boto3 in the task's process,
hadoop-aws in the Spark job it submits): nothing else of the package needs to know where they came
from, and the key is never written to a plan file or logged. No such connection: the task's own
environment, or the AWS SDK's default chain (an instance or pod role), as before.
"""

from __future__ import annotations

import os

DEFAULT_CONN_ID = "colocate_s3"


def s3_env(conn_id: str | None = DEFAULT_CONN_ID) -> dict[str, str]:
    """The ``AWS_*`` variables of connection ``conn_id`` ({} when it is not defined)."""
    if not conn_id:
        return {}
    from airflow.sdk.bases.hook import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return {}
    extra = conn.extra_dejson or {}
    pairs = {"AWS_ACCESS_KEY_ID": conn.login, "AWS_SECRET_ACCESS_KEY": conn.password,
             "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
             "AWS_ENDPOINT_URL": extra.get("endpoint_url") or conn.host,
             "AWS_REGION": extra.get("region_name")}
    return {k: str(v) for k, v in pairs.items() if v}


def apply(conn_id: str | None = DEFAULT_CONN_ID) -> dict[str, str]:
    """Put the connection's variables into this (task) process's environment, where the control
    plane's reads and copies find them; returns them for the Spark job's environment."""
    env = s3_env(conn_id)
    os.environ.update(env)
    return env

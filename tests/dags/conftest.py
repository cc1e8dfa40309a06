from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata database (SQLite under the test AIRFLOW_HOME), for dag.test()."""
    from airflow.utils import db

    db.resetdb(skip_init=False)

"""One local Spark session for the folder (master local[2], UI off, 4 shuffle partitions)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from airflow_colocate.spark.session import get_spark

    session = get_spark(
        "colocate-tests",
        master="local[2]",
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()

"""The Spark side on backends in three buckets of a real S3 API (a bucket each): the write job
(Spark stages through ``s3a``, places and copies each bucket's replicas), the colocated join with
the columnar join and the bucket guard on, ``register()`` and the user's own ``spark.sql``,
``verify``; a replica object overwritten behind our back: the join reads around it with plain
Spark's rows, and the group is flagged; then a backend's whole bucket deleted: probed down,
repaired by copies between the other two buckets, joined colocated again with the same rows. Run in a process of its own, as a submitted job runs (s3_spark_run.py says why)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import local_line

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent


def test_write_join_register_verify_a_damaged_replica_and_a_lost_bucket_on_s3(s3_server, tmp_path):
    line = local_line()
    missing = [c for c, p in zip(object_stores.coordinates(line), object_stores.jars(line) or [None] * 9) if not p]
    assert object_stores.jars(line), (f"hadoop-aws for Spark {line} is not in the local Maven repository "
                                      f"({', '.join(object_stores.coordinates(line))}): run scripts/setup.sh --with-s3 {missing}")
    env = {**os.environ, **s3_server.env(), "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, str(HERE / "s3_spark_run.py"), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("FINDINGS ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    found = json.loads(lines[-1][len("FINDINGS "):])
    assert "hadoop-aws" in found["jars"]
    reference = found["reference"]
    assert len(reference) == 2 and reference[0][1] == "200"
    assert found["colocate"] is True and found["exchanges"] == [0], found["explain"]
    assert "ColocateColumnarMergeJoin" in found["explain"]
    assert found["join_rows"] == reference
    assert found["registered_rows"] == reference
    assert found["verify_bad"] == []
    assert found["after_damage_rows"] == reference
    assert found["group_stable"] is False  # the damaged replica is marked bad: the group check flags it
    assert "missing" in found["probe_be3"] or "NoSuchBucket" in found["probe_be3"], found["probe_be3"]
    assert found["repaired_stable"] is True and found["be3_in_map"] is False
    assert found["after_repair_colocate"] is True and found["after_repair_rows"] == reference
    assert found["verify_after_repair"] == []
    assert secret_not_in(tmp_path, s3_server.env()["AWS_SECRET_ACCESS_KEY"])


def secret_not_in(folder: Path, secret: str) -> bool:
    """No plan, report or catalog file of the run holds the store's secret key."""
    for path in folder.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            raise AssertionError(f"{path} holds the S3 secret key")
    return True

"""The clone job copies whole replicas on the executors, verified by checksum."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.spark.copy_job import main, run_copies
from airflow_colocate.storage.copy import copy_replica

pytestmark = pytest.mark.spark


def test_clone_replicas(spark, tmp_path):
    src = tmp_path / "be1" / "b00000"
    src.mkdir(parents=True)
    pq.write_table(pa.table({"k": list(range(100))}), src / "part-00000-w1_00000.c000.snappy.parquet")
    pq.write_table(pa.table({"k": list(range(5))}), src / "part-00000-w2_00000.c000.snappy.parquet")
    files, _ = copy_replica(src.as_uri(), (tmp_path / "ref").as_uri())  # the checksums a report would hold
    expect = dict(files)
    copies = [
        {"bucket_seq": 0, "backend_id": 2, "src": src.as_uri(), "dst": (tmp_path / "be2" / "b00000").as_uri(),
         "files": expect},
        {"bucket_seq": 0, "backend_id": 3, "src": src.as_uri(), "dst": (tmp_path / "be3" / "b00000").as_uri()},
    ]
    got = run_copies(spark, copies)
    assert [r["rows"] for r in got] == [105, 105]
    assert got[0]["checksum"] == got[1]["checksum"]
    assert sorted(p.name for p in (tmp_path / "be2" / "b00000").iterdir()) == sorted(expect)

    bad = dict(copies[0], dst=(tmp_path / "be4" / "b00000").as_uri(), files={n: "0" * 64 for n in expect})
    plan = tmp_path / "clone.json"
    plan.write_text(json.dumps({"kind": "clone", "job_id": "c1", "copies": [bad],
                                "report_uri": (tmp_path / "report.json").as_uri()}))
    assert main(["--plan", str(plan)]) == 1
    assert not (tmp_path / "report.json").exists()
    assert not any((tmp_path / "be4" / "b00000").iterdir())

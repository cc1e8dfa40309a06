"""The balance tests run without Spark on two stand-ins, held here to the Spark jobs they stand in for:

* the lake writer (balance_lake.Lake.write, pyarrow) must put every row in the bucket the Spark
  write job puts it in, on the same backends, under the same file name and schema, or the
  Spark-free tests would balance a lake Spark could never have written;
* the local runner must report exactly what the Spark clone job reports for the same plan: good
  copies, a corrupt source, a failed verify."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from colocate_testing import spark_bucket, spark_hash_long

from airflow_colocate.core.contract import Source, VerifyTask
from airflow_colocate.planner.clones import clone_plan
from airflow_colocate.jobs.runners import local_runner, session_runner
from airflow_colocate.jobs.write import finish_write, prepare_write
from airflow_colocate.spark.write_job import run_write
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout
from airflow_colocate.storage.place import write_id_for

pytestmark = pytest.mark.spark

EDGES = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**40 + 7, 2**63 - 1, -(2**63)]
KEYS = list(range(-300, 1700)) + EDGES[3:]  # EDGES[:3] are in the range


def test_murmur3_is_sparks_hash(spark):
    df = spark.range(-300, 1700).union(spark.createDataFrame([(k,) for k in EDGES[3:]], "id bigint"))
    got = df.selectExpr("id", "hash(id) AS h", "pmod(hash(id), 8) AS b").collect()
    assert len(got) == len(KEYS)
    assert {r.id: (r.h, r.b) for r in got} == {k: (spark_hash_long(k), spark_bucket(k, 8)) for k in KEYS}
    assert len({spark_bucket(k, 8) for k in EDGES}) > 1


def _layout(catalog, table: str, partition: str, plan) -> dict[int, list[tuple]]:
    """bucket seq -> per replica (backend, file names with the write id as W, ids, rows, schema)."""
    write_id = write_id_for(plan)
    _, (part,) = catalog.reads.replicas(table, [partition])
    out = {}
    for seq, bucket in enumerate(part.buckets):
        replicas = []
        for r in sorted(bucket, key=lambda r: r.backend_id):
            names = [n for n, _ in replica_dir.replica_files(r.path)]
            ids, schemas = [], set()
            for n in names:
                t = pq.read_table(fs.local_path(fs.join(r.path, n)))
                ids += t.column("id").to_pylist()
                schemas.add(tuple((f.name, str(f.type)) for f in t.schema))
            # the write job's name for this bucket, exactly (checked per side, compared without the id)
            assert names == ([layout.bucket_file_name(write_id, seq)] if ids else []), (table, seq, names)
            assert all(spark_bucket(k, plan.bucket_num) == seq for k in ids)
            replicas.append((r.backend_id, [n.replace(write_id, "W") for n in names], sorted(ids), r.rows, schemas))
        out[seq] = replicas
    return out


@pytest.mark.parametrize("partition,keys", [("2026-11-01", KEYS), ("2026-11-02", [5, 6, 7])])  # the second leaves empty buckets
def test_lake_writer_writes_what_the_spark_write_job_writes(lake, spark, tmp_path, partition, keys):
    cat = lake.catalog
    lake.create("by_spark", buckets=8)
    lake.create("by_lake", buckets=8)  # same group: the same bucket map
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"id": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]}), src / "p.parquet")

    ticket, spark_plan = prepare_write(cat, "by_spark", partition, Source(format="parquet", path=str(src)), work_dir=lake.work)
    finish_write(cat, ticket, run_write(spark, spark_plan))
    ticket, lake_plan = prepare_write(cat, "by_lake", partition, Source(format="parquet", path=str(src)), work_dir=lake.work)
    lake.write("by_lake", partition, keys, ticket_and_plan=(ticket, lake_plan))

    by_spark = _layout(cat, "by_spark", partition, spark_plan)
    by_lake = _layout(cat, "by_lake", partition, lake_plan)
    assert by_lake == by_spark
    assert sorted(k for reps in by_spark.values() for k in reps[0][2]) == sorted(keys)
    empty = sum(1 for reps in by_spark.values() if not reps[0][2])
    assert empty == (0 if len(keys) > 100 else 8 - len({spark_bucket(k, 8) for k in keys}))


class Stop(Exception):
    pass


def test_local_runner_reports_what_the_spark_clone_job_reports(lake, spark):
    cat = lake.catalog
    lake.create("orders", buckets=4)
    lake.write("orders", "2026-11-01", range(400))
    lake.add_backend("be4")  # empty: the balance moves two bucket replicas onto it
    started = []

    def stop(step, job_id):
        if step == "unstable":
            started.append(job_id)
            raise Stop()

    with pytest.raises(Stop):
        lake.run(on_step=stop)
    needs, _ = cat.balance.clone_needs(started[0])
    verifies = [VerifyTask(v.replica_id, v.backend_id, v.path, v.checksum, v.bytes) for v in cat.health.replicas_to_verify()]
    plan = clone_plan("same-plan", needs, str(lake.work / "unused.json"), verifies)
    assert len(plan.copies) == 2 and len(plan.verifies) == 8
    # the first copy's source goes bad (same size, other bytes): its copy and its verify must fail
    corrupt = plan.copies[0].src
    (name, _), = replica_dir.replica_files(corrupt)
    with open(fs.local_path(fs.join(corrupt, name)), "r+b") as f:
        f.seek(64)
        data = f.read(8)
        f.seek(64)
        f.write(bytes(b ^ 0xFF for b in data))

    def results(report):
        copies = sorted((dict(vars(c), seconds=None) for c in report.copies), key=lambda c: c["key"])
        checks = sorted((vars(v) for v in report.verifies), key=lambda v: v["replica_id"])
        return report.job_id, report.bytes, copies, checks

    local = local_runner()(plan)
    for c in local.copies:
        fs.delete_tree(c.path)  # the Spark job starts from the same state
    on_spark = session_runner(spark)(plan)
    assert results(local) == results(on_spark)
    _, size, copies, checks = results(local)
    assert [(c["ok"], c["source_bad"]) for c in copies if c["key"] == plan.copies[0].key] == [(False, True)]
    assert [c["ok"] for c in copies if c["key"] != plan.copies[0].key] == [True] and size > 0
    assert [v["ok"] for v in checks].count(False) == 1
    assert next(v for v in checks if not v["ok"])["replica_id"] in {
        v.replica_id for v in plan.verifies if v.path == corrupt}

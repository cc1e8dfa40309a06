"""Issue 45, "Done when" 1: under the join policy ``readable`` the seeds' joins stay bucketed and
exact through a repair. be1's disk is lost (its files gone, the backend down) and a repair
(relocate now) clones its buckets to the others; the repair is killed after each of its steps in
turn (each run resumes the job the last one left, as the next run of the maintenance DAG would),
and its clone is caught in flight, before and after its copies land but before they are
registered. At each of those points SQL1 and SQL2 over the seeds' three tables return exactly
plain Spark's rows, every join colocated, with no Exchange anywhere in the plan; under the seeds'
rule the same joins shuffle. (Two backends down that hold both replicas of a bucket: the read is
refused naming that bucket, tests/joins/test_joins.py, the readable policy's test.)"""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from test_split_layouts import SCHEMA, SQL1, SQL2, source

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.sqltypes import parse_columns
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.bulk_import import import_in_session
from airflow_colocate.jobs.join import join_in_session
from airflow_colocate.jobs.runners import local_runner
from airflow_colocate.spark.physical_plan import final_plan
from colocate_testing import add_local_backends

pytestmark = pytest.mark.spark

DAYS = ["2026-10-05", "2026-10-06"]
IN_DAYS = ", ".join(f"DATE'{d}'" for d in DAYS)
QUERIES = {"SQL1": SQL1.split(" WHERE ")[0], "SQL2": SQL2.split(" WHERE ")[0]}  # all the registered days
# The repair's steps, each the last one a killed run recorded (tests/balance/test_resume.py's).
STEPS = ["planned", "unstable", "cloned", "switched", "finished", "dropping", "dropped"]


class Killed(Exception):
    """The repair run ends here, as a SIGKILL after the step's transaction would end it."""


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """A, B, C in g_seeds (8 buckets, 2 replicas, 4 backends, join policy readable), two days
    imported; the plain views ref_A, ref_B, ref_C over the same files are the oracle."""
    root = tmp_path_factory.mktemp("readable")
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=4)
    for name in "ABC":
        cat.tables.create(name, parse_columns(SCHEMA[name]), ["id"], bucket_num=8, replication_num=2,
                          partition_cols=["dt"], colocate_with="g_seeds")
        refs = [f"SELECT *, DATE'{day}' AS dt FROM ({source(name, 20 + i)})" for i, day in enumerate(DAYS)]
        spark.sql(" UNION ALL ".join(refs)).write.partitionBy("dt").parquet(str(root / "src" / name))
        spark.read.parquet(str(root / "src" / name)).createOrReplaceTempView(f"ref_{name}")
        import_in_session(spark, cat, name, str(root / "src" / name), partitions=DAYS, work_dir=root / "runs",
                          echo=lambda _: None)
    cat.groups.set_join_policy("g_seeds", "readable")
    expected = {q: sorted(map(tuple, spark.sql(sql.format(A="ref_A", B="ref_B", C="ref_C")).collect()), key=repr)
                for q, sql in QUERIES.items()}
    assert expected["SQL1"][0][0] > 200 and len(expected["SQL2"]) == expected["SQL1"][0][0]
    yield cat, root, expected
    cat.dispose()


def check_joins(spark, cat, expected, where: str, queries=("SQL2",), policy: str | None = None) -> list[dict]:
    """Each query through the join job: plain Spark's rows, every join colocated, no Exchange."""
    results = []
    for q in queries:
        sql = QUERIES[q].format(A="A", B="B", C="C")
        result = join_in_session(spark, cat, sql, {n: DAYS for n in "ABC"}, join_policy=policy)
        df = spark.sql(sql)
        assert sorted(map(tuple, df.collect()), key=repr) == expected[q], f"{q} {where}: rows differ"
        physical = final_plan(df._jdf.queryExecution().executedPlan().toString())
        assert len(result["joins"]) == 2 and all(j["colocate"] for j in result["joins"]), (where, result["explain"])
        assert "Exchange" not in physical.split("HashAggregate")[-1], (where, physical)
        results.append(result)
    return results


def repair(cat, root, on_step=None, runner=None) -> dict:
    return Balancer(cat, runner or local_runner(), BalanceOptions(relocate_now=True, grace=timedelta(0)),
                    work_dir=root / "runs", echo=lambda _: None, on_step=on_step).run()


def kill_after(step_name: str):
    def hook(step, job_id):
        if step == step_name:
            raise Killed(step)
    return hook


def test_joins_stay_bucketed_and_exact_through_a_repair_killed_at_each_step(spark, lake):
    cat, root, expected = lake
    shutil.rmtree(root / "backends" / "be1" / "default")
    cat.backends.set_state("be1", "down", reason="disk lost")
    assert not cat.health.check_group("g_seeds").stable
    (first,) = check_joins(spark, cat, expected, "with be1 down", queries=("SQL1",))
    assert "is not stable" in first["explain"] and "stays bucketed (join policy readable)" in first["explain"]
    shuffled = join_in_session(spark, cat, QUERIES["SQL1"].format(A="A", B="B", C="C"), {n: DAYS for n in "ABC"},
                               join_policy="stable")  # the seeds' rule, for comparison
    assert not any(j["colocate"] for j in shuffled["joins"]) and "group is not stable" in shuffled["joins"][0]["reason"]

    seen = []
    for step in STEPS:
        with pytest.raises(Killed):
            repair(cat, root, on_step=kill_after(step))
        (job,) = cat.jobs.list(kinds=["relocate", "repair", "balance"], limit=1)
        seen.append(job.step if step not in ("dropping", "dropped") else step)
        check_joins(spark, cat, expected, f"after a repair killed at step {step}")
    # a kill after a clone round leaves the job at 'unstable', its round's clones registered
    assert seen == ["planned", "unstable", "unstable", *STEPS[3:]], seen
    repair(cat, root)  # to the end
    be1 = next(b.id for b in cat.backends.list() if b.name == "be1")
    assert all(be1 not in row and len(row) == 2 for row in cat.groups.get("g_seeds").bucket_map)
    assert cat.health.check_group("g_seeds").stable
    check_joins(spark, cat, expected, "after the repair, under the seeds' rule", queries=("SQL1", "SQL2"),
                policy="stable")


def test_joins_stay_bucketed_and_exact_while_a_clone_is_in_flight(spark, lake):
    """be2 is lost next; the repair's clone job is caught before it copies anything and again when
    its copies are on disk but not yet reported to the control plane (unverified, so no read may
    use them): both times the joins read bucket by bucket from the verified replicas left."""
    cat, root, expected = lake
    shutil.rmtree(root / "backends" / "be2" / "default")
    cat.backends.set_state("be2", "down", reason="disk lost")
    real = local_runner()
    caught = []

    def in_flight(plan):
        caught.append("before the copies")
        check_joins(spark, cat, expected, "with a clone planned, nothing copied")
        report = real(plan)
        caught.append("copied, not registered")
        check_joins(spark, cat, expected, "with a clone's copies on disk, not registered")
        return report

    repair(cat, root, runner=in_flight)
    assert caught[:2] == ["before the copies", "copied, not registered"], caught
    assert cat.health.check_group("g_seeds").stable
    check_joins(spark, cat, expected, "after the second repair", policy="stable")

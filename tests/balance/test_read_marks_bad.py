"""The control plane records what a read found (issue 18/19): replicas a join job reported bad, in
its report or (when it failed) next to it, become ``bad`` with the reason, their group unstable,
the summaries exact; no later read chooses them; a stale report leaves a replica alone. No Spark:
the join job's outputs are written as the job writes them."""

from __future__ import annotations

import json
from dataclasses import asdict

from airflow_colocate.catalog.summary import drift
from airflow_colocate.core.contract import BadReplica, JoinPlan, JoinReport
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.jobs.join import fail_join, finish_join
from airflow_colocate.jobs.read import read_plans
from airflow_colocate.spark.join_job import bad_replicas_uri, load_bad_replicas

DAY = "2026-11-01"
TABLES = {"orders": None, "lineitem": None}


def _lake(lake):
    for t in TABLES:
        lake.create(t)
        lake.write(t, DAY, range(0, 400))
    return read_plans(lake.catalog, TABLES)


def _bad(table, bucket: int, which: int = 0, reason: str = "missing file x") -> BadReplica:
    r = table.partitions[0].candidates[bucket][which]
    return BadReplica(replica_id=r.replica_id, table=table.table, partition=DAY, bucket_seq=bucket,
                      backend_id=r.backend_id, path=r.path, reason=reason)


def _plan(lake, reads) -> JoinPlan:
    return JoinPlan(job_id="j", query="SELECT 1", tables=reads.tables, reasons=reads.reasons, groups=reads.groups,
                    require_colocate=False, report_uri=(lake.root / "runs" / "j" / "report.json").as_uri())


def _drift(cat) -> list[str]:
    return cat.tx(drift)  # the summaries equal a recount


def test_a_failed_join_records_the_replicas_it_left_next_to_its_report(lake):
    reads = _lake(lake)
    cat = lake.catalog
    assert cat.health.check_group("g").stable
    orders = reads.tables[0]
    plan = _plan(lake, reads)
    assert load_bad_replicas(plan) == []
    bad = [_bad(orders, 1, 0, "missing file part-1"), _bad(orders, 1, 1, "file part-1 holds 0 bytes, the catalog recorded 9")]
    path = lake.root / "runs" / "j" / "report.json.bad.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([asdict(b) for b in bad]))
    assert bad_replicas_uri(plan).endswith("report.json.bad.json") and load_bad_replicas(plan) == bad

    fail_join(cat, None, plan, ColocateError("cannot read default.orders partition 2026-11-01 bucket 1: ..."))
    g = cat.groups.get("g")
    assert not g.stable and "does not hold the files the catalog recorded" in g.unstable_reason
    events = {e.subject: e.detail["reason"] for e in cat.events(kind="replica.bad")}
    assert events == {b.path: f"read check: {b.reason}" for b in bad}
    assert _drift(cat) == []
    assert cat.reads.replicas("orders")[1][0].buckets[1] == ()  # never chosen again


def test_a_finished_join_records_its_bad_replicas_and_reads_avoid_them(lake):
    reads = _lake(lake)
    cat = lake.catalog
    lines = reads.tables[1]
    item = _bad(lines, 2, 0, "unknown file part-0.parquet.tmp-1-ab (a temporary copy)")
    report = JoinReport(job_id="j", rows=400, joins=[], explain="", physical_plan="", seconds=1.0, bad_replicas=[item])
    summary = finish_join(cat, None, report)
    assert summary["marked_bad"] == [item.path] and summary["bad_replicas"][0]["reason"] == item.reason
    again = read_plans(cat, TABLES).tables[1].partitions[0].candidates[2]
    assert [r.path for r in again] == [lines.partitions[0].candidates[2][1].path]
    assert not cat.health.check_group("g").stable
    assert _drift(cat) == []
    # a stale report (the row now has another path, or is no longer verified) changes nothing
    stale = BadReplica(**dict(asdict(_bad(lines, 3)), path="file:///elsewhere"))
    assert cat.health.mark_replicas_bad([stale, item]) == []
    # and balance repairs the bad replica from the good one: the group is stable again
    summary = lake.run()
    assert [j.state for j in summary["jobs"]] == ["done"] and cat.health.check_group("g").stable
    assert item.path in [r.path for r in cat.reads.replicas("lineitem")[1][0].buckets[2]]

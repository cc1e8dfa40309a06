"""ColocateBalanceOperator end to end: probe, plan, spark-submit of the clone job, switch, drop."""

from __future__ import annotations

import json

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.operators.balance import ColocateBalanceOperator
from balance_lake import Clock, Lake, assert_whole, fingerprint, rows

pytestmark = pytest.mark.spark


@pytest.fixture
def env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.setenv("COLOCATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark-submit"}}))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    cat = Catalog(url, actor="pytest")
    cat.init()
    lake = Lake(cat, Clock(), tmp_path)
    for name in ("be1", "be2", "be3"):
        lake.add_backend(name)
    lake.create("orders", buckets=4)
    lake.create("lineitem", buckets=4)
    for day in ("2026-11-01", "2026-11-02"):
        lake.write("orders", day, range(500))
        lake.write("lineitem", day, range(0, 1500, 2))
    yield lake
    cat.dispose()


def op(**kw) -> ColocateBalanceOperator:
    return ColocateBalanceOperator(task_id="balance", relocate_delay_minutes=0, grace_minutes=0,
                                   conf={"spark.ui.enabled": "false"}, **kw)


def test_dry_run_plans_only(env):
    env.add_backend("be4")
    out = op(dry_run=True, probe=False).execute(context={})
    (p,) = out["plans"]
    assert out["dry_run"] and p["kind"] == "balance" and p["moves"]
    assert all(mv["dst"] == env.names["be4"] for mv in p["moves"])
    assert env.catalog.jobs.list(kinds=["balance"]) == []
    # values a template rendered to text mean what they say
    out = op(dry_run="True", groups="None", verify="false", probe=False).execute(context={})
    assert out["dry_run"] and len(out["plans"]) == 1


def test_relocation_through_spark_submit(env):
    cat = env.catalog
    before = {t: rows(cat, t) for t in ("orders", "lineitem")}
    sums = fingerprint(cat)
    env.add_backend("be4")
    cat.backends.set_state("be2", "down", reason="maintenance")  # held by the admin: the probe keeps it down
    out = op().execute(context={})
    kinds = [(j["kind"], j["state"]) for j in out["jobs"]]
    assert kinds[0] == ("relocate", "done") and all(state == "done" for _, state in kinds)
    assert out["groups"][0]["stable"] and out["dropped"] == 0  # be2 is down: its copies wait for it
    assert env.names["be2"] not in {be for row in cat.groups.get("g").bucket_map for be in row}
    assert_whole(cat)
    assert fingerprint(cat) == sums and {t: rows(cat, t) for t in before} == before
    json.dumps(out)  # XCom-safe

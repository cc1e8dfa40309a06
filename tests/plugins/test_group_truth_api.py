"""Issue 30 through Airflow's API server: an unstable group says since when, when relocation starts
and whether joins shuffle; a table and its group list the partitions no read can serve; the
metrics count them. Then the backend comes back and all of it clears."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from airflow_colocate.catalog import Catalog
from plugin_testing import commit_fake_write


@pytest.fixture
def lake(tmp_path, monkeypatch, airflow_app):
    """Three backends; group g_orders (replication 2) and ``loose``, a replication-1 table outside
    any group with one bucket per backend; the plugin app reads this catalog."""
    from airflow_colocate.plugins import plugin
    from airflow_colocate.plugins.app import CatalogSource

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    cat = Catalog(url, actor="pytest")
    cat.init()
    for i in (1, 2, 3):
        (tmp_path / f"be{i}").mkdir()
        cat.backends.add((tmp_path / f"be{i}").as_uri(), name=f"be{i}")
    cat.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                      partition_cols=["dt"], colocate_with="g_orders")
    cat.tables.create("loose", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=3, replication_num=1,
                      partition_cols=["dt"])
    for day in ("2026-11-01", "2026-11-02"):
        commit_fake_write(cat, "orders", day)
        commit_fake_write(cat, "loose", day)
    assert all(h.stable for h in cat.health.check_groups())
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    monkeypatch.delenv("COLOCATE_RELOCATE_DELAY_MINUTES", raising=False)
    old = plugin.app.state.catalogs
    plugin.app.state.catalogs = CatalogSource()
    yield cat
    plugin.app.state.catalogs.dispose()
    plugin.app.state.catalogs = old
    cat.dispose()


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_down_backend_shows_in_groups_tables_and_metrics_then_clears(client, as_user, lake):
    viewer = as_user("viewer")
    g = client.get("/api/colocate/groups/g_orders", headers=viewer).json()
    assert (g["unstable_since"], g["relocation_starts_at"], g["relocation_due"], g["joins_shuffle"]) == (None, None, False, False)
    assert g["unavailable_tables"] == []
    assert client.get("/api/colocate/tables/loose", headers=viewer).json()["unavailable_count"] == 0

    lake.backends.set_state("be2", "down", reason="disk pulled")
    lake.health.check_groups()
    down_since = next(b.state_since for b in lake.backends.list() if b.name == "be2")
    g = client.get("/api/colocate/groups/g_orders", headers=viewer).json()
    assert g["stable"] is False and _time(g["unstable_since"]) >= down_since
    assert _time(g["relocation_starts_at"]) == down_since + timedelta(minutes=30)
    assert g["relocation_due"] is False and g["joins_shuffle"] is True and g["relocation_backends"] == ["be2"]
    assert g["joins_shuffle_reason"].startswith("group is not stable: backend be2 is down")
    assert g["unavailable_tables"] == []  # every bucket of the group keeps a replica on an alive backend
    listed = client.get("/api/colocate/groups", headers=viewer).json()
    assert [(x["name"], x["relocation_starts_at"], x["joins_shuffle"]) for x in listed] == [
        ("g_orders", g["relocation_starts_at"], True)]
    # the maintenance run's delay, passed as an override; zero: relocation is due now
    g0 = client.get("/api/colocate/groups/g_orders?relocate_delay_minutes=0", headers=viewer).json()
    assert g0["relocation_due"] is True and g0["relocation_starts_at"] is None
    assert client.get("/api/colocate/groups/g_orders?relocate_delay_minutes=-1", headers=viewer).status_code == 422

    t = client.get("/api/colocate/tables/loose", headers=viewer).json()
    assert t["unavailable_count"] == 2 and t["unavailable_partitions"] == ["2026-11-01", "2026-11-02"]
    assert t["unavailable_backends"] == ["be2"]
    metrics = client.get("/api/colocate/metrics", headers=viewer).text.splitlines()
    assert "colocate_partitions_unavailable 2" in metrics
    assert 'colocate_table_partitions_unavailable{table="default.loose"} 2' in metrics
    assert 'colocate_backend_partitions_unavailable{backend="be2"} 2' in metrics

    lake.backends.set_state("be2", "alive", reason="back")
    lake.health.check_groups()
    g = client.get("/api/colocate/groups/g_orders", headers=viewer).json()
    assert (g["stable"], g["unstable_since"], g["relocation_starts_at"], g["relocation_due"], g["joins_shuffle"]) == (
        True, None, None, False, False)
    assert client.get("/api/colocate/tables/loose", headers=viewer).json()["unavailable_partitions"] == []
    assert "colocate_partitions_unavailable 0" in client.get("/api/colocate/metrics", headers=viewer).text.splitlines()


def test_a_group_whose_bucket_is_lost_lists_its_unavailable_partitions(client, as_user, lake):
    """Buckets 0 and 3 of g_orders are on be1 and be2 only: both down, those partitions are lost;
    the admin's mark answers with the same fields."""
    assert [sorted(r) for r in lake.groups.get("g_orders").bucket_map][0] == [1, 2]
    lake.backends.set_state("be1", "down", reason="x")
    lake.backends.set_state("be2", "down", reason="y")
    g = client.get("/api/colocate/groups/g_orders", headers=as_user("viewer")).json()
    assert g["unavailable_tables"] == [{"table": "default.orders", "unavailable_count": 2,
                                        "unavailable_partitions": ["2026-11-01", "2026-11-02"],
                                        "unavailable_backends": ["be1", "be2"]}]
    marked = client.post(f"/api/colocate/group_unstable?db_id={g['db_id']}&group_id={g['grp_id']}&reason=test",
                         headers=as_user("admin"))
    assert marked.status_code == 200, marked.text
    body = marked.json()["group"]
    assert body["unstable_since"] is not None and body["joins_shuffle"] and len(body["unavailable_tables"]) == 1

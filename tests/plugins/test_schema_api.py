"""The schema and retention API (issue 28) and the Colocation page's tables section: a change is a
schema version an admin makes (a viewer is refused), a refusal is 422 with the rule and changes
nothing, and the page shows each table's retention and dropped partitions."""

from __future__ import annotations

from airflow_colocate.plugins.page import render_page


def test_schema_change_and_retention_through_the_api(client, as_user, demo):
    r = client.get("/api/colocate/tables/lineitem", headers=as_user("viewer"))
    assert r.status_code == 200 and r.json()["schema_version"] == 1 and r.json()["versions"][0]["change"] == []
    body = {"add": [{"name": "l_note", "type": "string"}], "widen": [{"name": "l_qty", "type": "decimal(20,2)"}]}
    assert client.post("/api/colocate/tables/lineitem/schema", json=body, headers=as_user("viewer")).status_code == 403
    r = client.post("/api/colocate/tables/lineitem/schema", json=body, headers=as_user("admin"))
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["schema_version"] == 2 and ["l_note", "string"] in t["columns"] and ["l_qty", "decimal(20,2)"] in t["columns"]
    assert {c["op"] for c in t["versions"][1]["change"]} == {"add", "widen"}
    assert demo.events(limit=1)[0].actor == "airflow:admin"

    before = client.get("/api/colocate/tables/lineitem", headers=as_user("viewer")).json()
    for bad, words in (({"drop": ["l_orderkey"]}, "distribution column"),
                       ({"widen": [{"name": "l_qty", "type": "decimal(10,2)"}]}, "narrowing"),
                       ({"add": [{"name": "l_note", "type": "int"}]}, "the column exists")):
        r = client.post("/api/colocate/tables/lineitem/schema", json=bad, headers=as_user("admin"))
        assert r.status_code == 422 and words in r.json()["detail"], r.text
    assert client.get("/api/colocate/tables/lineitem", headers=as_user("viewer")).json() == before
    assert client.get("/api/colocate/tables/nope", headers=as_user("viewer")).status_code == 404

    r = client.post("/api/colocate/tables/orders/retention", json={"retention_days": 30}, headers=as_user("admin"))
    assert r.status_code == 200 and r.json()["retention_days"] == 30
    r = client.post("/api/colocate/tables/users/retention", json={"retention_days": 30}, headers=as_user("admin"))
    assert r.status_code == 422 and "not partitioned" in r.json()["detail"]


def test_the_page_shows_retention_and_dropped_partitions(demo):
    demo.partitions.set_retention("orders", 90)
    demo.partitions.drop("orders", "2026-11-01")
    html = render_page(demo, None)
    row = html[html.index('<table id="tables">'):]
    row = row[:row.index("</table>")]
    orders = row[row.index("default.orders"):]
    orders = orders[:orders.index("</tr>")]
    assert "90 days" in orders and "colocate partition recover default.orders 2026-11-01</code>" in orders
    assert "VALUE" not in orders  # issue 47: the hint names a real partition
    lineitem = row[row.index("default.lineitem"):]
    assert "keep all" in lineitem[:lineitem.index("</tr>")]

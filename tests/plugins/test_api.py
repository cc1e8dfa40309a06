"""The admin API against the real plugin app, mounted by Airflow's own ``create_app()`` with the
SimpleAuthManager: every endpoint, every refusal (401, 403, 409, 422, 404) with nothing changed,
the seeds' JSON shape, and the event log naming the Airflow user."""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_colocate.catalog import Catalog

# The example of `GET /api/colocate` in ../shared/seeds/000 (StarRocks docs), verbatim.
SEED_EXAMPLE = {
    "colocate_meta": {
        "groupName2Id": {"g1": {"dbId": 10005, "grpId": 10008}},
        "group2Tables": {},
        "table2Group": {"10007": {"dbId": 10005, "grpId": 10008}, "10040": {"dbId": 10005, "grpId": 10008}},
        "group2Schema": {
            "10005.10008": {
                "groupId": {"dbId": 10005, "grpId": 10008},
                "distributionColTypes": [{"type": "INT", "len": -1, "isAssignedStrLenInColDefinition": False,
                                          "precision": 0, "scale": 0}],
                "bucketsNum": 10,
                "replicationNum": 2,
            }
        },
        "group2BackendsPerBucketSeq": {
            "10005.10008": [[10004, 10002], [10003, 10002], [10002, 10004], [10003, 10002], [10002, 10004],
                            [10003, 10002], [10003, 10004], [10003, 10004], [10003, 10004], [10002, 10004]]
        },
        "unstableGroups": [],
    },
    "status": "OK",
}

WRITES = [
    ("/api/colocate/group_stable?db_id=1&group_id=1", None),
    ("/api/colocate/group_unstable?db_id=1&group_id=1", None),
    ("/api/colocate/bucketseq?db_id=1&group_id=1&force=true", [[2, 1]] * 8),
    ("/api/colocate/group_join_policy?db_id=1&group_id=1&policy=readable", None),
    ("/api/colocate/group_split?db_id=1&group_id=1&factor=2", None),
]
READS = ["/api/colocate", "/api/colocate/", "/api/colocate/groups", "/api/colocate/groups/1.1", "/api/colocate/backends",
         "/api/colocate/jobs", "/api/colocate/flags", "/api/colocate/events"]


def snapshot(cat: Catalog):
    """Everything a refused call must leave as it was."""
    return ([(g.group_id, g.stable, g.unstable_reason, g.version, g.bucket_map) for g in cat.groups.list()],
            cat.flags(), [(e.id, e.kind) for e in cat.events(limit=1000)], [(b.id, b.state) for b in cat.backends.list()],
            [(j.id, j.state, j.progress) for j in cat.jobs.list(limit=1000)])


def ids(g) -> dict:
    return {"dbId": g.db_id, "grpId": g.grp_id}


def shape(value):
    """Keys (for objects with fixed keys) and element shapes, ignoring the values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


# ---------------------------------------------------------------------- the index


def test_index_has_the_seeds_shape_and_the_catalogs_content(client, as_user, demo):
    r = client.get("/api/colocate", headers=as_user("viewer"))  # the seeds' URL, no trailing slash
    assert r.status_code == 200, r.text
    body = r.json()
    assert client.get("/api/colocate/", headers=as_user("viewer")).json() == body
    assert set(body) == set(SEED_EXAMPLE) and body["status"] == "OK"
    meta, seed = body["colocate_meta"], SEED_EXAMPLE["colocate_meta"]
    assert set(meta) == set(seed)
    # Per-entry shapes as in the seed (keys of a group id, of a schema, of a column type).
    assert shape(next(iter(meta["groupName2Id"].values()))) == shape(seed["groupName2Id"]["g1"])
    assert shape(next(iter(meta["table2Group"].values()))) == shape(seed["table2Group"]["10007"])
    assert shape(meta["group2Schema"]["1.1"]) == shape(seed["group2Schema"]["10005.10008"])
    assert shape(meta["group2BackendsPerBucketSeq"]["1.1"]) == shape(seed["group2BackendsPerBucketSeq"]["10005.10008"])

    groups = demo.groups.list()
    assert meta["groupName2Id"] == {g.full_name: ids(g) for g in groups}
    assert set(meta["groupName2Id"]) == {"1_g_orders", "1_g_users", "__global__regions"}
    assert meta["group2BackendsPerBucketSeq"] == {g.group_id: [list(r) for r in g.bucket_map] for g in groups}
    assert meta["group2Tables"] == {g.group_id: list(g.table_ids) for g in groups}
    in_groups = {t.id: t for t in demo.tables.list() if t.group_id}
    assert meta["table2Group"] == {str(t.id): {"dbId": int(t.group_id.split(".")[0]), "grpId": int(t.group_id.split(".")[1])}
                                   for t in in_groups.values()}
    orders = meta["group2Schema"]["1.1"]
    assert orders["bucketsNum"] == 8 and orders["replicationNum"] == 2
    assert [c["type"] for c in orders["distributionColTypes"]] == ["BIGINT"]
    assert meta["unstableGroups"] == [ids(g) for g in groups if not g.stable] == [{"dbId": 1, "grpId": 2}]


# ---------------------------------------------------------------------- reads


def test_groups_list_and_one_group_with_map_and_reasons(client, as_user, demo):
    r = client.get("/api/colocate/groups", headers=as_user("viewer"))
    assert r.status_code == 200
    listed = {g["group_id"]: g for g in r.json()}
    for g in demo.groups.list():
        row = listed[g.group_id]
        assert (row["full_name"], row["stable"], row["bucket_num"], row["replication_num"], row["table_ids"]) == \
               (g.full_name, g.stable, g.bucket_num, g.replication_num, list(g.table_ids))
    assert listed["1.1"]["tables"] == ["default.orders", "default.lineitem"]

    # One group, by id, by full name and by name in the default database.
    by_ref = [client.get(f"/api/colocate/groups/{ref}", headers=as_user("viewer")) for ref in ("1.1", "1_g_orders", "g_orders")]
    assert all(r.status_code == 200 for r in by_ref)
    assert by_ref[0].json() == by_ref[1].json() == by_ref[2].json()
    orders = by_ref[0].json()
    assert orders["bucket_map"] == [list(r) for r in demo.groups.get("g_orders").bucket_map]
    assert sum(orders["slots"].values()) == 8 * 2 and orders["reasons"] == []

    users = client.get("/api/colocate/groups/g_users", headers=as_user("viewer")).json()
    assert users["stable"] is False
    assert any("relocate" in r and "moving 1 bucket replicas" in r for r in users["reasons"]), users["reasons"]

    missing = client.get("/api/colocate/groups/1.999", headers=as_user("viewer"))
    assert missing.status_code == 404 and "known groups are 1_g_orders (1.1)" in missing.json()["detail"]
    assert client.get("/api/colocate/groups/nope", headers=as_user("viewer")).status_code == 404
    bad = client.get("/api/colocate/groups/1.%C2%B2", headers=as_user("viewer"))  # '1.²': digits, but not ASCII
    assert bad.status_code == 422


def test_backends_with_load_and_capacity(client, as_user, demo):
    r = client.get("/api/colocate/backends", headers=as_user("viewer"))
    assert r.status_code == 200
    got = {b["name"]: b for b in r.json()}
    slots = Counter(be for g in demo.groups.list() for row in g.bucket_map for be in row)
    held: Counter = Counter()
    count: Counter = Counter()
    for t in demo.tables.list():
        for p in demo.reads.replicas(t.qualified_name)[1]:
            for bucket in p.buckets:
                for rep in bucket:
                    held[rep.backend_id] += rep.bytes
                    count[rep.backend_id] += 1
    for b in demo.backends.list():
        row = got[b.name]
        assert (row["id"], row["state"], row["capacity_bytes"]) == (b.id, b.state, b.capacity_bytes)
        assert row["slots"] == slots[b.id] and row["bytes"] == held[b.id] and row["replicas"] == count[b.id]
        assert row["used_fraction"] == pytest.approx(held[b.id] / b.capacity_bytes)
    assert got["be4"]["state"] == "down" and sum(b["bytes"] for b in got.values()) > 0


def test_balance_jobs_with_progress(client, as_user, demo):
    r = client.get("/api/colocate/jobs", headers=as_user("viewer"))
    assert r.status_code == 200
    [job] = r.json()
    assert (job["kind"], job["state"], job["group"], job["group_id"], job["step"]) == \
           ("relocate", "running", "1_g_users", "1.2", "unstable")
    assert (job["moves"], job["planned_bytes"], job["copied_bytes"], job["done_fraction"]) == (1, 700, 0, 0.0)
    assert client.get("/api/colocate/jobs?state=done", headers=as_user("viewer")).json() == []
    writes = client.get("/api/colocate/jobs?kind=write", headers=as_user("viewer")).json()
    assert [j["state"] for j in writes] == ["committed"] * 3
    assert client.get("/api/colocate/jobs?kind=nope", headers=as_user("viewer")).status_code == 422


def test_flags_and_events(client, as_user, demo):
    assert client.get("/api/colocate/flags", headers=as_user("viewer")).json() == demo.flags()
    events = client.get("/api/colocate/events?limit=5", headers=as_user("viewer")).json()
    assert [e["event_id"] for e in events] == [e.id for e in demo.events(limit=5)]
    assert events[0]["actor"] == "pytest"
    # the last event_id of a page gives the next page; the CLI names the same id EventId
    older = client.get(f"/api/colocate/events?limit=5&before={events[-1]['event_id']}", headers=as_user("viewer")).json()
    assert [e["event_id"] for e in older] == [e.id for e in demo.events(limit=10)][5:]


# ---------------------------------------------------------------------- writes


def test_mark_unstable_then_stable_is_logged_with_the_user(client, as_user, demo):
    r = client.post("/api/colocate/group_unstable?db_id=1&group_id=1&reason=disk%20swap%20on%20be2",
                    headers=as_user("admin"))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "OK" and r.json()["group"]["stable"] is False
    g = demo.groups.get("1.1")
    assert (g.stable, g.unstable_reason) == (False, "disk swap on be2")
    [e] = demo.events(limit=1)
    assert (e.kind, e.subject, e.actor, e.detail["reason"]) == ("group.mark_unstable", "1_g_orders", "airflow:admin",
                                                                "disk swap on be2")
    assert client.get("/api/colocate", headers=as_user("viewer")).json()["colocate_meta"]["unstableGroups"] == \
           [{"dbId": 1, "grpId": 1}, {"dbId": 1, "grpId": 2}]

    r = client.post("/api/colocate/group_stable?db_id=1&group_id=1", headers=as_user("admin"))
    assert r.status_code == 200 and r.json()["group"]["stable"] is True
    assert demo.groups.get("1.1").stable
    [e] = demo.events(limit=1)
    assert (e.kind, e.actor) == ("group.mark_stable", "airflow:admin")

    # Without a reason the event still says who.
    client.post("/api/colocate/group_unstable?db_id=0&group_id=3", headers=as_user("admin"))
    assert demo.groups.get("0.3").unstable_reason == "marked unstable by airflow:admin"


def test_join_policy_is_set_by_an_admin_and_shown_in_the_outlook(client, as_user, demo):
    r = client.post("/api/colocate/group_join_policy?db_id=1&group_id=1&policy=readable", headers=as_user("admin"))
    assert r.status_code == 200, r.text
    assert demo.groups.get("1.1").join_policy == "readable"
    assert r.json()["group"]["join_policy"] == "readable"
    [e] = demo.events(limit=1)
    assert (e.kind, e.actor, e.detail["new"]) == ("group.join_policy", "airflow:admin", "readable")
    bad = client.post("/api/colocate/group_join_policy?db_id=1&group_id=1&policy=sometimes", headers=as_user("admin"))
    assert bad.status_code == 422 and demo.groups.get("1.1").join_policy == "readable"


def test_group_split_by_an_admin_shows_the_layouts_and_refuses_a_bad_factor(client, as_user, demo):
    before = demo.groups.get("1.1")
    r = client.post("/api/colocate/group_split?db_id=1&group_id=1&factor=2", headers=as_user("admin"))
    assert r.status_code == 200, r.text
    g = r.json()["group"]
    assert (g["bucket_num"], g["layout_buckets"]) == (before.bucket_num, 2 * before.bucket_num)
    assert sum(g["layouts"].values()) > 0 and set(g["layouts"]) == {str(before.bucket_num)}
    [e] = demo.events(limit=1)
    assert (e.kind, e.actor, e.detail["new_layout"]) == ("group.split", "airflow:admin", 2 * before.bucket_num)
    for factor in ("1", "70000"):
        bad = client.post(f"/api/colocate/group_split?db_id=1&group_id=1&factor={factor}", headers=as_user("admin"))
        assert bad.status_code == 422 and "invalid split factor" in bad.text, bad.text
    assert demo.groups.get("1.1").layout == 2 * before.bucket_num


def swapped(cat: Catalog, ref: str) -> list[list[int]]:
    """A valid new map for g_orders: be4 is down, so its buckets go to be1."""
    return [[2, 1] if row == (1, 2) else [3, 1] for row in cat.groups.get(ref).bucket_map]


def test_bucketseq_is_refused_while_repair_and_balance_may_undo_it(client, as_user, demo):
    before = snapshot(demo)
    r = client.post("/api/colocate/bucketseq?db_id=1&group_id=1", json=swapped(demo, "1.1"), headers=as_user("admin"))
    assert r.status_code == 409
    detail = r.json()["detail"]
    assert "disable_colocate_balance and disable_colocate_relocate are not set" in detail and "force" in detail
    demo.set_flag("disable_colocate_balance", True)
    before = snapshot(demo)
    r = client.post("/api/colocate/bucketseq?db_id=1&group_id=1", json=swapped(demo, "1.1"), headers=as_user("admin"))
    assert r.status_code == 409 and "disable_colocate_relocate is not set" in r.json()["detail"]
    assert snapshot(demo) == before


def test_bucketseq_with_flags_set_changes_the_map_and_logs_the_user(client, as_user, demo):
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    old = [list(r) for r in demo.groups.get("1.1").bucket_map]
    new = [[2, 3] if row == [1, 2] else [3, 1] for row in old]  # off be4 (down), and be1 -> be3
    r = client.post("/api/colocate/bucketseq?db_id=1&group_id=1", json=new, headers=as_user("admin"))
    assert r.status_code == 200, r.text
    assert r.json()["group"]["bucket_map"] == new == [list(x) for x in demo.groups.get("1.1").bucket_map]
    g = demo.groups.get("1.1")
    # The committed replicas are not where the new map says: joins must fall back until a repair.
    assert not g.stable and g.unstable_reason.startswith("bucket map forced by airflow:admin: ")
    [e] = demo.events(limit=1)
    assert (e.kind, e.subject, e.actor) == ("group.set_bucket_map", "1_g_orders", "airflow:admin")
    assert (e.detail["old_map"], e.detail["new_map"], e.detail["force"]) == (old, new, False)
    index = client.get("/api/colocate", headers=as_user("viewer")).json()["colocate_meta"]
    assert index["group2BackendsPerBucketSeq"]["1.1"] == new


def test_bucketseq_force_overrides_flags_and_a_running_job(client, as_user, demo):
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    new = [[1], [2], [3], [1]]
    r = client.post("/api/colocate/bucketseq?db_id=1&group_id=2", json=new, headers=as_user("admin"))
    assert r.status_code == 409 and "balance job" in r.json()["detail"] and "is changing the group" in r.json()["detail"]
    r = client.post("/api/colocate/bucketseq?db_id=1&group_id=2&force=true", json=new, headers=as_user("admin"))
    assert r.status_code == 200, r.text
    assert [list(x) for x in demo.groups.get("1.2").bucket_map] == new
    assert demo.events(limit=1)[0].detail["force"] is True


@pytest.mark.parametrize("bucket_map, message", [
    ([[1, 2]] * 7, "it has 7 entries, the group has 8 buckets: give one entry per bucket"),
    ([[1]] * 8, "bucket 0 lists 1 backends, the group has replication_num 2: give one backend per replica"),
    ([[1, 99]] + [[1, 2]] * 7, "bucket 0 names backend 99, which does not exist"),
    ([[1, 4]] + [[1, 2]] * 7, "bucket 0 names backend 4 (be4), which is down: only alive backends"),
    ([[1, 2]] * 7 + [[3, 3]], "bucket 7 lists backend 3 twice"),
    ([[1, 5]] + [[1, 2]] * 7, "bucket 0 puts two replicas on host be1"),
])
def test_bucketseq_validation(client, as_user, demo, tmp_path, bucket_map, message):
    (tmp_path / "be5").mkdir()
    demo.backends.add((tmp_path / "be5").as_uri(), name="be5", host="be1")  # same failure domain as be1
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    before = snapshot(demo)
    for force in ("false", "true"):
        r = client.post(f"/api/colocate/bucketseq?db_id=1&group_id=1&force={force}", json=bucket_map,
                        headers=as_user("admin"))
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("invalid bucket map for group 1_g_orders: ")
        assert message in r.json()["detail"]
    assert snapshot(demo) == before


@pytest.mark.parametrize("url, body, where", [
    ("bucketseq?db_id=1&group_id=1", "[[1, 2]", "body"),             # not JSON
    ("bucketseq?db_id=1&group_id=1", '{"map": [[1, 2]]}', "body"),    # an object
    ("bucketseq?db_id=1&group_id=1", '[["1", "2"]]', "body"),         # strings
    ("bucketseq?db_id=1&group_id=1", "[[true, false]]", "body"),      # booleans
    ("bucketseq?db_id=1&group_id=1", "[1, 2]", "body"),               # not nested
    ("bucketseq?db_id=1&group_id=1", "[]", "body"),
    ("bucketseq?db_id=1&group_id=1", "[[]]", "body"),
    ("bucketseq?db_id=1&group_id=1", "[[-1, 2]]", "body"),
    ("bucketseq?db_id=1&group_id=1", f"[[{2**40}, 2]]", "body"),
    ("bucketseq?db_id=1&group_id=1", "", "body"),
    ("bucketseq?db_id=1&group_id=1", b"'\xa3\xff[[1, 2]]", "body"),  # not UTF-8
    ("bucketseq?db_id=1", "[[1, 2]]", "query"),                       # no group_id
    ("bucketseq?db_id=x&group_id=1", "[[1, 2]]", "query"),
    ("bucketseq?db_id=1&group_id=1&force=maybe", "[[1, 2]]", "query"),
    ("group_stable?db_id=1&group_id=0", None, "query"),
    ("group_unstable?db_id=-1&group_id=1", None, "query"),
    ("group_unstable?db_id=1&group_id=99999999999999999999", None, "query"),
    ("group_unstable?db_id=1&group_id=1&reason=" + "x" * 1001, None, "query"),
])
def test_malformed_requests_are_422_with_the_place_and_change_nothing(client, as_user, demo, url, body, where):
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    before = snapshot(demo)
    kwargs = {} if body is None else {"content": body, "headers": {**as_user("admin"), "Content-Type": "application/json"}}
    r = client.post(f"/api/colocate/{url}", **({"headers": as_user("admin")} | kwargs))
    assert r.status_code == 422, r.text
    errors = r.json()["detail"]
    assert errors and all(e["loc"][0] == where and e["msg"] for e in errors), errors
    assert snapshot(demo) == before


def test_unknown_group_is_404_and_changes_nothing(client, as_user, demo):
    before = snapshot(demo)
    for url in ("group_stable?db_id=1&group_id=99", "group_unstable?db_id=2&group_id=1",
                "bucketseq?db_id=1&group_id=99&force=true"):
        r = client.post(f"/api/colocate/{url}", json=[[1, 2]] * 8, headers=as_user("admin"))
        assert r.status_code == 404 and "unknown colocation group" in r.json()["detail"]
    assert snapshot(demo) == before


# ---------------------------------------------------------------------- auth


def test_anonymous_gets_401_everywhere_and_changes_nothing(client, demo):
    before = snapshot(demo)
    for url in READS:
        r = client.get(url)
        assert r.status_code == 401 and r.json()["detail"] == "Not authenticated", url
    for url, body in WRITES:
        assert client.post(url, json=body).status_code == 401
        # Authentication comes before validation: a malformed body does not reveal more.
        for junk in ("[[", b"\xff\xfe", '[["x"]]'):
            assert client.post(url, content=junk, headers={"Content-Type": "application/json"}).status_code == 401
    assert client.post(WRITES[0][0], headers={"Authorization": "Bearer not-a-jwt"}).status_code == 403  # Airflow: invalid token
    assert snapshot(demo) == before


@pytest.mark.parametrize("mode, user", [("airflow", "viewer"), ("colocation", "viewer"), ("colocation", "op")])
def test_readers_read_but_get_403_on_every_change(client, as_user, demo, monkeypatch, mode, user):
    """airflow (the default): reading is the Plugins view, changing is edit on Pools (Op and Admin);
    colocation: the custom resource, where the SimpleAuthManager lets only admins change."""
    monkeypatch.setenv("AIRFLOW__COLOCATE__AUTHORIZATION", mode)
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    before = snapshot(demo)
    for url in READS:
        assert client.get(url, headers=as_user(user)).status_code == 200, url
    for url, body in WRITES:
        r = client.post(url, json=body, headers=as_user(user))
        assert r.status_code == 403, r.text
        assert f"user {user!r} may not change colocation groups" in r.json()["detail"]
        for junk in ("[[", b"\xff\xfe", '[["x"]]'):
            assert client.post(url, content=junk, headers={**as_user(user), "Content-Type": "application/json"}).status_code == 403
    assert snapshot(demo) == before


def test_ops_change_by_default_and_a_bad_setting_refuses_everyone(client, as_user, demo, monkeypatch):
    """By default a change needs edit on Pools, which Airflow's Op role has (FAB: can_edit on
    Pools); a typo in the setting fails closed, naming the setting and its two values."""
    r = client.post(WRITES[1][0], headers=as_user("op"))
    assert r.status_code == 200, r.text
    assert demo.events(limit=1)[0].actor == "airflow:op"
    before = snapshot(demo)
    monkeypatch.setenv("AIRFLOW__COLOCATE__AUTHORIZATION", "pools")
    for user in ("admin", "viewer"):
        r = client.get(READS[2], headers=as_user(user))
        assert r.status_code == 500 and "AIRFLOW__COLOCATE__AUTHORIZATION" in r.json()["detail"], r.text
        assert "'airflow'" in r.json()["detail"] and "'colocation'" in r.json()["detail"]
        r = client.post(WRITES[0][0], headers=as_user(user))
        assert r.status_code == 500, r.text
    assert client.get("/api/colocate/ui", headers=as_user("admin")).status_code == 500
    assert snapshot(demo) == before


def test_admin_changes_go_through_the_real_login(client, demo):
    """The UI's way: the token as the ``_token`` cookie, not a header."""
    from airflow_colocate.plugins import CSRF_HEADER

    token = client.post("/auth/token", json={"username": "admin", "password": "admin-pw"}).json()["access_token"]
    r = client.post("/api/colocate/group_unstable?db_id=1&group_id=1", cookies={"_token": token},
                    headers={CSRF_HEADER: "1"})
    assert r.status_code == 200 and demo.events(limit=1)[0].actor == "airflow:admin"
    client.cookies.clear()


# ---------------------------------------------------------------------- OpenAPI, plugin, page


def test_openapi_document_and_docs_are_served(client, demo):
    r = client.get("/api/colocate/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.") and doc["info"]["title"] == "airflow-colocate admin API"
    assert set(doc["paths"]) == {"/", "/groups", "/groups/{group}", "/backends", "/jobs", "/flags", "/events",
                                 "/metrics", "/group_stable", "/group_unstable", "/group_join_policy", "/group_split", "/bucketseq", "/tables/{table}",
                                 "/tables/{table}/schema", "/tables/{table}/retention"}
    assert {"OAuth2PasswordBearer", "HTTPBearer"} <= set(doc["components"]["securitySchemes"])
    assert doc["servers"] == [{"url": "/api/colocate"}]
    for code in ("401", "403", "404", "409", "422"):
        assert code in doc["paths"]["/bucketseq"]["post"]["responses"]
    docs = client.get("/api/colocate/docs")
    assert docs.status_code == 200
    # issue 47: the reference is the package's own HTML (Swagger's page loaded its scripts from a CDN)
    assert "<script" not in docs.text and "http" not in docs.text.replace("http_", "")
    assert "<code>/api/colocate/groups/{group}</code>" in docs.text and "/api/colocate/openapi.json" in docs.text
    assert client.get("/api/colocate/redoc").status_code == 404


def test_plugin_is_registered_with_airflow(client, as_user, demo):
    r = client.get("/api/v2/plugins", headers=as_user("viewer"))
    [plugin] = [p for p in r.json()["plugins"] if p["name"] == "colocate"]
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/api/colocate"
    [view] = plugin["external_views"]
    assert (view["name"], view["destination"], view["url_route"], view["href"]) == \
           ("Colocation", "nav", "colocation", "/api/colocate/ui")
    assert client.get(view["icon"]).status_code == 200
    assert client.get("/api/colocate/static/colocation.css").status_code == 200


class PageParser(HTMLParser):
    """The group rows and the map's cells of the Colocation page."""

    def __init__(self):
        super().__init__()
        self.groups: dict[str, str] = {}
        self.cells: list[tuple[int, int, int]] = []
        self.map_group = None
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-group-id" in a:
            self._row = a["data-group-id"]
        elif tag == "span" and "data-stable" in a and self._row:
            self.groups[self._row] = a["data-stable"]
        elif tag == "svg" and "data-group-id" in a:
            self.map_group = a["data-group-id"]
        elif tag == "rect" and "data-bucket" in a:
            self.cells.append((int(a["data-bucket"]), int(a["data-replica"]), int(a["data-backend"])))


def parse_page(html: str) -> PageParser:
    p = PageParser()
    p.feed(html)
    return p


def map_cells(cat: Catalog, ref: str) -> list[tuple[int, int, int]]:
    return [(seq, i, be) for seq, row in enumerate(cat.groups.get(ref).bucket_map) for i, be in enumerate(row)]


def test_page_shows_groups_and_the_map_as_the_catalog_has_them(client, as_user, demo):
    r = client.get("/api/colocate/ui", headers=as_user("viewer"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = parse_page(r.text)
    assert page.groups == {g.group_id: str(g.stable).lower() for g in demo.groups.list()}
    assert page.map_group == "1.2"  # the unstable group first
    assert sorted(page.cells) == map_cells(demo, "1.2")
    assert "balance job" in r.text and "is moving 1 bucket replicas" in r.text
    assert 'data-job-id="' in r.text and "relocate" in r.text

    page = parse_page(client.get("/api/colocate/ui?group=1_g_orders", headers=as_user("viewer")).text)
    assert page.map_group == "1.1" and sorted(page.cells) == map_cells(demo, "1.1")
    bad = client.get("/api/colocate/ui?group=nope", headers=as_user("viewer"))
    assert bad.status_code == 200 and "unknown colocation group &#39;nope&#39;" in bad.text
    for ref in ("1.99999999999999999999", "99999999999_g", "1.%C2%B2", "<script>"):
        bad = client.get(f"/api/colocate/ui?group={ref}", headers=as_user("viewer"))
        assert bad.status_code == 200 and "invalid group" in bad.text and "<script>" not in bad.text


def test_page_sends_anonymous_users_to_airflows_login(client, demo):
    r = client.get("/api/colocate/ui?group=1.1", follow_redirects=False)
    assert r.status_code == 303
    target = urlsplit(r.headers["location"])
    assert target.path == "/auth/login"
    assert parse_qs(target.query)["next"] == ["http://testserver/api/colocate/ui?group=1.1"]


def test_catalog_not_initialised_is_503_with_the_fix(client, as_user, tmp_path, monkeypatch, airflow_app):
    from airflow_colocate.plugins import plugin
    from airflow_colocate.plugins.app import CatalogSource

    old = plugin.app.state.catalogs
    plugin.app.state.catalogs = CatalogSource(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        r = client.get("/api/colocate/groups", headers=as_user("viewer"))
        assert r.status_code == 503 and "run 'colocate init' first" in r.json()["detail"]
    finally:
        plugin.app.state.catalogs.dispose()
        plugin.app.state.catalogs = old


def test_json_is_plain(client, as_user, demo):
    """Datetimes are ISO strings, so any HTTP client can read the listings."""
    for url in ("/api/colocate/backends", "/api/colocate/jobs", "/api/colocate/events"):
        body = client.get(url, headers=as_user("viewer")).text
        json.loads(body)
        assert "T" in body


def test_the_providers_documentation_link_is_served_by_the_plugin(client):
    """Airflow's Providers page links the package's Documentation URL: the README, served by this
    plugin in every deployment, anchored at its Airflow provider section; no login needed."""
    from importlib import metadata
    from urllib.parse import urlparse

    (url,) = [u.split(",", 1)[1].strip() for u in metadata.metadata("airflow-colocate").get_all("Project-URL")
              if u.split(",", 1)[0].strip().lower() == "documentation"]
    link = urlparse(url)
    response = client.get(link.path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert f'id="{link.fragment}"' in response.text and "<h2" in response.text and "colocate" in response.text

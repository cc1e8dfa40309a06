"""The admin API against abuse (issue 16, item 11), on the real plugin inside Airflow's API server
app: a huge body is refused from its headers (413) before authentication or parsing, a
validation error does not echo the input back, the OpenAPI document states its bounds as JSON
Schema, a change by the session cookie needs the CSRF header, authorization asks the auth
manager's public API, and a 503 does not show the catalog's URL."""

from __future__ import annotations

import json
import time

from airflow_colocate.plugins import CSRF_HEADER
from airflow_colocate.plugins.schemas import MAX_BODY_BYTES

BUCKETSEQ = "/api/colocate/bucketseq?db_id=1&group_id=1&force=true"
CHANGES = ["/api/colocate/group_stable?db_id=1&group_id=1", "/api/colocate/group_unstable?db_id=1&group_id=1", BUCKETSEQ]


def state(cat):
    return ([(g.group_id, g.stable, g.version, g.bucket_map) for g in cat.groups.list()],
            [e.id for e in cat.events(limit=1000)])


def test_a_16_mb_anonymous_post_is_refused_from_its_headers(client, as_user, demo):
    body = b"[" + b"[1, 2], " * (16 * 2**20 // 8) + b"[1, 2]]"
    assert len(body) > 16 * 2**20 > MAX_BODY_BYTES
    before = state(demo)
    for headers in ({}, as_user("viewer"), as_user("admin")):
        started = time.perf_counter()
        r = client.post(BUCKETSEQ, content=body, headers={**headers, "Content-Type": "application/json"})
        elapsed = time.perf_counter() - started
        assert r.status_code == 413, r.text[:300]
        assert f"larger than {MAX_BODY_BYTES} bytes" in r.json()["detail"]
        assert elapsed < 2.0, f"refusing 16 MB took {elapsed:.1f} s: the body was read or parsed"
    # sent without Content-Length (chunked), it is read only up to the limit, then refused
    chunks = (body[i:i + 2**20] for i in range(0, len(body), 2**20))
    r = client.post(BUCKETSEQ, content=chunks, headers={**as_user("admin"), "Content-Type": "application/json"})
    assert r.status_code == 413
    # the largest map the schema allows still fits
    assert len(json.dumps([[2147483647] * 16] * 65536, separators=(",", ":"))) < MAX_BODY_BYTES
    assert state(demo) == before


def test_an_anonymous_change_is_401_without_reading_the_body(client, demo):
    body = b"[" + b"[1, 2], " * ((MAX_BODY_BYTES - 16) // 8) + b"[1, 2]]"  # within the limit, slow to parse
    assert len(body) <= MAX_BODY_BYTES
    started = time.perf_counter()
    r = client.post(BUCKETSEQ, content=body, headers={"Content-Type": "application/json"})
    elapsed = time.perf_counter() - started
    assert r.status_code == 401 and r.json()["detail"] == "Not authenticated"
    assert elapsed < 1.0, f"an anonymous change took {elapsed:.1f} s to refuse: its body was parsed"


def test_a_validation_error_does_not_echo_the_input(client, as_user, demo):
    demo.set_flag("disable_colocate_balance", True)
    demo.set_flag("disable_colocate_relocate", True)
    bad = [[2, 1]] * 20000 + [["x" * 5000, 1]]  # one bad id at the end of a big map
    r = client.post(BUCKETSEQ, json=bad, headers=as_user("admin"))
    assert r.status_code == 422
    assert len(r.content) < 2000, f"{len(r.content)} bytes: the input came back"
    errors = r.json()["detail"]
    assert errors[0]["loc"] == ["body", 20000, 0] and errors[0]["msg"]
    assert errors[0]["input"] == "x" * 64 + "..."
    # a body that is not a list of lists: the place and the message, not the body
    r = client.post(BUCKETSEQ, json={"map": [[1, 2]] * 5000}, headers=as_user("admin"))
    assert r.status_code == 422 and len(r.content) < 1000 and "input" not in r.json()["detail"][0]
    # a short scalar is still shown: it says what was wrong
    r = client.post("/api/colocate/group_stable?db_id=-1&group_id=1", headers=as_user("admin"))
    assert r.status_code == 422 and r.json()["detail"][0]["input"] == "-1"


def _bounded(schema: dict) -> list[dict]:
    out = []
    if isinstance(schema, dict):
        if schema.get("type") == "integer":
            out.append(schema)
        for value in schema.values():
            out += _bounded(value) if isinstance(value, (dict, list)) else []
    elif isinstance(schema, list):
        for value in schema:
            out += _bounded(value)
    return out


def test_openapi_bounds_are_json_schema(client, demo):
    doc = client.get("/api/colocate/openapi.json").json()
    post = doc["paths"]["/bucketseq"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body["minItems"] == 1 and body["maxItems"] == 65536
    assert body["items"]["minItems"] == 1 and body["items"]["maxItems"] == 16
    assert body["items"]["items"] == {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
    params = {p["name"]: p["schema"] for p in post["parameters"]}
    assert (params["db_id"]["minimum"], params["db_id"]["maximum"]) == (0, 2**31 - 1)
    assert params["group_id"]["minimum"] == 1
    limit = {p["name"]: p["schema"] for p in doc["paths"]["/jobs"]["get"]["parameters"]}["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    # no bound anywhere is written in a keyword JSON Schema does not know
    text = json.dumps(doc["paths"])
    for keyword in ('"ge":', '"le":', '"gt":', '"lt":'):
        assert keyword not in text, keyword
    request_ints = [s for path in doc["paths"].values() for op in path.values()
                    for s in _bounded([op.get("parameters", []), op.get("requestBody", {})])]
    for s in request_ints:
        assert "minimum" in s and "maximum" in s, s


def test_a_cookie_change_needs_the_csrf_header(client, demo):
    """A cross-site form or fetch carries the cookie but cannot add a custom header."""
    token = client.post("/auth/token", json={"username": "admin", "password": "admin-pw"}).json()["access_token"]
    before = state(demo)
    try:
        for url in CHANGES:
            body = [[2, 1]] * 8 if "bucketseq" in url else None
            r = client.post(url, json=body, cookies={"_token": token})
            assert r.status_code == 403 and CSRF_HEADER in r.json()["detail"], r.text
            r = client.post(url, json=body, cookies={"_token": token}, headers={CSRF_HEADER: ""})
            assert r.status_code == 403
        assert state(demo) == before
        r = client.post(CHANGES[1], cookies={"_token": token}, headers={CSRF_HEADER: "1"})
        assert r.status_code == 200 and demo.events(limit=1)[0].actor == "airflow:admin"
        # reads need no header, and a bearer token needs none either
        assert client.get("/api/colocate/groups", cookies={"_token": token}).status_code == 200
    finally:
        client.cookies.clear()
    r = client.post(CHANGES[0], headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200


def test_authorization_asks_the_auth_managers_public_api(client, as_user, demo, monkeypatch):
    """The decision is the auth manager's, through its public API: by default the Plugins view to
    read and edit on Pools to change (what FAB answers from its roles with nothing registered);
    with AIRFLOW__COLOCATE__AUTHORIZATION=colocation, is_authorized_custom_view on 'Colocation'.
    When the manager says no, an admin is refused too."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView

    manager = type(get_auth_manager())
    asked = []
    view, pool, custom = manager.is_authorized_view, manager.is_authorized_pool, manager.is_authorized_custom_view

    def viewed(self, *, access_view, user):
        asked.append(("view", access_view, user.get_name()))
        return view(self, access_view=access_view, user=user)

    def no_pool_changes(self, *, method, user, details=None):
        asked.append(("pool", method, user.get_name()))
        return method == "GET" and pool(self, method=method, user=user, details=details)

    def no_custom_changes(self, *, method, resource_name, user):
        asked.append((method, resource_name, user.get_name()))
        return method == "GET" and custom(self, method=method, resource_name=resource_name, user=user)

    monkeypatch.setattr(manager, "is_authorized_view", viewed)
    monkeypatch.setattr(manager, "is_authorized_pool", no_pool_changes)
    monkeypatch.setattr(manager, "is_authorized_custom_view", no_custom_changes)
    before = state(demo)
    r = client.post(CHANGES[0], headers=as_user("admin"))
    assert r.status_code == 403 and "may not change colocation groups" in r.json()["detail"]
    assert "can_edit on Pools" in r.json()["detail"]
    assert ("pool", "PUT", "admin") in asked
    assert client.get("/api/colocate/groups", headers=as_user("viewer")).status_code == 200
    assert ("view", AccessView.PLUGINS, "viewer") in asked

    asked.clear()
    monkeypatch.setenv("AIRFLOW__COLOCATE__AUTHORIZATION", "colocation")
    r = client.post(CHANGES[0], headers=as_user("admin"))
    assert r.status_code == 403 and "may not change colocation groups" in r.json()["detail"]
    assert ("PUT", "Colocation", "admin") in asked
    assert client.get("/api/colocate/groups", headers=as_user("viewer")).status_code == 200
    assert ("GET", "Colocation", "viewer") in asked
    assert not [a for a in asked if a[0] in ("view", "pool")]
    assert state(demo) == before


def test_a_503_does_not_show_the_catalog_url(client, as_user, tmp_path, airflow_app):
    from airflow_colocate.plugins import plugin
    from airflow_colocate.plugins.app import CatalogSource

    old = plugin.app.state.catalogs
    secret_path = tmp_path / "secret-dir-name"
    secret_path.mkdir()
    cases = [f"sqlite:///{secret_path / 'empty.db'}",  # never initialised
             "postgresql+psycopg2://colocate:hunter2@127.0.0.1:9/colocate"]  # unreachable
    try:
        for url in cases:
            plugin.app.state.catalogs = CatalogSource(url)
            for user in ("viewer", "admin"):
                r = client.get("/api/colocate/groups", headers=as_user(user))
                assert r.status_code == 503, r.text
                text = r.text
                for leak in ("secret-dir-name", "hunter2", "127.0.0.1", "sqlite:", "postgresql"):
                    assert leak not in text, f"{leak!r} shown to {user}: {text}"
                # still says what is wrong and what to do
                assert ("run 'colocate init' first" if url.startswith("sqlite") else "unreachable") in text
            plugin.app.state.catalogs.dispose()
    finally:
        plugin.app.state.catalogs = old

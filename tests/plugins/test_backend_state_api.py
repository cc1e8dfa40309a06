"""Issue 30 (2): ``/api/colocate/backends`` tells why a backend is down, since when, its last
heartbeat and what the last probe found, under the names the page and ``BackendView`` use."""

from __future__ import annotations

from datetime import datetime

from airflow_colocate.jobs.health import probe_backends

FIELDS = ("state", "state_reason", "reason_source", "state_since", "last_heartbeat", "last_probe_at",
          "last_probe_ok", "last_probe_detail")


def test_backends_say_why_since_when_and_what_the_probe_found(client, as_user, demo):
    got = {b["name"]: b for b in client.get("/api/colocate/backends", headers=as_user("viewer")).json()}
    be4 = got["be4"]
    assert (be4["state"], be4["state_reason"], be4["reason_source"]) == ("down", "test: disk failed", "admin")
    assert be4["last_heartbeat"] is None and be4["last_probe_at"] is None and be4["last_probe_ok"] is None
    assert got["be1"]["state_reason"] is None and got["be1"]["reason_source"] is None

    probe_backends(demo, timeout=10, sample=0)
    got = {b["name"]: b for b in client.get("/api/colocate/backends", headers=as_user("viewer")).json()}
    be4 = got["be4"]
    assert be4["state"] == "down" and be4["state_reason"] == "test: disk failed"  # the admin's mark holds
    assert be4["last_probe_ok"] is True and be4["last_probe_detail"] == "heartbeat ok"  # though reachable
    assert datetime.fromisoformat(be4["last_probe_at"]) == datetime.fromisoformat(be4["last_heartbeat"])
    for b in demo.backends.list():  # every field is BackendView's, times as ISO 8601
        want, row = b.state_fields(), got[b.name]
        assert set(FIELDS) <= set(row)
        for key in FIELDS:
            value = row[key]
            assert (datetime.fromisoformat(value) if isinstance(want[key], datetime) else value) == want[key], key

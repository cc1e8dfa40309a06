"""The heartbeat probe records alive / down-since; down past the relocate delay is unavailable."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from airflow_colocate.jobs import health
from airflow_colocate.catalog import Catalog
from colocate_testing import add_local_backends


@pytest.fixture
def clocked(catalog_url, tmp_path):
    now = [datetime(2026, 11, 1, 8, 0, tzinfo=timezone.utc)]
    cat = Catalog(catalog_url, actor="pytest", clock=lambda: now[0])
    cat.init()
    add_local_backends(cat, tmp_path / "backends")
    yield cat, now, tmp_path / "backends"
    cat.dispose()


def test_probe_writes_reads_and_deletes_a_heartbeat(clocked):
    cat, now, root = clocked
    results = health.probe_backends(cat, timeout=10)
    assert [r.ok for r in results] == [True, True, True]
    assert all(r.backend.last_heartbeat == now[0] and r.backend.state == "alive" for r in results)
    assert not list((root / "be1" / "_colocate" / "heartbeat").iterdir())  # nothing left behind


def test_failed_probe_marks_down_and_after_the_delay_unavailable(clocked):
    cat, now, root = clocked
    cat.tables.create("t", [("id", "bigint")], ["id"], bucket_num=3, replication_num=2, colocate_with="g")
    broken = root / "be2"
    broken.rename(root / "be2.gone")
    broken.write_text("not a directory")  # every write under the root fails
    results = {r.backend.name: r for r in health.probe_backends(cat, timeout=10)}
    assert not results["be2"].ok and results["be2"].error
    be2 = cat.health.backends()[1]
    assert be2.state == "down" and be2.state_since == now[0] and be2.reason_source == "probe"
    assert be2.state_reason == results["be2"].error  # the probe's finding as the reason, without "probe:"
    assert not be2.unavailable and be2.transiently_down
    g = cat.groups.get("g")
    assert not g.stable and "be2 is down" in g.unstable_reason  # recorded by the probe run
    now[0] += timedelta(minutes=29)
    assert not cat.health.backends()[1].unavailable
    now[0] += timedelta(minutes=2)
    assert cat.health.backends()[1].unavailable
    assert not cat.health.backends(relocate_delay=timedelta(hours=2))[1].unavailable
    # it comes back: the next probe brings it up, and the group with it
    broken.unlink()
    (root / "be2.gone").rename(broken)
    assert all(r.ok for r in health.probe_backends(cat, timeout=10))
    assert cat.backends.get("be2").state == "alive" and cat.groups.get("g").stable
    kinds = [(e.kind, e.detail.get("new")) for e in cat.events(limit=20)]
    assert ("backend.state", "down") in kinds and ("backend.state", "alive") in kinds


def test_admin_marks_hold_against_the_probe(clocked):
    cat, now, root = clocked
    cat.backends.set_state("be1", "down", reason="replacing a disk")
    be1 = cat.health.backends()[0]
    assert (be1.state_reason, be1.reason_source) == ("replacing a disk", "admin")
    health.probe_backends(cat, timeout=10)
    assert cat.backends.get("be1").state == "down"  # the heartbeat works, but the admin said down
    assert cat.health.backends()[0].last_heartbeat == now[0]
    cat.backends.set_state("be1", "alive")
    cat.backends.decommission("be3")
    health.probe_backends(cat, timeout=10)
    assert [b.state for b in cat.backends.list()] == ["alive", "alive", "decommissioning"]
    assert cat.health.backends()[2].unavailable  # decommissioning is unavailable at once


def test_a_hung_backend_times_out(clocked, monkeypatch):
    cat, now, root = clocked
    real = health.probe_root

    def slow(uri, **kwargs):
        if uri.endswith("be3"):
            time.sleep(3)
        return real(uri, **kwargs)

    monkeypatch.setattr(health, "probe_root", slow)
    started = time.monotonic()
    results = {r.backend.name: r for r in health.probe_backends(cat, timeout=0.5)}
    assert time.monotonic() - started < 2.5
    assert results["be3"].error == "no answer within 0.5s" and results["be3"].backend.state == "down"
    assert results["be1"].ok


def test_relocate_delay_from_the_environment(monkeypatch):
    monkeypatch.delenv("COLOCATE_RELOCATE_DELAY_MINUTES", raising=False)
    assert health.relocate_delay_from_env() == timedelta(minutes=30)
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "5")
    assert health.relocate_delay_from_env() == timedelta(minutes=5)
    monkeypatch.setenv("COLOCATE_RELOCATE_DELAY_MINUTES", "soon")
    with pytest.raises(ValueError, match="expected a number of minutes"):
        health.relocate_delay_from_env()

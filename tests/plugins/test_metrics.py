"""``/api/colocate/metrics`` scraped by a real Prometheus (Debian's package, started here on
loopback) from the plugin served by Airflow's own API app under uvicorn, with a viewer's bearer
token: a PromQL query gives the unstable-group count before and after a backend goes down. Also
what the endpoint refuses, and what its figures mean on a small catalog."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from airflow_colocate.catalog import Catalog
from plugin_testing import commit_fake_write

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_lake(url: str, root) -> Catalog:
    """Three alive backends, two groups with committed data, both stable."""
    cat = Catalog(url, actor="pytest")
    cat.init()
    for i in (1, 2, 3):
        (root / f"be{i}").mkdir(parents=True)
        cat.backends.add((root / f"be{i}").as_uri(), name=f"be{i}", capacity_bytes=1_000_000)
    cat.tables.create("orders", [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                     partition_cols=["dt"], colocate_with="g_orders")
    cat.tables.create("users", [("k", "int")], ["k"], bucket_num=3, replication_num=1, colocate_with="g_users")
    commit_fake_write(cat, "orders", "2026-11-01", bytes_per_replica=2000)
    commit_fake_write(cat, "users", "all", bytes_per_replica=500)
    assert all(g.stable for g in cat.health.check_groups())
    return cat


@pytest.fixture
def lake(tmp_path, monkeypatch, airflow_app):
    """A fresh catalog the plugin app finds through ``COLOCATE_CATALOG_URL``."""
    from airflow_colocate.plugins import plugin
    from airflow_colocate.plugins.app import CatalogSource

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    cat = small_lake(url, tmp_path / "backends")
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    old = plugin.app.state.catalogs
    plugin.app.state.catalogs = CatalogSource()
    yield cat
    plugin.app.state.catalogs.dispose()
    plugin.app.state.catalogs = old
    cat.dispose()


@pytest.fixture(scope="module")
def served(airflow_app):
    """Airflow's API app (the plugin mounted at /api/colocate) on a loopback port."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(airflow_app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def start_prometheus(home, jobs: dict[str, dict]):
    """Debian's Prometheus on loopback, scraping every second: one scrape job per entry of ``jobs``
    (its name: its ``authorization``). Returns its process and base URL once it is ready."""
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (apt-get install prometheus, or scripts/setup.sh --with-browser)")
    targets = jobs.pop("_targets")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": name, "metrics_path": "/api/colocate/metrics", "authorization": authz,
                            "static_configs": [{"targets": targets}]} for name, authz in jobs.items()],
    }
    (home / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log = open(home / "prometheus.log", "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail("prometheus did not start:\n" + (home / "prometheus.log").read_text()[-3000:])
        time.sleep(0.2)


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def prometheus(served, tokens, tmp_path_factory):
    """One Prometheus for the module, scraping every second with the viewer's token."""
    home = tmp_path_factory.mktemp("prometheus")
    proc, base = start_prometheus(home, {"_targets": [served],
                                         "colocate": {"type": "Bearer", "credentials": tokens["viewer"]}})
    yield base
    stop(proc)


def query(base: str, promql: str) -> list[dict]:
    with urllib.request.urlopen(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(base: str, promql: str, expected: float, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        result = query(base, promql)
        got = [float(r["value"][1]) for r in result]
        if got == [expected]:
            return
        time.sleep(0.3)
    targets = urllib.request.urlopen(f"{base}/api/v1/targets", timeout=5).read().decode()[:2000]
    pytest.fail(f"{promql}: {got}, expected [{expected}] within {timeout}s; targets: {targets}")


def test_prometheus_scrapes_the_unstable_group_count_before_and_after_a_backend_goes_down(lake, prometheus):
    wait_for(prometheus, 'up{job="colocate"}', 1)
    wait_for(prometheus, "colocate_groups_unstable", 0)
    wait_for(prometheus, 'colocate_backends{state="down"}', 0)

    lake.backends.set_state("be1", "down", reason="test: disk pulled")
    unstable = sum(1 for g in lake.health.check_groups() if not g.stable)
    assert unstable == 2  # both groups have buckets on be1

    wait_for(prometheus, "colocate_groups_unstable", unstable)
    wait_for(prometheus, 'colocate_backends{state="down"}', 1)
    wait_for(prometheus, 'colocate_backend_up{backend="be1"}', 0)
    seconds = query(prometheus, 'colocate_group_unstable_seconds{group="1_g_orders"}')
    assert len(seconds) == 1 and 0 <= float(seconds[0]["value"][1]) < 120


def test_the_endpoint_needs_the_read_permission_and_speaks_the_text_format(client, as_user, lake):
    assert client.get("/api/colocate/metrics").status_code == 401
    bad = client.get("/api/colocate/metrics", headers={"Authorization": "Bearer not-a-token"})
    assert bad.status_code in (401, 403)  # Airflow answers a malformed JWT with 403
    r = client.get("/api/colocate/metrics", headers=as_user("viewer"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = r.text.splitlines()
    assert "# TYPE colocate_groups_unstable gauge" in lines and "colocate_groups_unstable 0" in lines
    assert 'colocate_backend_capacity_bytes{backend="be1"} 1000000' in lines
    # every sample line belongs to a family declared before it
    declared = set()
    for line in lines:
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
        elif not line.startswith("#"):
            assert line.split("{")[0].split(" ")[0] in declared, line


def test_the_figures_follow_the_catalog(lake):
    """Bad replicas, under-replicated buckets and when a group became unstable, as recorded."""
    from airflow_colocate.core.contract import BadReplica
    from airflow_colocate.plugins.prometheus import render

    m = lake.metrics.read()
    orders = next(g for g in m.groups if g.group == "1_g_orders")
    assert orders.stable and orders.under_replicated == 0 and orders.bad_replicas == 0
    assert sum(b.bytes for b in m.backends) == 6 * 2 * 2000 + 3 * 500
    _, parts = lake.reads.replicas("orders", ["2026-11-01"])
    r = parts[0].buckets[2][0]
    before = lake.now()
    lake.health.mark_replicas_bad([BadReplica(r.id, "default.orders", "2026-11-01", 2, r.backend_id, r.path,
                                              "test: flipped byte")])
    lake.health.check_groups()
    m = lake.metrics.read()
    orders = next(g for g in m.groups if g.group == "1_g_orders")
    assert not orders.stable and orders.bad_replicas == 1 and orders.under_replicated == 1
    assert orders.unstable_since is not None and orders.unstable_since >= before.replace(microsecond=0)
    text = render(m)
    assert "colocate_replicas_bad 1" in text.splitlines() and "colocate_groups_unstable 1" in text.splitlines()


def test_prometheus_scrapes_without_a_gap_across_a_credentials_expiry(lake, served, tokens, tmp_path, monkeypatch):
    """A token from ``POST /auth/token`` expires after ``[api_auth] jwt_expiration_time`` (24 h), and a
    scrape with it then fails; the scrape token (``[colocate] metrics_token``, read from a credentials
    file as docs/operations.md says) does not. The server's clock is injected: the served app checks
    tokens through PyJWT in this process, so moving PyJWT's "now" 24 h and 1 min ahead while one
    Prometheus scrapes with both credentials every second is a day passing for the credentials."""
    import datetime as dt

    import jwt.api_jwt

    from airflow.configuration import conf

    scrape_token = "scrape-" + "0123456789abcdef" * 3
    monkeypatch.setenv("AIRFLOW__COLOCATE__METRICS_TOKEN", scrape_token)
    (tmp_path / "scrape-token").write_text(scrape_token + "\n")
    ahead = dt.timedelta(0)

    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime.now(tz) + ahead

    monkeypatch.setattr(jwt.api_jwt, "datetime", Clock)
    lifetime = conf.getint("api_auth", "jwt_expiration_time")
    assert lifetime == 24 * 3600  # the viewer's token is an ordinary one: it lasts a day
    proc, base = start_prometheus(tmp_path, {
        "_targets": [served],
        "scrape_token": {"type": "Bearer", "credentials_file": str(tmp_path / "scrape-token")},
        "user_token": {"type": "Bearer", "credentials": tokens["viewer"]}})
    try:
        wait_for(base, 'up{job="scrape_token"}', 1)
        wait_for(base, 'up{job="user_token"}', 1)
        time.sleep(2)
        jumped = time.time()
        ahead = dt.timedelta(seconds=lifetime + 60)  # a day and a minute later, for the server
        wait_for(base, 'up{job="user_token"}', 0, timeout=40)  # the user's token has expired
        time.sleep(3)  # three more scrapes after the expiry
        window = f"{int(time.time() - jumped) + 6}s"
        ups = query(base, f'up{{job="scrape_token"}}[{window}]')[0]["values"]
        assert ups and all(v == "1" for _, v in ups), ups
        times = [float(t) for t, _ in ups]
        user = query(base, f'up{{job="user_token"}}[{window}]')[0]["values"]
        assert user[0][1] == "1", user  # it scraped before the day passed...
        expired_at = min(float(t) for t, v in user if v == "0")  # ...and failed from then on
        assert all(v == "0" for t, v in user if float(t) >= expired_at), user
        assert times[0] < expired_at - 1 and times[-1] > expired_at + 2, (times, expired_at)
        assert max(b - a for a, b in zip(times, times[1:])) < 2.5, times  # every second, no gap
        wait_for(base, 'colocate_groups_unstable{job="scrape_token"}', 0)
    finally:
        stop(proc)


def test_the_scrape_token_reads_the_metrics_and_nothing_else(client, lake, monkeypatch):
    token = "scrape-" + "fedcba9876543210" * 3
    monkeypatch.setenv("AIRFLOW__COLOCATE__METRICS_TOKEN", token)
    ok = client.get("/api/colocate/metrics", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and "colocate_groups 2" in ok.text.splitlines()
    assert client.get("/api/colocate/groups", headers={"Authorization": f"Bearer {token}"}).status_code in (401, 403)
    assert client.get("/api/colocate/metrics", headers={"Authorization": f"Bearer {token}x"}).status_code in (401, 403)
    monkeypatch.setenv("AIRFLOW__COLOCATE__METRICS_TOKEN", "short")
    r = client.get("/api/colocate/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 500 and "shorter than 32" in r.json()["detail"]

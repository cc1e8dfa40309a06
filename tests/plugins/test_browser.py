"""The Colocation page as a person sees it: a real ``airflow api-server`` with the plugin,
Debian's headless Chromium logging in through Airflow's login form, the page opened from the
UI's navigation, its group table and bucket map checked against the catalog, and screenshots
saved under the test's output folder (``$COLOCATE_TEST_OUTPUT``, default ``.ci-out/test-output``).

Skipped with a message when Chromium is not installed, except in CI (``CI=true``), where that
fails the test: ``apt-get install chromium``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cdp import Browser, find_chromium, in_ci, stop_group
from plugin_testing import build_demo_catalog

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def output_dir(request) -> Path:
    root = Path(os.environ.get("COLOCATE_TEST_OUTPUT") or REPO / ".ci-out" / "test-output")
    out = root / request.node.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


@pytest.fixture
def chromium() -> str:
    path = find_chromium()
    if path is None:
        message = ("headless Chromium not found: install Debian's package with 'apt-get install chromium' "
                   "to run the browser test of the Colocation page")
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def api_server(airflow_home, tmp_path, output_dir):
    """``airflow api-server`` on a free local port, with the plugin from its entry point and a
    demo catalog named by ``COLOCATE_CATALOG_URL``."""
    home, env = airflow_home
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    cat = build_demo_catalog(url, tmp_path / "backends")
    port = free_port()
    log = open(output_dir / "api-server.log", "wb")
    # cwd is AIRFLOW_HOME, not the repo: there the editable install's *.egg-info would list the
    # plugin's entry point a second time.
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env={**os.environ, **env, "COLOCATE_CATALOG_URL": url}, cwd=home, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"airflow api-server exited {proc.returncode}; see {output_dir / 'api-server.log'}")
            try:
                with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"airflow api-server not up after 180 s; see {output_dir / 'api-server.log'}")
            time.sleep(0.5)
        yield base, cat
    finally:
        stop_group(proc)
        log.close()
        cat.dispose()


# JavaScript run in the page: the Colocation iframe's document, and what its tables and map show.
FRAME = "document.querySelector('iframe[title=\"Colocation\"]')?.contentDocument"
READ_PAGE = f"""(() => {{
  const d = {FRAME};
  if (!d || !d.querySelector('table#groups') || !d.querySelector('svg.bucket-map')) return null;
  return {{
    groups: [...d.querySelectorAll('table#groups tbody tr')].map(tr => [
      tr.dataset.groupId, tr.cells[1].innerText.trim(), tr.querySelector('[data-stable]').dataset.stable]),
    mapGroup: d.querySelector('svg.bucket-map').dataset.groupId,
    cells: [...d.querySelectorAll('svg.bucket-map rect.cell[data-bucket]')].map(r =>
      [+r.dataset.bucket, +r.dataset.replica, +r.dataset.backend, r.classList[1]]),
    backends: [...d.querySelectorAll('table#backends tbody tr')].map(tr => +tr.dataset.backendId),
    jobs: [...d.querySelectorAll('table#jobs tbody tr')].map(tr => +tr.dataset.jobId),
    href: d.location.href,
  }};
}})()"""


def expected_cells(cat, ref: str) -> list[list]:
    alive = {b.id for b in cat.backends() if b.state == "alive"}
    return sorted([seq, i, be, "down" if be not in alive else ("primary" if i == 0 else "replica")]
                  for seq, row in enumerate(cat.group(ref).bucket_map) for i, be in enumerate(row))


def test_colocation_page_in_the_airflow_ui(chromium, api_server, output_dir, tmp_path):
    base, cat = api_server
    browser = Browser(chromium, tmp_path / "chromium-profile", output_dir / "chromium.log")
    try:
        # Log in through Airflow's own login form, asking to come back to the plugin page.
        browser.goto(f"{base}/auth/login?next=/plugin/colocation")
        browser.wait_for("!!document.querySelector('input[name=\"username\"]')", "Airflow's login form")
        browser.type_into("input[name=\"username\"]", "viewer")
        browser.type_into("input[name=\"password\"]", "viewer-pw")
        browser.evaluate("document.querySelector('form').requestSubmit()")
        browser.wait_for("location.pathname === '/plugin/colocation'", "the redirect to the Colocation page")

        # The page is an entry of the UI's navigation, and shows the catalog.
        browser.wait_for("[...document.querySelectorAll('a[href]')].some(a => a.getAttribute('href').endsWith('plugin/colocation'))",
                         "a 'Colocation' link in Airflow's navigation")
        seen = browser.wait_for(READ_PAGE, "the group table and the map inside the Colocation view")
        groups = cat.groups()
        assert seen["groups"] == [[g.group_id, g.full_name, str(g.stable).lower()] for g in groups]
        assert seen["mapGroup"] == "1.2"  # the unstable group is shown first
        assert sorted(seen["cells"]) == expected_cells(cat, "1.2")
        assert seen["backends"] == [b.id for b in cat.backends()]
        assert seen["jobs"] == [j["id"] for j in cat.list_jobs(kinds=["relocate", "balance", "repair"], states=["running"])]
        browser.screenshot(output_dir / "colocation-in-airflow.png")

        # Choose another group in the table: its map replaces the first one.
        browser.evaluate(f"{FRAME}.querySelector('tr[data-group-id=\"1.1\"] a').click()")
        seen = browser.wait_for(f"(() => {{ const p = {READ_PAGE}; return p && p.mapGroup === '1.1' ? p : null }})()",
                                "the map of group 1_g_orders after clicking it")
        assert sorted(seen["cells"]) == expected_cells(cat, "1.1")
        assert "down" in {c[3] for c in seen["cells"]}  # be4 is down: its cells are drawn as such
        browser.screenshot(output_dir / "colocation-group-1_g_orders.png")

        # The page on its own, whole.
        browser.goto(f"{base}/api/colocate/ui?group=1.1")
        browser.wait_for("!!document.querySelector('svg.bucket-map')", "the page on its own")
        shot = browser.screenshot(output_dir / "colocation-page.png", full_page=True)
        assert shot.stat().st_size > 10_000
        (output_dir / "seen.json").write_text(json.dumps(seen, indent=1))
    finally:
        browser.close()

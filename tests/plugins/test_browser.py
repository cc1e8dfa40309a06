"""The Colocation page and the maintenance DAG as a person uses them: a real ``airflow api-server``
with the plugin and the maintenance DAG (serialized into its database as the DAG processor would), Debian's
headless Chromium logging in through Airflow's login form, the page opened from the UI's
navigation and from a task's "Colocation" link, checked against the catalog in light and dark
mode and at 512 buckets × 16 backends, every kind of link on it clicked with a real mouse inside
Airflow's sandboxed iframe, a backend marked down with a reason and what the page then says, the
DAG triggered from its form with only ``action`` chosen, and a join task's explain in its Log tab. Screenshots go to the test's output folder
(``$COLOCATE_TEST_OUTPUT``, default ``.ci-out/test-output``), and to ``docs/screenshots/`` with
``COLOCATE_UPDATE_SCREENSHOTS=1``.

Skipped with a message when Chromium is not installed, except in CI (``CI=true``), where that
fails the test: ``apt-get install chromium``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from cdp import Browser, find_chromium, in_ci, stop_group
from plugin_testing import build_demo_catalog, commit_fake_write

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.actor import task_actor
from airflow_colocate.operators.links import page_url

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "screenshots"


@pytest.fixture(scope="module")
def output_dir() -> Path:
    root = Path(os.environ.get("COLOCATE_TEST_OUTPUT") or REPO / ".ci-out" / "test-output")
    out = root / "test_browser"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def shoot(browser: Browser, output_dir: Path, name: str, **kwargs) -> Path:
    """A screenshot in the output folder, copied to docs/screenshots when asked to refresh them.
    Taken once the page's animations (Airflow's fade-ins) are over and two frames were painted."""
    settled = ("document.getAnimations().every(a => a.playState !== 'running'"
               " || a.effect?.getComputedTiming().iterations === Infinity)")  # spinners never end
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not browser.evaluate(settled):
        time.sleep(0.25)
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")
    shot = browser.screenshot(output_dir / name, **kwargs)
    if shot.stat().st_size <= 10_000:
        (output_dir / f"{name}.txt").write_text(str(browser.evaluate("location.href + '\\n' + document.body.innerText")))
    assert shot.stat().st_size > 10_000, f"{name} looks empty; what the page said is in {name}.txt"
    if os.environ.get("COLOCATE_UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS / name)
    return shot


@pytest.fixture(scope="module")
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


# A helper process started with the api-server, so its Airflow imports overlap the server's start:
# it serializes the maintenance DAG into Airflow's database (what the DAG processor would do), says
# "ready", then waits for the run the trigger form created and executes it with dag.test(). Given
# that run's logical date and run_after, dag.test() re-creates it under the same run id with the conf.
RUNNER = """
import json, os, sys
answer = os.fdopen(os.dup(1), "w")  # the test reads only these lines; logs go to stderr (a file)
os.dup2(2, 1)
sys.stdout = sys.stderr
import pendulum
from airflow.dag_processing.bundles.manager import DagBundlesManager
from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
from airflow.sdk.execution_time import supervisor
from airflow.sdk.log import configure_logging, init_log_file
from airflow.utils.helpers import log_filename_template_renderer

# dag.test() runs each task in this process with its log on stdout; a worker's supervisor writes it
# to the task's log file instead, which is where the api-server reads it for the UI's Log tab (without
# it, the Log tab of a dag.test() run has nothing to show). Do what the supervisor does: JSON lines
# under the base log folder, named by the log template. One stream for the whole process (loggers
# created during a task keep theirs): this helper's log, and the running task's file while there is one.
class TaskLogs:
    file = None

    def write(self, data: bytes) -> int:
        sys.stderr.flush()
        sys.stderr.buffer.write(data)
        if self.file is not None:
            self.file.write(data)
        return len(data)

    def flush(self) -> None:
        sys.stderr.flush()
        if self.file is not None:
            self.file.flush()


task_logs = TaskLogs()
configure_logging(json_output=True, output=task_logs)
in_process = supervisor.run_task_in_process
def run_task_logged(ti, task, client=None):
    with open(init_log_file(log_filename_template_renderer()(ti=ti)), "ab") as task_logs.file:
        try:
            return in_process(ti, task, client)
        finally:
            task_logs.file = None
supervisor.run_task_in_process = run_task_logged

manager = DagBundlesManager()
manager.sync_bundles_to_db()
for bundle in manager.get_all_dag_bundles():
    if not bundle.is_initialized:
        bundle.initialize()
    bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, bundle.name, bundle.version)
print("ready", file=answer, flush=True)
for line in sys.stdin:
    run = json.loads(line)
    done = bag.dags[run["dag_id"]].test(logical_date=pendulum.parse(run["logical_date"]),
                                        run_after=pendulum.parse(run["run_after"]), run_conf=run["conf"])
    print(json.dumps({"run_id": done.run_id, "state": str(done.state),
                      "tasks": {ti.task_id: str(ti.state) for ti in done.get_task_instances()}}), file=answer, flush=True)
"""

# A join a person would read the explain of in the UI: two tables of one group (written by the
# join_tables fixture into the helper's catalog), joined on their bucket key by spark-submit on local[1].
JOIN_DAG = '''
import pendulum
from airflow.sdk import DAG
from airflow_colocate.operators.join import ColocateJoinOperator

with DAG("colocate_join_explain", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")):
    ColocateJoinOperator(
        task_id="lines_per_order", tables={{"orders": ["{{{{ ds }}}}"], "lineitem": ["{{{{ ds }}}}"]}},
        query="SELECT o.id, count(*) AS lines FROM orders o JOIN lineitem l ON o.dt = l.dt AND o.id = l.id "
              "GROUP BY o.id",
        output_path={output!r}, require_colocate=True,
        conf={{"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}})
'''
JOIN_DAY = "2026-11-01"


def run_in_helper(server, run: dict) -> dict:
    """Execute a DAG run with dag.test() in the helper process (RUNNER); its outcome."""
    server.runner.stdin.write(json.dumps(run) + "\n")
    server.runner.stdin.flush()
    line = server.runner.stdout.readline()
    assert line, f"dag.test() of {run['dag_id']} failed: see the test output's maintenance-run.log"
    return json.loads(line)


class Server:
    def __init__(self, base: str, cat: Catalog, env: dict[str, str], home: Path, runner: subprocess.Popen,
                 run_url: str, tmp: Path):
        self.base, self.cat, self.env, self.home, self.runner = base, cat, env, home, runner
        self.run_url, self.tmp = run_url, tmp  # the catalog the helper's runs use, the fixture's folder
        self.ready = False

    def wait_runner(self) -> None:
        """Wait until the helper has serialized the DAGs into Airflow's database (once)."""
        if not self.ready:
            line = self.runner.stdout.readline()
            assert line.strip() == "ready", "serializing the DAGs failed: see the test output's maintenance-run.log"
            self.ready = True

    def api(self, path: str, user: str = "op", password: str = "op-pw") -> dict:
        """Airflow's REST API with a real token, as a script would call it."""
        req = urllib.request.Request(f"{self.base}/auth/token", data=json.dumps(
            {"username": user, "password": password}).encode(), headers={"Content-Type": "application/json"})
        token = json.loads(urllib.request.urlopen(req, timeout=30).read())["access_token"]
        req = urllib.request.Request(f"{self.base}{path}", headers={"Authorization": f"Bearer {token}"})
        return json.loads(urllib.request.urlopen(req, timeout=30).read())


@pytest.fixture(scope="module")
def api_server(chromium, airflow_home, tmp_path_factory, output_dir):
    """``airflow api-server`` on a free local port, with the plugin from its entry point, a demo
    catalog named by ``COLOCATE_CATALOG_URL`` and the maintenance DAG serialized in its database."""
    home, env = airflow_home
    tmp = tmp_path_factory.mktemp("browser")
    dags = tmp / "dags"
    dags.mkdir()
    shutil.copy(REPO / "dags" / "colocate_maintenance.py", dags)
    (dags / "colocate_join_explain.py").write_text(JOIN_DAG.format(output=(tmp / "join-out").as_uri()))
    url = f"sqlite:///{tmp / 'catalog.db'}"
    cat = build_demo_catalog(url, tmp / "backends")
    env = {**os.environ, **env, "COLOCATE_CATALOG_URL": url, "AIRFLOW__CORE__DAGS_FOLDER": str(dags)}
    # The run the trigger test creates runs against a catalog of its own: two backends and a
    # stable group (repair has nothing to move, so no Spark job is needed).
    run_url = f"sqlite:///{tmp / 'run-catalog.db'}"
    run_cat = Catalog(run_url, actor="pytest")
    run_cat.init()
    for name in ("be1", "be2"):
        (tmp / "run-backends" / name).mkdir(parents=True)
        run_cat.backends.add((tmp / "run-backends" / name).as_uri(), name=name)
    run_cat.tables.create("clicks", [("id", "bigint")], ["id"], bucket_num=4, replication_num=1, colocate_with="g")
    run_cat.dispose()
    runner_env = {**env, "COLOCATE_CATALOG_URL": run_url, "COLOCATE_HOME": str(tmp / "home"),
                  "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"})}
    runner_log = open(output_dir / "maintenance-run.log", "wb")
    # cwd is AIRFLOW_HOME, not the repo: there the editable install's *.egg-info would list the
    # plugin's entry point a second time.
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], env=runner_env, cwd=home, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=runner_log, text=True, start_new_session=True)
    port = free_port()
    log = open(output_dir / "api-server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
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
        yield Server(base, cat, env, home, runner, run_url, tmp)
    finally:
        stop_group(proc)
        runner.stdin.close()  # the helper's loop ends at the end of its input
        try:
            runner.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        stop_group(runner)
        log.close()
        runner_log.close()
        cat.dispose()


@pytest.fixture(scope="module")
def browser(chromium, api_server, tmp_path_factory, output_dir):
    """One Chromium for the module, logged in through Airflow's own login form as ``op`` (may
    read the Colocation page and trigger DAGs)."""
    b = Browser(chromium, tmp_path_factory.mktemp("chromium-profile"), output_dir / "chromium.log")
    try:
        b.goto(f"{api_server.base}/auth/login?next=/plugin/colocation")
        b.wait_for("!!document.querySelector('input[name=\"username\"]')", "Airflow's login form")
        b.type_into("input[name=\"username\"]", "op")
        b.type_into("input[name=\"password\"]", "op-pw")
        b.evaluate("document.querySelector('form').requestSubmit()")
        b.wait_for("location.pathname === '/plugin/colocation'", "the redirect to the Colocation page")
        yield b
    finally:
        b.close()


# JavaScript run in the page: the Colocation iframe's document, and what its tables and map show.
FRAME = "document.querySelector('iframe[title=\"Colocation\"]')?.contentDocument"
READ_PAGE = """(() => {
  const d = %s;
  if (!d || !d.querySelector('table#groups') || !d.querySelector('svg.bucket-map')) return null;
  return {
    groups: [...d.querySelectorAll('table#groups tbody tr')].map(tr => [
      tr.dataset.groupId, tr.cells[1].innerText.trim(), tr.querySelector('[data-stable]').dataset.stable]),
    mapGroup: d.querySelector('svg.bucket-map').dataset.groupId,
    view: d.querySelector('svg.bucket-map').dataset.view,
    cells: [...d.querySelectorAll('svg.bucket-map rect.cell[data-bucket]')].map(r =>
      [+r.dataset.bucket, +r.dataset.replica, +r.dataset.backend, r.classList[1]]),
    totals: Object.fromEntries([...d.querySelectorAll('svg.bucket-map text.total')].map(t => [t.dataset.backend, +t.dataset.total])),
    backends: [...d.querySelectorAll('table#backends tbody tr')].map(tr => +tr.dataset.backendId),
    jobs: [...d.querySelectorAll('table#jobs tbody tr')].map(tr => [+tr.dataset.jobId, tr.dataset.kind, tr.dataset.state]),
    background: getComputedStyle(d.body).backgroundColor,
    theme: d.documentElement.dataset.theme || null,
    href: d.location.href,
  };
})()"""
IN_FRAME = READ_PAGE % FRAME
ON_ITS_OWN = READ_PAGE % "document"


def expected_cells(cat, ref: str) -> list[list]:
    alive = {b.id for b in cat.backends.list() if b.state == "alive"}
    return sorted([seq, i, be, "down" if be not in alive else ("primary" if i == 0 else "replica")]
                  for seq, row in enumerate(cat.groups.get(ref).bucket_map) for i, be in enumerate(row))


def totals(cat, ref: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in cat.groups.get(ref).bucket_map:
        for be in row:
            out[str(be)] = out.get(str(be), 0) + 1
    return out


def dark(rgb: str) -> bool:
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return r + g + b < 3 * 80


def test_colocation_page_in_the_airflow_ui(api_server, browser, output_dir):
    cat = api_server.cat
    # The page is an entry of the UI's navigation, and shows the catalog.
    browser.wait_for("[...document.querySelectorAll('a[href]')].some(a => a.getAttribute('href').endsWith('plugin/colocation'))",
                     "a 'Colocation' link in Airflow's navigation")
    seen = browser.wait_for(IN_FRAME, "the group table and the map inside the Colocation view")
    groups = cat.groups.list()
    assert seen["groups"] == [[g.group_id, g.full_name, str(g.stable).lower()] for g in groups]
    assert seen["mapGroup"] == "1.2"  # the unstable group is shown first
    assert sorted(seen["cells"]) == expected_cells(cat, "1.2")
    assert seen["backends"] == [b.id for b in cat.backends.list()]
    # writes are listed with the balance jobs, running first
    assert seen["jobs"] == [[j.id, j.kind, j.state] for j in
                            sorted(cat.jobs.list(kinds=["write", "relocate", "balance", "repair"]),
                                   key=lambda j: (j.state != "running", -j.id))]
    assert not dark(seen["background"]) and seen["theme"] == "light"  # Airflow's light theme, passed on

    # Choose another group in the table: its map replaces the first one.
    browser.evaluate(f"{FRAME}.querySelector('tr[data-group-id=\"1.1\"] a').click()")
    seen = browser.wait_for(f"(() => {{ const p = {IN_FRAME}; return p && p.mapGroup === '1.1' ? p : null }})()",
                            "the map of group 1_g_orders after clicking it")
    assert sorted(seen["cells"]) == expected_cells(cat, "1.1")
    assert "down" in {c[3] for c in seen["cells"]}  # be4 is down: its cells are drawn as such
    # Airflow's URL follows the iframe, so this view can be bookmarked and shared
    assert browser.evaluate("location.pathname + location.search") == "/plugin/colocation/api/colocate/ui?group=1.1"

    # Airflow switched to dark mode: the page follows at once, without a reload.
    browser.evaluate("document.documentElement.classList.replace('light', 'dark')")
    seen = browser.wait_for(f"(() => {{ const p = {IN_FRAME}; return p && p.theme === 'dark' ? p : null }})()",
                            "the page following Airflow's dark theme")
    browser.wait_for(f"(() => {{ const d = {FRAME}; const c = getComputedStyle(d.body).backgroundColor;"
                     f" return c !== 'rgb(255, 255, 255)' ? c : null }})()", "a dark page background")
    assert dark(browser.evaluate(f"getComputedStyle({FRAME}.body).backgroundColor"))
    browser.evaluate("document.documentElement.classList.replace('dark', 'light')")
    # (the screenshots of the page inside Airflow are taken with a backend marked down, below)


def test_the_colocation_link_opens_the_group_inside_airflow(api_server, browser, output_dir):
    """A task's "Colocation" button (links.page_url) keeps Airflow's navigation around the page
    and shows the group the task worked on."""
    link = page_url("1_g_orders")
    assert link.startswith("/plugin/colocation/")
    browser.goto(api_server.base + link)
    seen = browser.wait_for(f"(() => {{ const p = {IN_FRAME}; return p && p.mapGroup === '1.1' ? p : null }})()",
                            "the Colocation view on group 1_g_orders, opened from the link")
    assert seen["href"].endswith("/api/colocate/ui?group=1_g_orders")
    assert browser.evaluate("!!document.querySelector('nav, [role=navigation]') || "
                            "[...document.querySelectorAll('a[href]')].some(a => a.getAttribute('href').endsWith('/dags'))")


IFRAME = 'iframe[title="Colocation"]'
TOP_PATH = "location.pathname + location.search"


def open_in_airflow(api_server, browser, query: str = "") -> None:
    browser.goto(f"{api_server.base}/plugin/colocation{query}")
    browser.wait_for(IN_FRAME, "the Colocation page inside Airflow")


def test_every_link_on_the_embedded_page_works_with_a_real_click(api_server, browser, output_dir):
    """Issue 30: inside Airflow the page is in an iframe sandboxed without allow-top-navigation, so
    the browser ignores ``target=_top``. Each kind of link is clicked as a person would (CDP mouse
    events at the link's place on screen, not ``element.click()``) and the top window must land on
    its target: the API docs, a task instance's page named by Recent changes, and a group of the
    page itself (which stays in the frame, Airflow's URL following it). A middle and a Ctrl click
    open the target in a new tab and leave Airflow where it is; on the page on its own a link works
    as on any page."""
    run_id = "manual__2026-11-24T14:00:00+00:00"
    actor = task_actor("colocate_maintenance", "balance", run_id)
    as_task = Catalog(api_server.cat.url, actor=actor)  # a change made by a task: Recent changes links it
    as_task.partitions.set_retention("orders", 400)
    as_task.dispose()
    task_page = f"/dags/colocate_maintenance/runs/{quote(run_id, safe='')}/tasks/balance"
    links = [("the API link", 'header a[href$="/api/colocate/docs"]', "/api/colocate/docs"),
             ("a task of Recent changes", f'td.who a[title="{actor}"]', task_page)]
    for what, selector, target in links:
        open_in_airflow(api_server, browser)
        x, y = browser.center_of(selector, frame=IFRAME)
        browser.click(x, y)
        browser.wait_for(f"{TOP_PATH} === {json.dumps(target)}", f"Airflow's window on {target} after clicking {what}")
        if target.endswith("/docs"):  # issue 47: the reference shows offline (Swagger's CDN page was blank)
            browser.wait_for("document.body.innerText.includes('GET /api/colocate/groups/{group}')"
                             " && document.querySelectorAll('h3').length > 20", "the API reference, offline")
            assert browser.evaluate("document.querySelectorAll('script[src]').length") == 0

    # a group of the table: the page's own link, it stays inside Airflow's frame
    open_in_airflow(api_server, browser)
    browser.click(*browser.center_of('tr[data-group-id="1.1"] a', frame=IFRAME))
    browser.wait_for(f"{TOP_PATH} === '/plugin/colocation/api/colocate/ui?group=1.1'", "Airflow's URL on group 1.1")
    browser.wait_for(f"(() => {{ const p = {IN_FRAME}; return p && p.mapGroup === '1.1' }})()", "the map of group 1.1")

    # issue 47: a table, a backend and a job each open their own view, inside Airflow's frame
    for selector, kind, text in (('#tables tr[data-table-id] td:nth-child(2) a', "table", "Schema history"),
                                 ('#backends tr[data-backend-id] td a[href^="?backend="]', "backend", "State and probe history"),
                                 ('#jobs tr[data-job-id] td a[href^="?job="]', "job", "Progress")):
        open_in_airflow(api_server, browser)
        browser.click(*browser.center_of(selector, frame=IFRAME))
        browser.wait_for(f"(() => {{ const d = {FRAME}?.getElementById('detail');"
                         f" return d && d.dataset.kind === '{kind}' && d.innerText.includes('{text}') }})()",
                         f"the {kind}'s own view after a click")

    # a new tab for a middle or Ctrl click; Airflow stays on the page
    for button, modifiers in (("middle", ()), ("left", ("ctrl",))):
        open_in_airflow(api_server, browser)
        before = {t["targetId"] for t in browser.targets()}
        browser.click(*browser.center_of(links[1][1], frame=IFRAME), button=button, modifiers=modifiers)
        deadline, opened = time.monotonic() + 15, []
        while time.monotonic() < deadline:  # the new tab, once it is on the task's page
            opened = [t for t in browser.targets() if t["targetId"] not in before]
            if opened and opened[0]["url"].endswith(task_page):
                break
            time.sleep(0.25)
        assert opened and opened[0]["url"].endswith(task_page), f"a {button} {modifiers} click opened {opened}"
        browser.send("Target.closeTarget", targetId=opened[0]["targetId"])
        assert browser.evaluate(TOP_PATH).startswith("/plugin/colocation")

    # on its own (no iframe) the same link is an ordinary link
    browser.goto(f"{api_server.base}/api/colocate/ui")
    browser.wait_for(ON_ITS_OWN, "the page on its own")
    browser.click(*browser.center_of(links[1][1]))
    browser.wait_for(f"{TOP_PATH} === {json.dumps(task_page)}", "the task's page from the page on its own")


def test_times_follow_the_time_zone_chosen_in_airflow(api_server, browser):
    """Issue 47: Airflow's UI keeps the user's time zone in the browser (localStorage "timezone");
    the page, inside Airflow, shows its times in that zone and says which, with the UTC time in
    each tooltip. Chosen as a user does it in Airflow's own settings, that store is what changes."""
    from datetime import datetime, timezone
    from zoneinfo import ZoneInfo

    open_in_airflow(api_server, browser)
    try:
        browser.evaluate("localStorage.setItem('timezone', JSON.stringify('Asia/Tokyo')), true")
        open_in_airflow(api_server, browser)
        seen = browser.wait_for(f"""(() => {{ const d = {FRAME}; const t = d?.querySelector('#refreshed-at time');
            const z = d?.getElementById('time-zone')?.textContent;
            return t && z === 'Asia/Tokyo' ? {{text: t.textContent, title: t.title, iso: t.getAttribute('datetime')}}
                                           : null; }})()""", "the page's times in Asia/Tokyo")
        at = datetime.fromisoformat(seen["iso"]).astimezone(timezone.utc)
        assert seen["text"] == at.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%H:%M:%S"), seen
        assert seen["title"].startswith(at.strftime("%Y-%m-%dT%H:%M:%SZ (UTC)")) and "Asia/Tokyo" in seen["title"], seen
    finally:
        browser.evaluate("localStorage.removeItem('timezone'), true")
    open_in_airflow(api_server, browser)  # without a choice: the browser's zone (UTC here), as Airflow's default
    browser.wait_for(f"{FRAME}?.getElementById('time-zone')?.textContent === "
                     "Intl.DateTimeFormat().resolvedOptions().timeZone", "the browser's own zone")


def test_a_backend_marked_down_says_why_and_what_happens_next(api_server, browser, output_dir):
    """Issue 30: ``colocate backend mark-down be2 --reason "disk pulled"``, and the page inside
    Airflow shows be2's reason, since when, its last heartbeat; the group whose map names be2 counts
    down to its relocation and says its joins shuffle now; a replication-1 table outside any group
    lists the partition whose only copy was on be2. The doc screenshots are taken here."""
    cat = api_server.cat
    cat.tables.create("raw_clicks", [("id", "bigint"), ("dt", "date")], ["id"], bucket_num=3, replication_num=1,
                      partition_cols=["dt"])
    commit_fake_write(cat, "raw_clicks", "2026-11-24", bytes_per_replica=1500)
    cat.health.record_probe("be2", True)  # its last heartbeat, before the disk went
    mark = subprocess.run([str(Path(sys.executable).parent / "colocate"), "--catalog", cat.url, "--actor", "oncall",
                           "backend", "mark-down", "be2", "--reason", "disk pulled"],
                          capture_output=True, text=True, timeout=60)
    assert mark.returncode == 0, mark.stderr
    lost = cat.tables.unavailable("raw_clicks")
    assert lost.count == 1 and lost.partitions == ("2026-11-24",) and lost.backends == ("be2",), lost
    outlook = cat.groups.outlook("1.1")  # g_orders: 8 buckets × 2 on be1..be4
    assert outlook.relocation_starts_at is not None and outlook.joins_shuffle, outlook
    be2 = cat.backends.get("be2")

    open_in_airflow(api_server, browser, "/api/colocate/ui?group=1.1")
    seen = browser.wait_for(f"""(() => {{ const d = {FRAME};
        const row = s => d?.querySelector(s)?.innerText.replace(/\s+/g, ' ').trim();
        const be = row('tr[data-backend-id="{be2.id}"]');
        return be && be.includes('disk pulled') ? {{backend: be, group: row('tr[data-group-id="1.1"]'),
            next: row('#map-next'), table: row('tr[data-table-id="{lost.table_id}"]'), head: row('header')}} : null; }})()""",
                            "be2's reason on the page")
    since = be2.state_since.strftime("%H:%M:%S")
    assert re.search(rf"down .*disk pulled.* since {since} \((now|\d+ s ago|1 min ago)\)", seen["backend"]), seen
    assert f"last heartbeat {be2.last_heartbeat.strftime('%H:%M:%S')}" in seen["backend"], seen
    starts = outlook.relocation_starts_at
    minutes = round((starts - cat.now()).total_seconds() / 60)
    countdown = re.search(r"relocation starts in (\d+) min \((\d\d:\d\d:\d\d)\)", seen["group"])
    assert countdown and countdown.group(2) == starts.strftime("%H:%M:%S"), seen["group"]
    assert abs(int(countdown.group(1)) - minutes) <= 1 and timedelta(minutes=minutes) <= timedelta(minutes=30)
    assert "joins shuffle now" in seen["group"] and "relocation starts in" in seen["next"], seen
    assert "2026-11-24" in seen["table"] and "only copies on be2" in seen["table"], seen["table"]
    assert re.search(r"\d+ partitions? unavailable", seen["head"]), seen["head"]
    shoot(browser, output_dir, "colocation-in-airflow.png")

    # dark, scrolled to the backends and tables: the reason, the heartbeat, the unavailable partition
    browser.evaluate("document.documentElement.classList.replace('light', 'dark')")
    browser.wait_for(f"(() => {{ const p = {IN_FRAME}; return p && p.theme === 'dark' }})()", "the dark theme")
    browser.evaluate(f"{FRAME}.querySelector('table#backends').scrollIntoView({{block: 'start'}})")
    shoot(browser, output_dir, "colocation-in-airflow-dark.png")
    browser.evaluate("document.documentElement.classList.replace('dark', 'light')")
    cat.backends.set_state("be2", "alive", reason="disk back")  # the next tests' 16 backends are all alive


def test_the_page_on_its_own_in_dark_mode_and_at_512_buckets(api_server, browser, output_dir, tmp_path):
    cat = api_server.cat
    for i in range(5, 17):  # 16 backends, one group of 512 buckets with two replicas
        (tmp_path / f"be{i}").mkdir()
        cat.backends.add((tmp_path / f"be{i}").as_uri(), name=f"be{i}")
    cat.backends.set_state("be4", "alive")
    cat.tables.create("events", [("user_id", "bigint")], ["user_id"], bucket_num=512, replication_num=2,
                     colocate_with="g_events")
    commit_fake_write(cat, "events", "all")
    ref = cat.groups.get("g_events").group_id

    # The browser prefers dark: the page on its own (no Airflow around it) follows that.
    browser.send("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
    browser.goto(f"{api_server.base}/api/colocate/ui?group={ref}")
    seen = browser.wait_for(ON_ITS_OWN, "the 512-bucket map on its own")
    assert seen["view"] == "heatmap" and seen["totals"] == totals(cat, ref)
    assert dark(seen["background"]) and seen["theme"] is None  # from prefers-color-scheme alone
    # every backend's total is on screen without scrolling, and the whole map fits the window
    box = browser.evaluate("""(() => { const s = document.querySelector('svg.bucket-map');
        s.scrollIntoView({block: 'start'}); const r = s.getBoundingClientRect();
        const t = [...s.querySelectorAll('text.total')].map(e => e.getBoundingClientRect());
        return {top: r.top, bottom: r.bottom, right: r.right, h: innerHeight, w: innerWidth,
                totalsIn: t.every(b => b.top >= 0 && b.bottom <= innerHeight && b.right <= innerWidth), n: t.length}; })()""")
    assert box["n"] == 16 and box["totalsIn"], box
    assert box["bottom"] - box["top"] <= box["h"] and box["right"] <= box["w"], box
    shoot(browser, output_dir, "colocation-512-buckets-dark.png")

    browser.send("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "light"}])
    browser.goto(f"{api_server.base}/api/colocate/ui?group=1.1")
    seen = browser.wait_for(ON_ITS_OWN, "the page on its own, light")
    assert not dark(seen["background"])
    shoot(browser, output_dir, "colocation-page.png", full_page=True)

    # Auto-refresh: ticked (here by ?refresh=5 for a quick test), the page reloads by itself.
    browser.goto(f"{api_server.base}/api/colocate/ui?group=1.1&refresh=5")
    first = browser.wait_for("document.getElementById('refreshed-at')?.dataset.rendered", "the page's time")
    assert browser.evaluate("document.getElementById('auto-refresh').checked")
    browser.wait_for(f"(() => {{ const t = document.getElementById('refreshed-at')?.dataset.rendered;"
                     f" return t && t !== {json.dumps(first)} ? t : null }})()", "the page reloading itself", timeout=30)
    browser.evaluate("document.getElementById('auto-refresh').click()")  # off again, and remembered
    assert browser.evaluate("localStorage.getItem('colocate.autoRefresh')") == "0"


TRIGGER_DIALOG = "[...document.querySelectorAll('[role=dialog]')].find(d => /Trigger Dag/.test(d.innerText))"


def test_trigger_the_maintenance_dag_with_only_action_chosen(api_server, browser, output_dir):
    """Issue 16's first "done when": the form submits with only ``action`` chosen and the run
    succeeds. The api-server has no scheduler here; the run the form created is executed by
    ``dag.test()`` with its logical date, run_after and conf (RUNNER), which re-creates it under
    the same run id and runs every task for real (against a catalog of its own)."""
    api_server.wait_runner()  # the DAG is in Airflow's database
    browser.goto(f"{api_server.base}/dags/colocate_maintenance")
    browser.wait_for("[...document.querySelectorAll('button')].some(b => b.getAttribute('aria-label') === 'Trigger Dag')",
                     "the DAG page's Trigger button", timeout=90)
    browser.evaluate("[...document.querySelectorAll('button')].find(b => b.getAttribute('aria-label') === 'Trigger Dag').click()")
    browser.wait_for(f"!!({TRIGGER_DIALOG})?.querySelector('input[name=element_action]')", "the trigger form")
    # choose only the action: type into its combobox and pick the option
    browser.evaluate(f"({TRIGGER_DIALOG}).querySelector('input[role=combobox]').focus()")
    browser.send("Input.insertText", text="rep")
    browser.wait_for("[...document.querySelectorAll('[role=option]')].some(o => o.innerText.trim() === 'repair')",
                     "the 'repair' option")
    browser.evaluate("[...document.querySelectorAll('[role=option]')].find(o => o.innerText.trim() === 'repair').click()")
    browser.wait_for("document.querySelector('input[name=element_action]').value === 'repair'", "action = repair")
    for name in ("group", "table", "backend"):  # left empty, and not required
        assert browser.evaluate(f"document.querySelector('input[name=element_{name}]').value") == ""
    button = f"[...({TRIGGER_DIALOG}).querySelectorAll('button')].find(b => b.innerText.trim() === 'Trigger')"
    assert browser.evaluate(f"!{button}.disabled")
    shoot(browser, output_dir, "trigger-form.png")
    browser.evaluate(f"{button}.click()")
    browser.wait_for("location.pathname.startsWith('/dags/colocate_maintenance/runs/')", "the new run's page")
    run_id = browser.evaluate("decodeURIComponent(location.pathname.split('/runs/')[1].split('/')[0])")

    run = api_server.api(f"/api/v2/dags/colocate_maintenance/dagRuns/{run_id}")
    assert run["conf"] == {"action": "repair", "dry_run": False, "relocate_now": False, "group": None, "table": None,
                           "backend": None, "today": None, "strategy": "count", "alert_after_minutes": None}

    # Run it (see RUNNER): the tasks run for real against the run's own catalog.
    result = run_in_helper(api_server, run)
    assert result["run_id"] == run_id and result["state"] == "success", result
    assert result["tasks"] == {"check_params": "success", "choose": "success", "balance": "success", "probe": "skipped",
                               "decommission": "skipped", "verify": "skipped", "retention": "skipped",
                               "alert": "success"}, result  # the alert task runs on every run

    # and the UI shows that run as a success
    assert api_server.api(f"/api/v2/dags/colocate_maintenance/dagRuns/{run_id}")["state"] == "success"
    browser.goto(f"{api_server.base}/dags/colocate_maintenance/runs/{run_id}")
    browser.wait_for("(() => { const t = document.body.innerText;"
                     " return t.includes('Task Instances') && t.includes('balance') && /Success/.test(t); })()",
                     "the run and its tasks shown as a success", timeout=90)
    time.sleep(1)  # let the grid draw
    shoot(browser, output_dir, "maintenance-run.png")


@pytest.fixture(scope="module")
def join_tables(api_server):
    """orders and lineitem (``id bigint, v string, dt date``), one partition each, in one group of
    the helper's catalog: the join DAG's task is colocated. Written as the write job would (plan,
    each row in Spark's bucket for its key, verified replicas, commit) by the balance tests' lake
    writer, with pyarrow: a Spark session here would cost more than the join itself."""
    if str(REPO / "tests" / "balance") not in sys.path:
        sys.path.append(str(REPO / "tests" / "balance"))
    from balance_lake import Clock, Lake

    cat = Catalog(api_server.run_url, actor="pytest")
    try:
        (api_server.tmp / "join-lake").mkdir()
        lake = Lake(cat, Clock(), api_server.tmp / "join-lake")
        for table, keys in (("orders", range(60)), ("lineitem", [k // 3 for k in range(180)])):
            lake.create(table, group="g_sales", buckets=2, replicas=1)
            lake.write(table, JOIN_DAY, keys)
        yield cat
    finally:
        cat.dispose()


LOG_TAB_SHOWS_EXPLAIN = ("(() => { const t = document.body.innerText;"
                         " return t.includes('colocate: true') && t.includes('bucket join') ? t : null; })()")


def test_a_join_tasks_explain_in_its_log(api_server, browser, join_tables, output_dir):
    """Issue 16: a join task's explain, as a person reads it in Airflow's UI. The run is executed
    by dag.test() in the helper (RUNNER), which writes the task's log where the api-server reads
    it; the task instance's Log tab shows the explain's lines."""
    api_server.wait_runner()
    day = f"{JOIN_DAY}T00:00:00+00:00"
    result = run_in_helper(api_server, {"dag_id": "colocate_join_explain", "logical_date": day, "run_after": day,
                                        "conf": {}})
    assert result["state"] == "success", result
    run_id, task = result["run_id"], "lines_per_order"
    xcom = api_server.api(f"/api/v2/dags/colocate_join_explain/dagRuns/{run_id}/taskInstances/{task}"
                          "/xcomEntries/return_value?deserialize=true")
    explain = xcom["value"]["explain"]
    assert xcom["value"]["rows"] == 60 and xcom["value"]["colocate"] is True, xcom  # every order has 3 lines
    assert "colocate: true" in explain and "bucket join" in explain, explain
    (output_dir / "join-explain-xcom.json").write_text(json.dumps(xcom, indent=1))
    browser.goto(f"{api_server.base}/dags/colocate_join_explain/runs/{run_id}/tasks/{task}")
    text = browser.wait_for(LOG_TAB_SHOWS_EXPLAIN, "the join task's explain in its log", timeout=90)
    for line in explain.splitlines():
        assert line.strip() in text, line
    shoot(browser, output_dir, "join-explain.png")

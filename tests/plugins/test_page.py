"""The Colocation page as rendered (issue 16, item 8), without a browser: a 512-bucket × 16-backend
group is drawn as a heatmap whose totals and cells add up to the catalog's map in a bounded height;
write jobs are listed with balance jobs; an event made by an Airflow task names its DAG, task and
run; the stylesheet has a dark theme and no hard-coded light background. The browser test
(test_browser.py) looks at the same page in Chromium, light and dark."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.actor import parse_task_actor, task_actor
from airflow_colocate.plugins.page import EXACT_MAX_BUCKETS, HEAT_ROWS, relative, render_page
from plugin_testing import build_demo_catalog, commit_fake_write

STATIC = Path(__file__).resolve().parents[2] / "airflow_colocate" / "plugins" / "static"


class Elements(HTMLParser):
    """Every element's tag and attributes, in order."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    def all(self, tag: str, **want) -> list[dict]:
        return [a for t, a in self.found if t == tag and all(want[k] in (a.get(k) or "").split() if k == "class"
                                                              else a.get(k) == v for k, v in want.items())]


def parse(html: str) -> Elements:
    p = Elements()
    p.feed(html)
    return p


@pytest.fixture
def big(tmp_path) -> Catalog:
    """16 backends, a 512-bucket group with two replicas and one backend down."""
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest")
    cat.init()
    for i in range(1, 17):
        (tmp_path / f"be{i}").mkdir()
        cat.backends.add((tmp_path / f"be{i}").as_uri(), name=f"be{i}")
    cat.tables.create("events", [("user_id", "bigint")], ["user_id"], bucket_num=512, replication_num=2,
                     colocate_with="g_events")
    commit_fake_write(cat, "events", "all")
    cat.backends.set_state("be7", "down", reason="test")
    yield cat
    cat.dispose()


def test_a_512_by_16_map_is_a_heatmap_with_every_total_on_top(big):
    g = big.groups.get("g_events")
    page = parse(render_page(big, "g_events", base="/api/colocate"))
    svg = page.all("svg", **{"class": "bucket-map"})[0]
    assert svg["data-view"] == "heatmap" and int(svg["data-buckets"]) == 512 > EXACT_MAX_BUCKETS
    # fits a laptop screen: at most HEAT_ROWS rows of 8 px under a short header
    assert int(svg["height"]) <= 720 and int(svg["width"]) <= 1200, (svg["width"], svg["height"])

    want_total, want_primary = {}, {}
    for row in g.bucket_map:
        for i, be in enumerate(row):
            want_total[be] = want_total.get(be, 0) + 1
            want_primary[be] = want_primary.get(be, 0) + (i == 0)
    totals = page.all("text", **{"class": "total"})
    assert {int(t["data-backend"]): int(t["data-total"]) for t in totals} == want_total
    assert {int(t["data-backend"]): int(t["data-primary"]) for t in totals} == want_primary

    cells = [c for c in page.all("rect", **{"class": "heat"}) if "data-from" in c]  # not the legend
    ranges = sorted({(int(c["data-from"]), int(c["data-to"])) for c in cells})
    assert len(ranges) <= HEAT_ROWS and ranges[0][0] == 0 and ranges[-1][1] == 511
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))  # the ranges tile the buckets
    for be, total in want_total.items():  # every replica is counted in exactly one cell
        assert sum(int(c["data-count"]) for c in cells if int(c["data-backend"]) == be) == total
    down = big.backends.get("be7").id
    assert {c["class"] for c in cells if int(c["data-backend"]) == down} == {"heat down"}
    assert page.all("p", id="heatmap-note")


def test_a_small_map_keeps_one_row_per_bucket(tmp_path):
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    page = parse(render_page(cat, "1.1"))
    assert page.all("svg", **{"class": "bucket-map"})[0]["data-view"] == "exact"
    cells = [(int(c["data-bucket"]), int(c["data-replica"]), int(c["data-backend"]))
             for c in page.all("rect", **{"class": "cell"}) if "data-bucket" in c]
    assert sorted(cells) == sorted((s, i, be) for s, row in enumerate(cat.groups.get("1.1").bucket_map)
                                   for i, be in enumerate(row))
    cat.dispose()


def test_write_jobs_are_listed_with_balance_jobs(tmp_path):
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    running = cat.writes.begin("dim.region", "all")  # a write in flight (its backends are alive)
    page = parse(render_page(cat, None))
    rows = [(int(r["data-job-id"]), r["data-kind"], r["data-state"]) for r in page.all("tr") if "data-job-id" in r]
    jobs = {j.id: j for j in cat.jobs.list()}
    assert {(i, j.kind, j.state) for i, j in jobs.items()} == set(rows)
    assert [state for _, _, state in rows][:2] == ["running", "running"]  # running ones first
    assert {kind for _, kind, _ in rows} == {"write", "relocate"}
    html = render_page(cat, None)
    assert "dim.region/all v1" in html and "default.lineitem/2026-11-01 v1" in html
    assert "80 rows" in html  # a committed write's rows
    assert jobs[running.job_id].subject == "dim.region/all v1"
    cat.dispose()


def test_an_event_made_by_a_task_names_its_dag_task_and_run(tmp_path):
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    run_id = "manual__2026-11-23T10:00:00+00:00"
    actor = task_actor("colocate_maintenance", "balance", run_id)
    assert parse_task_actor(actor) == {"dag_id": "colocate_maintenance", "task_id": "balance", "run_id": run_id}
    assert parse_task_actor("pytest") is None and parse_task_actor("airflow") is None
    as_task = Catalog(cat.url, actor=actor)
    as_task.backends.set_state("be3", "down", reason="probe: root missing")
    page = parse(render_page(cat, None, base="/airflow/api/colocate"))
    links = [a for a in page.all("a") if a.get("title") == actor]
    assert len(links) == 1
    assert links[0]["href"] == ("/airflow/dags/colocate_maintenance/runs/manual__2026-11-23T10%3A00%3A00%2B00%3A00"
                                "/tasks/balance") and links[0]["target"] == "_top"
    html = render_page(cat, None)
    assert f"DAG colocate_maintenance · task balance · run {run_id}" in html
    as_task.dispose()
    cat.dispose()


def test_the_stylesheet_has_a_dark_theme_and_no_fixed_white():
    css = (STATIC / "colocation.css").read_text()
    assert "@media (prefers-color-scheme: dark)" in css and ':root[data-theme="dark"]' in css
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    # colours are only defined in the theme blocks; everything else uses the variables
    outside = re.sub(r":root[^{]*\{[^}]*\}", "", re.sub(r"@media[^{]*\{(.*?\})\s*\}", "", rules, flags=re.S))
    fixed = re.findall(r"#[0-9a-fA-F]{3,6}\b|:\s*white\b|\brgb\(", outside)
    assert not fixed, fixed
    js = (STATIC / "colocation.js").read_text()
    assert "prefers-color-scheme" in js and "window.parent.document.documentElement" in js


def text_of(html: str, element_id: str | None = None, attr: str | None = None) -> str:
    """The visible text of the page (or of the element whose opening tag has ``attr``), tags gone."""
    if attr is not None:
        start = html.index(attr)
        html = html[html.rindex("<", 0, start):]
        tag = re.match(r"<(\w+)", html).group(1)
        html = html[:html.index(f"</{tag}>") + len(tag) + 3]
    html = re.sub(r"<title>.*?</title>", "", html, flags=re.S)
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    return re.sub(r"\( | \)| (?=[:,])", lambda m: m.group().strip(), text)  # "( 1 min ago )" -> "(1 min ago)"


class Clock:
    def __init__(self, at: datetime):
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def disk_pulled(tmp_path):
    """The demo catalog on a clock, a replication-1 table outside any group with a bucket on be2,
    and be2 marked down "disk pulled" at 14:02 (be4 is down already)."""
    demo = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    clock = Clock(datetime(2026, 11, 24, 14, 2, tzinfo=timezone.utc))
    cat = Catalog(demo.url, actor="root", clock=clock)
    cat.tables.create("raw_events", [("id", "bigint")], ["id"], bucket_num=4, replication_num=1)
    commit_fake_write(cat, "raw_events", "all")
    cat.backends.set_state("be2", "down", reason="disk pulled")
    yield cat, clock
    cat.dispose()
    demo.dispose()


def test_a_down_backend_says_why_since_when_and_what_happens_next(disk_pulled):
    """Issue 30: the reason given at mark-down, since when, the last heartbeat and probe; the
    unstable group's countdown to relocation and that its joins shuffle now; the partitions of a
    replication-1 table that no read can serve."""
    cat, clock = disk_pulled
    clock.at += timedelta(minutes=1)  # the page is read a minute later
    html = render_page(cat, "1_g_orders", delay=timedelta(minutes=30))
    be2 = cat.backends.get("be2").id
    row = text_of(html, attr=f'data-backend-id="{be2}"')
    assert "down" in row and "disk pulled" in row and "since 14:02:00 (1 min ago)" in row, row
    assert "last heartbeat never" in row and "not probed yet" in row, row
    assert 'data-reason="disk pulled"' in html

    orders = text_of(html, attr='data-group-id="1.1"')  # on be1..be4: be2 down a minute ago, be4 earlier
    assert "relocation starts in 29 min (14:32:00): its buckets leave be2" in orders, orders
    assert "joins shuffle now" in orders, orders
    assert "relocation starts in 29 min (14:32:00)" in text_of(html, attr='id="map-next"')  # the chosen group

    raw = cat.tables.get("raw_events")
    lost = cat.tables.unavailable("raw_events")
    assert lost.count == 1 and lost.partitions == ("all",) and lost.backends == ("be2",), lost
    row = text_of(html, attr=f'data-table-id="{raw.id}"')
    assert "1: all (only copies on be2, not alive)" in row and "(1 replica)" in row, row
    assert 'data-unavailable="1"' in html and re.search(r"\b\d+ partitions? unavailable", text_of(html))
    assert "readable nowhere else" in text_of(html, attr=f'data-backend-id="{be2}"')

    # past the delay: the next balance run relocates, no countdown any more
    clock.at += timedelta(minutes=30)
    orders = text_of(render_page(cat, None, delay=timedelta(minutes=30)), attr='data-group-id="1.1"')
    assert "relocation due: the next balance or repair run moves its buckets off" in orders and "starts in" not in orders


def test_the_probes_finding_is_shown_apart_from_the_state(disk_pulled):
    cat, clock = disk_pulled
    cat.health.record_probe("be2", True)  # the disk answers again, but an operator marked it down
    cat.health.record_probe("be3", False, "root missing: /data/be3")
    html = render_page(cat, None, delay=timedelta(minutes=30))
    be2 = text_of(html, attr=f'data-backend-id="{cat.backends.get("be2").id}"')
    assert "down" in be2 and "disk pulled" in be2 and "last probe 14:02:00: ok" in be2, be2
    be3 = text_of(html, attr=f'data-backend-id="{cat.backends.get("be3").id}"')
    assert "last probe 14:02:00: failed root missing: /data/be3" in be3, be3


def test_times_stay_on_one_line_and_read_relative():
    css = (STATIC / "colocation.css").read_text()
    assert re.search(r"time\.ts[^{]*\{[^}]*white-space: nowrap", css)
    now = datetime(2026, 11, 24, 14, 2, tzinfo=timezone.utc)
    assert [relative(now + timedelta(seconds=d), now) for d in (1, -30, 29 * 60, -3 * 60, -125 * 60, 3 * 86400)] == [
        "now", "30 s ago", "in 29 min", "3 min ago", "2 h 5 min ago", "in 3 days"]


def test_the_jobs_and_events_times_are_short_and_unwrapped(tmp_path):
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    html = render_page(cat, None)
    jobs = html[html.index('<table id="jobs">'):]
    stamps = re.findall(r'<time class="ts" datetime="([^"]+)"[^>]*>([^<]+)</time>', jobs)
    assert stamps and all(len(short) <= 16 and "T" not in short for _, short in stamps), stamps
    cat.dispose()


def test_a_small_map_uses_its_width_and_primary_is_explained(tmp_path):
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    html = render_page(cat, "1.1")
    page = parse(html)
    svg = page.all("svg", **{"class": "bucket-map"})[0]
    cells = [c for c in page.all("rect", **{"class": "col"})]
    used = sum(float(c["width"]) for c in cells)
    assert len(cells) == 4 and used >= 0.8 * int(svg["width"]), (used, svg["width"])  # columns, not blank
    assert "chosen to spread the reads over the backends" in text_of(html)  # issue 47: not "reads the primary"
    assert re.search(r'<g class="legend-item"><title>primary replica: the first backend', html)
    # the dot marks the replica each bucket is read from: the planner's choice, alive backends only (be4 is down)
    from airflow_colocate.placement.replica_choice import choose_replicas

    g = cat.groups.get("1.1")
    alive = {b.id for b in cat.backends.list() if b.state == "alive"}
    marked = {int(c["data-bucket"]): int(c["data-backend"]) for c in page.all("circle", **{"class": "reads"})
              if "data-bucket" in c}
    assert marked == dict(enumerate(choose_replicas(g.bucket_map, alive))), marked
    assert any(marked[seq] != row[0] for seq, row in enumerate(g.bucket_map) if row[0] in alive)  # not always the primary
    cat.dispose()


def test_who_marked_a_backend_is_named_wherever_its_reason_is_shown(disk_pulled):
    """Issue 47: a backend marked down by qa-alice shows "(qa-alice)" beside its reason, not
    "(operator)", and the group's reason names her instead of "admin"; the recover hint is real."""
    cat, clock = disk_pulled
    alice = Catalog(cat.url, actor="qa-alice", clock=clock)
    alice.backends.set_state("be3", "down", reason="disk swap")
    cat.health.check_groups()
    html = render_page(cat, "1_g_orders")
    be3 = cat.backends.get("be3").id
    row = text_of(html, attr=f'data-backend-id="{be3}"')
    assert "disk swap" in row and "(qa-alice)" in row and "(operator)" not in row, row
    be2 = text_of(html, attr=f'data-backend-id="{cat.backends.get("be2").id}"')
    assert "(root)" in be2, be2  # the fixture's actor marked be2
    orders = text_of(html, attr='data-group-id="1.1"')
    assert "(root: disk pulled)" in orders and "(admin:" not in orders, orders
    alice.dispose()


def test_recent_changes_say_what_changed_skip_no_op_gc_and_page_back(tmp_path):
    """Issue 47: each change's detail is shown; a gc run that found nothing records no event; older
    changes are a link away (``?events_before=<id>``)."""
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    before = len(cat.events(limit=1000))
    cat.writes.forget_garbage([])  # gc that found nothing
    assert len(cat.events(limit=1000)) == before
    for days in range(30, 42):
        cat.partitions.set_retention("orders", days)
    html = render_page(cat, None)
    rows = parse(html).all("tr")
    shown = [int(r["data-event-id"]) for r in rows if "data-event-id" in r]
    assert len(shown) == 10 and shown == sorted(shown, reverse=True)
    newest = text_of(html, attr=f'data-event-id="{shown[0]}"')
    assert "old=40 new=41" in newest, newest
    older = re.search(r'id="older-events" href="\?(?:group=[^&]*&amp;)?events_before=(\d+)"', html)
    assert older and int(older.group(1)) == shown[-1], html[-800:]
    page2 = render_page(cat, None, events_before=int(older.group(1)))
    second = [int(r["data-event-id"]) for r in parse(page2).all("tr") if "data-event-id" in r]
    assert second and max(second) < min(shown) and "newest changes" in text_of(page2)
    cat.dispose()


def test_tables_backends_and_jobs_link_to_their_own_views(tmp_path):
    """Issue 47: each name links to its view: a table's partitions, schema history and dropped
    partitions; a backend's replicas and state history with who; a job's progress and the task
    (DAG run) that started it."""
    cat = build_demo_catalog(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "backends")
    html = render_page(cat, None)
    assert 'href="?table=default.orders"' in html and 'href="?backend=be4"' in html
    job = cat.jobs.list(kinds=["relocate"])[0]
    assert f'href="?job={job.id}"' in html

    cat.partitions.set_retention("orders", 90)
    cat.partitions.drop("orders", "2026-11-01")
    table = text_of(render_page(cat, None, table="default.orders"), attr='id="detail"')
    assert "table default.orders" in table and "Schema history" in table and "v1" in table, table
    assert "colocate partition recover default.orders 2026-11-01" in table, table

    backend = text_of(render_page(cat, None, backend="be4"), attr='id="detail"')
    assert "backend be4" in backend and "down" in backend and "backend.state" in backend and "pytest" in backend, backend

    run_id = "scheduled__2026-11-24T00:00:00+00:00"
    as_task = Catalog(cat.url, actor=task_actor("colocate_maintenance", "balance", run_id))
    users = as_task.groups.get("g_orders")
    started = as_task.balance.create(users.grp_id, "balance", {"old_map": [list(r) for r in users.bucket_map],
                                                               "new_map": [list(r) for r in users.bucket_map], "moves": []})
    view = render_page(cat, None, job=started.id)
    assert "DAG colocate_maintenance · run " + run_id in text_of(view, attr='id="detail"'), text_of(view, attr='id="detail"')
    assert 'id="job-started-by" href="/dags/colocate_maintenance/runs/' in view
    assert "job 999" in render_page(cat, None, job=999) and 'id="detail-problem"' in render_page(cat, None, job=999)
    as_task.dispose()
    cat.dispose()

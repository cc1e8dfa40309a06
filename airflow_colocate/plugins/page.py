"""The Colocation page: groups and why they are unstable, a bucket × backend picture of one
group's map, backends' load against capacity, write and balance jobs, and recent changes with who
made them (the DAG, task and run, for changes made by Airflow tasks).

It also says what is wrong and what happens next, as the on-call engineer asks it: why each
backend is in its state, since when, its last heartbeat and probe; since when a group is unstable,
when balance starts relocating its buckets and whether its joins shuffle now; which partitions no
read can serve (their only copies on backends that are not alive).

Rendered on the server (Jinja2 template and an inline SVG), so the page is complete without
scripts and a test can read the same numbers the catalog holds. One small script
(``static/colocation.js``) follows Airflow's light/dark theme, runs the auto-refresh toggle, keeps
the "in 29 min" / "3 min ago" times current, and makes links out of the page work inside Airflow's
sandboxed iframe.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from html import escape
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from airflow_colocate import __version__
from airflow_colocate.catalog import Catalog
from airflow_colocate.model.layouts import describe_layouts
from airflow_colocate.model.views import BALANCE_KINDS, GroupView
from airflow_colocate.core.actor import parse_task_actor
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.core.times import utc
from airflow_colocate.core.web import PREFIX
from airflow_colocate.plugins.detail import detail_of
from airflow_colocate.plugins.presenters import backends_with_load, group_model, group_reasons, job_model, table_names
from airflow_colocate.plugins.schemas import GROUP_REF

TEMPLATES = Path(__file__).parent / "templates"
JOB_KINDS = ("write", *BALANCE_KINDS)
RECENT_JOBS = 12

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))

PRIMARY_MEANS = ("primary replica: the first backend of a bucket's list. A colocated join reads each bucket from "
                 "one alive replica, chosen to spread the reads over the backends (placement/replica_choice.py), "
                 "so not always the primary: the dot marks the replica it reads now (on a cluster with local reads "
                 "the choice also follows the executors' hosts)")


def relative(ts: datetime | None, now: datetime) -> str:
    """``in 29 min`` / ``3 min ago`` / ``2 h 5 min ago`` / ``4 days ago``: how far from now, in
    the largest unit that reads well (colocation.js recomputes it while the page stays open)."""
    if ts is None:
        return ""
    seconds = (utc(ts) - utc(now)).total_seconds()
    n = abs(seconds)
    if n < 45:
        return "now" if n < 5 else (f"in {n:.0f} s" if seconds > 0 else f"{n:.0f} s ago")
    if n < 90 * 60:
        text = f"{n / 60:.0f} min"
    elif n < 48 * 3600:
        h, m = divmod(round(n / 60), 60)
        text = f"{h} h {m} min" if m else f"{h} h"
    else:
        text = f"{n / 86400:.0f} days"
    return f"in {text}" if seconds > 0 else f"{text} ago"


def when(ts: datetime | None, now: datetime, *, rel: bool = False) -> Markup:
    """A time on one line (never wrapped mid-date): ``14:32:05`` today, else ``2026-11-24 14:32``,
    UTC as the catalog stores it, the exact ISO time in its tooltip; with ``rel``, how far from now
    as well (``14:32:05 (3 min ago)``)."""
    if ts is None:
        return Markup('<span class="muted">never</span>')
    ts, now = utc(ts), utc(now)
    short = ts.strftime("%H:%M:%S") if ts.date() == now.date() else ts.strftime("%Y-%m-%d %H:%M")
    iso = ts.isoformat(timespec="seconds")
    after = f' (<span class="rel" data-at="{escape(iso)}">{escape(relative(ts, now))}</span>)' if rel else ""
    return Markup(f'<time class="ts" datetime="{escape(iso)}" title="{escape(iso)} (UTC)">{escape(short)}</time>{after}')


SETTERS_SCANNED = 500  # backend.state events read for who set each backend's state


def state_setters(catalog) -> dict[str, str]:
    """Backend name -> the actor of its latest state change (``airflow:qa-alice``, ``oncall``)."""
    out: dict[str, str] = {}
    for e in catalog.events(limit=SETTERS_SCANNED, kind="backend.state"):
        out.setdefault(e.subject, e.actor)
    return out


_ADMIN_REASON = re.compile(r"^backend (\S+) is (\w+) since (.+?) \(admin(: |\))")


def with_actor(reason: str, set_by: dict[str, str]) -> str:
    """A group's reason with the person who marked the backend instead of ``admin``."""
    m = _ADMIN_REASON.match(reason)
    if m is None or m.group(1) not in set_by:
        return reason
    return reason[:m.start(4) - len("admin")] + set_by[m.group(1)] + reason[m.start(4):]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _columns(g: GroupView, backends: list[dict]) -> list[dict]:
    """The map's backends and every other backend that could take a bucket, by id."""
    in_map = {be for row in g.bucket_map for be in row}
    known = {b["id"]: b for b in backends}
    cols = [b for b in backends if b["id"] in in_map or b["state"] in ("alive", "down")]
    cols += [{"id": be, "name": f"id {be}", "state": "missing", "host": "?"} for be in sorted(in_map - set(known))]
    return sorted(cols, key=lambda b: b["id"])


EXACT_MAX_BUCKETS = 64
"""Up to this many buckets the map draws one row per bucket; above it a heatmap of bucket ranges,
so 512 buckets × 16 backends still fits on a screen with every backend's total in view."""
HEAT_ROWS = 64


def _svg_open(g: GroupView, kind: str, width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="bucket-map {kind}" data-group-id="{escape(g.group_id)}" '
            f'data-buckets="{len(g.bucket_map)}" data-view="{kind}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="bucket map of group {escape(g.full_name)}">')


def _header(out: list[str], cols: list[dict], totals: list[int], primaries: list[int], *, left: int, cw: int,
            top: int, hist: int) -> None:
    """Backend names and states, then each backend's replica total over a bar of its share (dark:
    primaries): the totals sit above the map, so they are read before any scrolling."""
    peak = max(totals + [1])
    for i, b in enumerate(cols):
        x = left + i * cw
        alive = b["state"] == "alive"
        out.append(f'<text x="{x + cw / 2}" y="14" class="be-name" data-backend="{b["id"]}">'
                   f'<title>{escape(b["name"])} (id {b["id"]}, host {escape(str(b.get("host", "")))})</title>'
                   f'{escape(b["name"][:max(8, int(cw) // 8)])}</text>')
        out.append(f'<text x="{x + cw / 2}" y="28" class="be-state {"ok" if alive else "bad"}">{escape(b["state"])}</text>')
        out.append(f'<text x="{x + cw / 2}" y="44" class="total" data-backend="{b["id"]}" data-total="{totals[i]}" '
                   f'data-primary="{primaries[i]}"><title>{totals[i]} bucket replicas of this group on '
                   f'{escape(b["name"])}, {primaries[i]} of them primary</title>{totals[i]}</text>')
        if hist:
            h_all, h_pri = hist * totals[i] / peak, hist * primaries[i] / peak
            base = top - 6
            out.append(f'<rect x="{x + cw * 0.2}" y="{base - h_all:.1f}" width="{cw * 0.6}" height="{h_all:.1f}" '
                       f'class="hist {"replica" if alive else "down"}"/>')
            out.append(f'<rect x="{x + cw * 0.2}" y="{base - h_pri:.1f}" width="{cw * 0.6}" height="{h_pri:.1f}" '
                       f'class="hist {"primary" if alive else "down"}"/>')
    out.append(f'<text x="{left - 8}" y="44" class="seq">total</text>')


def _legend(out: list[str], left: int, y: int, items) -> None:
    for j, (cls, label) in enumerate(items):
        lx = left + j * 180
        tip = f"<title>{escape(PRIMARY_MEANS)}</title>" if cls == "primary" else ""
        out.append(f'<g class="legend-item">{tip}<rect x="{lx}" y="{y - 10}" width="14" height="12" rx="2" '
                   f'class="cell {cls}"/><text x="{lx + 20}" y="{y}" class="legend">{label}</text></g>')


def read_choice(rows, alive: set[int]) -> list[int] | None:
    """The replica a colocated join reads for each bucket now (the planner's rule, without hosts),
    or None when a bucket has no alive replica (the join shuffles then)."""
    from airflow_colocate.placement.replica_choice import choose_replicas
    from airflow_colocate.core.errors import PlacementError

    try:
        return choose_replicas(rows, alive)
    except PlacementError:
        return None


def _counts(g: GroupView, cols: list[dict]) -> tuple[dict[int, int], list[int], list[int]]:
    col_of = {b["id"]: i for i, b in enumerate(cols)}
    totals, primaries = [0] * len(cols), [0] * len(cols)
    for row in g.bucket_map:
        for replica, be in enumerate(row):
            totals[col_of[be]] += 1
            primaries[col_of[be]] += replica == 0
    return col_of, totals, primaries


def bucket_map_svg(g: GroupView, backends: list[dict]) -> Markup:
    """The group's bucket map: one row per bucket up to :data:`EXACT_MAX_BUCKETS`, else a heatmap
    of bucket ranges (:func:`bucket_heatmap_svg`). Both start with each backend's total."""
    if len(g.bucket_map) > EXACT_MAX_BUCKETS:
        return bucket_heatmap_svg(g, backends)
    cols = _columns(g, backends)
    rows = list(g.bucket_map)
    n = max(len(rows), 1)
    left, top = 70, 62
    # The legend needs left + 3 × 180 px whatever the columns: few backends get wider columns to
    # fill it rather than leave it empty (3 backends: 3 × 180 px, not 3 × 56 px and a blank right).
    cw, ch = max(56, min(180, (3 * 180 + 10) // max(len(cols), 1))), max(8, min(22, 560 // n))
    width = max(left + cw * len(cols) + 10, left + 3 * 180 + 20)
    height = top + ch * n + 34
    step = 1 if ch >= 12 else math.ceil(12 / ch)
    col_of, totals, primaries = _counts(g, cols)
    out = [_svg_open(g, "exact", width, height), f'<text x="4" y="{top - 6}" class="axis">bucket</text>']
    _header(out, cols, totals, primaries, left=left, cw=cw, top=top, hist=0)
    for i in range(len(cols)):
        out.append(f'<rect x="{left + i * cw}" y="{top}" width="{cw}" height="{ch * n}" '
                   f'class="col {"even" if i % 2 == 0 else "odd"}"/>')
    state_of = {b["id"]: b["state"] for b in cols}
    reads = read_choice(rows, {be for be, st in state_of.items() if st == "alive"})
    for seq, row in enumerate(rows):
        y = top + seq * ch
        if seq % step == 0:
            out.append(f'<text x="{left - 8}" y="{y + ch / 2 + 4}" class="seq">{seq}</text>')
        for replica, be in enumerate(row):
            i = col_of[be]
            kind = "down" if state_of[be] != "alive" else ("primary" if replica == 0 else "replica")
            out.append(f'<rect x="{left + i * cw + 3}" y="{y + 1}" width="{cw - 6}" '
                       f'height="{ch - 2}" rx="2" class="cell {kind}" data-bucket="{seq}" '
                       f'data-backend="{be}" data-replica="{replica}"><title>bucket {seq}: '
                       f'{"primary replica" if replica == 0 else f"replica {replica + 1}"} of {len(row)} on '
                       f'{escape(cols[i]["name"])} (id {be}, {escape(state_of[be])})'
                       f'{"; a join reads this bucket here" if reads and reads[seq] == be else ""}</title></rect>')
            if reads and reads[seq] == be:
                out.append(f'<circle cx="{left + i * cw + cw / 2}" cy="{y + ch / 2}" r="{max(2, min(4, ch / 4))}" '
                           f'class="reads" data-bucket="{seq}" data-backend="{be}"/>')
    _legend(out, left, top + ch * n + 24, (("primary", "primary replica"), ("replica", "other replica"),
                                           ("down", "backend not alive")))
    if reads:
        out.append(f'<circle cx="{left + 3 * 180 + 4}" cy="{top + ch * n + 20}" r="4" class="reads"/>')
    out.append("</svg>")
    return Markup("".join(out))


def bucket_heatmap_svg(g: GroupView, backends: list[dict]) -> Markup:
    """A large map as a heatmap: each row a range of consecutive buckets, each cell how many of
    them have a replica on that backend (darker: more; red: the backend is not alive), under a
    histogram of every backend's total. At most :data:`HEAT_ROWS` rows, whatever the bucket count."""
    cols = _columns(g, backends)
    n = len(g.bucket_map)
    per = math.ceil(n / HEAT_ROWS)
    nrows = math.ceil(n / per)
    cw = max(40, min(64, 1040 // max(len(cols), 1)))
    ch = 8
    left, hist = 80, 48
    top = 52 + hist + 8
    width = max(left + cw * len(cols) + 10, left + 4 * 180 + 20)
    height = top + ch * nrows + 34
    col_of, totals, primaries = _counts(g, cols)
    grid = [[0] * len(cols) for _ in range(nrows)]
    for seq, row in enumerate(g.bucket_map):
        for be in row:
            grid[seq // per][col_of[be]] += 1
    out = [_svg_open(g, "heatmap", width, height), f'<text x="4" y="{top - 6}" class="axis">buckets</text>']
    _header(out, cols, totals, primaries, left=left, cw=cw, top=top, hist=hist)
    alive = [b["state"] == "alive" for b in cols]
    step = 4
    for r, counts in enumerate(grid):
        lo, hi = r * per, min(n, (r + 1) * per) - 1
        y = top + r * ch
        if r % step == 0:
            out.append(f'<text x="{left - 8}" y="{y + ch}" class="seq">{lo}–{hi}</text>')
        for i, c in enumerate(counts):
            if not c:
                continue
            level = min(4, math.ceil(4 * c / (hi - lo + 1)))
            out.append(f'<rect x="{left + i * cw + 2}" y="{y}" width="{cw - 4}" height="{ch - 1}" '
                       f'class="heat {"down" if not alive[i] else f"l{level}"}" data-from="{lo}" data-to="{hi}" '
                       f'data-backend="{cols[i]["id"]}" data-count="{c}"><title>buckets {lo}–{hi}: {c} of '
                       f'{hi - lo + 1} have a replica on {escape(cols[i]["name"])}</title></rect>')
    _legend(out, left, top + ch * nrows + 24, (("heat l1", "few buckets of the range"), ("heat l4", "every bucket"),
                                               ("primary", "primaries (histogram)"), ("down", "backend not alive")))
    out.append("</svg>")
    return Markup("".join(out))


MAX_DROPPED_SHOWN = 12  # dropped partitions listed per table; the rest are counted
MAX_UNAVAILABLE_SHOWN = 12  # unavailable partitions listed per table; the count is exact


def relocate_delay() -> timedelta:
    """The delay balance waits before relocating a down backend's buckets, as the maintenance DAG's
    runs read it (``COLOCATE_RELOCATE_DELAY_MINUTES``, else 30 min): the page's countdown is theirs."""
    from airflow_colocate.jobs.health import relocate_delay_from_env

    return relocate_delay_from_env()


def outlook_lines(g: dict, now: datetime) -> list[tuple[str, Markup]]:
    """What happens next to a group, one (class, line) each: when relocation starts (or that it is
    due, or off), and whether its joins shuffle now. Empty for a healthy group."""
    out: list[tuple[str, Markup]] = []
    off = ", ".join(g.get("relocation_backends") or ()) or "its down backends"
    if g.get("relocation_disabled"):
        out.append(("relocation-off", Markup("relocation off: <code>disable_colocate_relocate</code> is set; "
                                             "its buckets stay on {}").format(off)))
    elif g.get("relocation_due") and not g.get("relocation_backends"):  # a relocate job, no backend down
        out.append(("relocation-due", Markup("relocation under way: a relocate job is moving its buckets")))
    elif g.get("relocation_due"):
        out.append(("relocation-due", Markup("relocation due: the next balance or repair run moves its buckets "
                                             "off {}").format(off)))
    elif g.get("relocation_starts_at") is not None:
        at = utc(g["relocation_starts_at"])
        out.append(("relocation-countdown", Markup('relocation starts <span class="rel" data-at="{}">{}</span> '
                                                   '({}): its buckets leave {}').format(
            at.isoformat(timespec="seconds"), relative(at, now), when(at, now), off)))
    if not g.get("joins_shuffle") and not g["stable"]:
        out.append(("joins-bucketed", Markup("joins stay bucketed ({} buckets read remotely)").format(
            g.get("remote_buckets", 0))))
    if g.get("joins_shuffle"):
        why = g.get("joins_shuffle_reason") or "colocated joins are off for this group"
        # an unstable group's reasons are listed next to it already: the planner's words go to the tooltip
        out.append(("joins-shuffle", Markup('<span title="{}">joins shuffle now</span>').format(why) if not g["stable"]
                    else Markup("joins shuffle now: {}").format(why)))
    return out


EVENTS_PER_PAGE = 10


def change_of(detail: dict | None) -> str:
    """An event's detail as one short line: ``old=alive new=down reason=disk pulled``."""
    parts = []
    for key, value in (detail or {}).items():
        if key == "id" or value is None or value == [] or value == {}:
            continue
        text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(f"{key}={text[:80]}")
    return " ".join(parts)[:240]


def render_page(catalog: Catalog, selected: str | None, *, base: str = "", user: str = "",
                delay: timedelta | None = None, events_before: int | None = None,
                table: str | None = None, backend: str | None = None, job: int | None = None) -> str:
    names = table_names(catalog)
    groups = catalog.groups.list()
    backends = backends_with_load(catalog)
    now = utc(catalog.now())
    outlooks = catalog.groups.outlooks(relocate_delay=relocate_delay() if delay is None else delay)
    lost = catalog.tables.availability(limit=MAX_UNAVAILABLE_SHOWN)
    set_by = state_setters(catalog)
    rows = [dict(group_model(g, names), reasons=[with_actor(r, set_by) for r in group_reasons(catalog, g)],
                 **(outlooks[g.grp_id].to_dict() if g.grp_id in outlooks else {})) for g in groups]
    for r in rows:
        r["next"] = outlook_lines(r, now)
    chosen: GroupView | None = None
    problem = None
    if selected and not re.fullmatch(GROUP_REF, selected):
        problem = f"invalid group {selected!r}: expected dbId.grpId, dbId_groupName or a group name"
    elif selected:
        try:
            chosen = catalog.groups.get(selected)
        except ColocateError as exc:
            problem = str(exc)
    if chosen is None and groups:
        chosen = next((g for g in groups if not g.stable), groups[0])
    chosen_row = next((r for r in rows if chosen is not None and r["group_id"] == chosen.group_id), None)
    if chosen_row is not None and chosen is not None:  # a split group's map count, next writes' and partitions'
        layouts = catalog.groups.layouts(chosen.group_id)
        if chosen.layout != chosen.bucket_num or len(layouts) > 1:
            chosen_row["layouts_line"] = describe_layouts(chosen.bucket_num, chosen.layout, layouts)
    max_bytes = max([b["bytes"] for b in backends] + [1])
    max_slots = max([b["slots"] for b in backends] + [1])
    for b in backends:
        # Against capacity when it is known, else against the fullest backend.
        b["bar"] = b["used_fraction"] if b["used_fraction"] is not None else b["bytes"] / max_bytes
        b["slot_bar"] = b["slots"] / max_slots
        b["bytes_h"], b["capacity_h"] = human_bytes(b["bytes"]), human_bytes(b["capacity_bytes"])
        b["unavailable_with"] = lost.by_backend.get(b["id"], 0)  # partitions whose last copies are here
        b["set_by"] = set_by.get(b["name"]) if b.get("reason_source") == "admin" else None
    # Writes next to balance jobs: a write holds a version of its group, a balance job moves its
    # buckets, and both explain why the map or the numbers above are changing. Running ones first.
    recent = catalog.jobs.list(kinds=JOB_KINDS, limit=RECENT_JOBS)
    running = {j.id for j in recent if j.state == "running"}
    running_jobs = [j for j in catalog.jobs.list(kinds=JOB_KINDS, states=["running"]) if j.id not in running]
    jobs = [job_model(j) for j in running_jobs + sorted(recent, key=lambda j: (j.state != "running", -j.id))]
    for j in jobs:
        j["copied_h"], j["planned_h"] = human_bytes(j["copied_bytes"]), human_bytes(j["planned_bytes"])
    root = base[: -len(PREFIX)] if base.endswith(PREFIX) else ""  # Airflow's own base path

    def task_of(actor: str | None) -> dict | None:
        """The task instance an event's actor names, with its page in Airflow's UI."""
        who = parse_task_actor(actor)
        if who is not None:
            who["url"] = (f"{root}/dags/{quote(who['dag_id'], safe='')}/runs/{quote(who['run_id'], safe='')}"
                          f"/tasks/{quote(who['task_id'], safe='')}")
        return who

    bin_ = catalog.partitions.recycle_bin()
    events = catalog.events(limit=EVENTS_PER_PAGE, before=events_before)
    detail, detail_problem = detail_of(catalog, table=table, backend=backend, job=job, load=backends)

    def unavailable(t_id: int) -> dict:
        found = lost.tables.get(t_id)
        return {"unavailable_count": found.count if found else 0,
                "unavailable_partitions": list(found.partitions) if found else [],
                "unavailable_backends": list(found.backends) if found else []}

    tables = [{"id": t.id, "name": t.qualified_name, "group": t.group_name, "schema_version": t.schema_version,
               "columns": ", ".join(f"{n} {ty}" for n, ty in t.columns), "retention_days": t.retention_days,
               "replication_num": t.replication_num, "dropped": [p.value for p in bin_.get(t.id, [])],
               **unavailable(t.id)} for t in catalog.tables.list()]
    return _env.get_template("colocation.html").render(
        task_of=task_of, tables=tables, max_dropped=MAX_DROPPED_SHOWN, rendered_at=now.isoformat(timespec="seconds"),
        when=lambda ts, rel=False: when(ts, now, rel=rel), unavailable_total=lost.total, primary_means=PRIMARY_MEANS,
        base=base, user=user, version=__version__, groups=rows, chosen=chosen_row, problem=problem,
        map_svg=bucket_map_svg(chosen, backends) if chosen is not None else None,
        heatmap=chosen is not None and len(chosen.bucket_map) > EXACT_MAX_BUCKETS, exact_max=EXACT_MAX_BUCKETS,
        backends=backends, jobs=jobs, running=sum(1 for j in jobs if j["state"] == "running"), flags=catalog.flags(), events=events, change_of=change_of, detail=detail, detail_problem=detail_problem,
        older=events[-1].id if len(events) == EVENTS_PER_PAGE else None, events_before=events_before,
        unstable=sum(1 for g in groups if not g.stable),
    )

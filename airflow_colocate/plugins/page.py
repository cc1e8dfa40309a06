"""The Colocation page: groups and why they are unstable, a bucket × backend picture of one
group's map, backends' load against capacity, and the balance jobs that are running.

Rendered on the server (Jinja2 template and an inline SVG), so the page is complete without
scripts and a test can read the same numbers the catalog holds.
"""

from __future__ import annotations

import math
import re
from html import escape
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from airflow_colocate import __version__
from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.views import BALANCE_KINDS, GroupView
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.plugins.presenters import backends_with_load, group_model, group_reasons, job_model, table_names
from airflow_colocate.plugins.schemas import GROUP_REF

TEMPLATES = Path(__file__).parent / "templates"
MAX_DRAWN_BUCKETS = 1024

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))


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


def bucket_map_svg(g: GroupView, backends: list[dict]) -> Markup:
    """Rows are bucket seqs, columns backends; a filled cell is a replica the map places there
    (dark: the primary, light: another replica, red: the backend is not alive). The last row counts
    each backend's replicas of this group, so an uneven spread shows at a glance."""
    cols = _columns(g, backends)
    rows = list(g.bucket_map[:MAX_DRAWN_BUCKETS])
    n = max(len(rows), 1)
    cw, ch = 56, max(4, min(22, 560 // n))
    left, top = 70, 58
    width = max(left + cw * len(cols) + 10, left + 3 * 140)  # room for the legend too
    height = top + ch * n + 48
    step = 1 if ch >= 12 else math.ceil(12 / ch)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bucket-map" data-group-id="{escape(g.group_id)}" '
           f'data-buckets="{len(g.bucket_map)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="bucket map of group {escape(g.full_name)}">']
    out.append(f'<text x="4" y="{top - 8}" class="axis">bucket</text>')
    for i, b in enumerate(cols):
        x = left + i * cw
        alive = b["state"] == "alive"
        out.append(f'<rect x="{x}" y="{top}" width="{cw}" height="{ch * n}" class="col {"even" if i % 2 == 0 else "odd"}"/>')
        out.append(f'<text x="{x + cw / 2}" y="{top - 26}" class="be-name" data-backend="{b["id"]}">'
                   f'<title>{escape(b["name"])} (id {b["id"]}, host {escape(str(b.get("host", "")))})</title>'
                   f'{escape(b["name"][:8])}</text>')
        out.append(f'<text x="{x + cw / 2}" y="{top - 10}" class="be-state {"ok" if alive else "bad"}">{escape(b["state"])}</text>')
    col_of = {b["id"]: i for i, b in enumerate(cols)}
    state_of = {b["id"]: b["state"] for b in cols}
    counts = [0] * len(cols)
    for seq, row in enumerate(rows):
        y = top + seq * ch
        if seq % step == 0:
            out.append(f'<text x="{left - 8}" y="{y + ch / 2 + 4}" class="seq">{seq}</text>')
        for replica, be in enumerate(row):
            i = col_of[be]
            counts[i] += 1
            kind = "down" if state_of[be] != "alive" else ("primary" if replica == 0 else "replica")
            out.append(f'<rect x="{left + i * cw + 3}" y="{y + (1 if ch > 6 else 0)}" width="{cw - 6}" '
                       f'height="{max(ch - (2 if ch > 6 else 0), 1)}" rx="2" class="cell {kind}" data-bucket="{seq}" '
                       f'data-backend="{be}" data-replica="{replica}"><title>bucket {seq}: replica {replica + 1} of '
                       f'{len(row)} on {escape(cols[i]["name"])} (id {be}, {escape(state_of[be])})</title></rect>')
    y = top + ch * n + 18
    out.append(f'<text x="{left - 8}" y="{y}" class="seq">total</text>')
    for i, c in enumerate(counts):
        out.append(f'<text x="{left + i * cw + cw / 2}" y="{y}" class="total" data-backend="{cols[i]["id"]}">{c}</text>')
    ly = y + 20
    for j, (cls, label) in enumerate((("primary", "primary replica"), ("replica", "other replica"),
                                      ("down", "backend not alive"))):
        lx = left + j * 140
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="14" height="12" rx="2" class="cell {cls}"/>'
                   f'<text x="{lx + 20}" y="{ly}" class="legend">{label}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def render_page(catalog: Catalog, selected: str | None, *, base: str = "", user: str = "") -> str:
    names = table_names(catalog)
    groups = catalog.groups()
    backends = backends_with_load(catalog)
    rows = [dict(group_model(g, names), reasons=group_reasons(catalog, g)) for g in groups]
    chosen: GroupView | None = None
    problem = None
    if selected and not re.fullmatch(GROUP_REF, selected):
        problem = f"invalid group {selected!r}: expected dbId.grpId, dbId_groupName or a group name"
    elif selected:
        try:
            chosen = catalog.group(selected)
        except ColocateError as exc:
            problem = str(exc)
    if chosen is None and groups:
        chosen = next((g for g in groups if not g.stable), groups[0])
    chosen_row = next((r for r in rows if chosen is not None and r["group_id"] == chosen.group_id), None)
    max_bytes = max([b["bytes"] for b in backends] + [1])
    max_slots = max([b["slots"] for b in backends] + [1])
    for b in backends:
        # Against capacity when it is known, else against the fullest backend.
        b["bar"] = b["used_fraction"] if b["used_fraction"] is not None else b["bytes"] / max_bytes
        b["slot_bar"] = b["slots"] / max_slots
        b["bytes_h"], b["capacity_h"] = human_bytes(b["bytes"]), human_bytes(b["capacity_bytes"])
    jobs = [job_model(j) for j in catalog.list_jobs(kinds=BALANCE_KINDS, states=["running"])]
    for j in jobs:
        j["copied_h"], j["planned_h"] = human_bytes(j["copied_bytes"]), human_bytes(j["planned_bytes"])
    return _env.get_template("colocation.html").render(
        base=base, user=user, version=__version__, groups=rows, chosen=chosen_row, problem=problem,
        map_svg=bucket_map_svg(chosen, backends) if chosen is not None else None,
        truncated=chosen is not None and len(chosen.bucket_map) > MAX_DRAWN_BUCKETS, max_drawn=MAX_DRAWN_BUCKETS,
        backends=backends, jobs=jobs, flags=catalog.flags(), events=catalog.events(limit=10),
        unstable=sum(1 for g in groups if not g.stable),
    )

"""``colocate backend``: the storage nodes buckets are placed on."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Report, Table, json_option, timestamp
from airflow_colocate.core.sizes import human_bytes
from airflow_colocate.core.times import short_time


@click.group("backend", cls=Group, help="Storage backends: add, list, probe, mark down/up, move to another root, drain, remove. A backend is a root URI on one host.")
def backend() -> None:
    pass


@backend.command("add", help="Register a backend. ROOT is its root URI, e.g. file:///data/be1 or s3a://lake-be1/.")
@click.argument("root", type=params.URI)
@click.option("--name", help="Backend name (default: be<id>).")
@click.option("--host", help="The machine the root is on: the name or address its Spark worker registers with "
              "(--host / SPARK_LOCAL_IP), so a bucket's task runs there; also the failure domain: backends on one "
              "host never share a bucket (default: the backend name).")
@click.option("--capacity", help="Capacity, e.g. 500G (used by the size balancer).")
@pass_env
def add(env: Env, root: str, name: str | None, host: str | None, capacity: str | None) -> str:
    from airflow_colocate.jobs.backends import add_backend

    b = add_backend(env.catalog(), root, name=name, host=host, capacity_bytes=params.size(capacity))
    return f"backend {b.name} (id {b.id}) added: root {b.root_uri}, host {b.host}"


@backend.command("list", help="List backends: state, why and since when, the last heartbeat and the last probe's own finding.")
@click.option("--wide", is_flag=True, help="Every field as a column (root, heartbeat, probe time and detail); "
                                          "--json always has them all.")
@json_option
@pass_env
def list_(env: Env, wide: bool) -> Table | Report:
    backends = env.catalog().backends.list()
    full = Table(["BackendId", "Name", "Root", "Host", "CapacityBytes", "State", "Since", "Reason", "ReasonSource",
                  "LastHeartbeat", "LastProbeAt", "LastProbeOk", "LastProbeDetail"],
                 [[b.id, b.name, b.root_uri, b.host, b.capacity_bytes, b.state, b.state_since, b.state_reason,
                   b.reason_source, b.last_heartbeat, b.last_probe_at, b.last_probe_ok, b.last_probe_detail]
                  for b in backends])
    if wide:
        return full
    # What a person checks first fits a terminal; the rest is one --wide or --json away.
    now = datetime.now(timezone.utc)
    narrow = Table(["BackendId", "Name", "Host", "State", "Since", "Capacity", "Probe", "Reason"],
                   [[b.id, b.name, b.host, b.state, short_time(b.state_since, now), human_bytes(b.capacity_bytes),
                     _clip(_probe(b)), _clip(f"{b.state_reason} ({b.reason_source})" if b.state_reason and b.reason_source
                                             else b.state_reason)] for b in backends])
    return Report([narrow], data=full.records())


def _clip(text: str | None, width: int = 48) -> str | None:
    return text if text is None or len(text) <= width else text[:width - 1] + "…"


def _probe(b) -> str:
    if b.last_probe_ok is None:
        return "-"
    return "ok" if b.last_probe_ok else f"failed: {b.last_probe_detail or 'no detail'}"


@backend.command("decommission", help="Drain a backend: the next balance moves its replicas away. BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@pass_env
def decommission(env: Env, backend: str) -> str:
    catalog = env.catalog()
    b = catalog.backends.decommission(backend)
    catalog.health.check_groups()
    return f"backend {b.name} (id {b.id}) is decommissioning: the next balance moves its replicas away"


@backend.command("cancel-decommission", help="Stop draining a decommissioning backend: it is alive again and keeps what it still holds. BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@pass_env
def cancel_decommission(env: Env, backend: str) -> str:
    catalog = env.catalog()
    b = catalog.backends.cancel_decommission(backend)
    catalog.health.check_groups()
    return f"backend {b.name} (id {b.id}) is alive again: its decommission is cancelled"


@backend.command("reinit", help="Write a new identity marker at a backend's root after its disk was replaced: the replicas it held are marked lost and the next balance re-clones them. With --keep-replicas, adopt an intact disk that has no marker (a backend added before 0.2). Logged in the event log with the reason.")
@click.argument("backend", metavar="BACKEND")
@click.option("--reason", type=params.REASON, required=True, help="Why, e.g. 'disk sdb replaced' (kept in the event log).")
@click.option("--keep-replicas", is_flag=True, help="The disk still holds its replicas (adopt it, mark nothing lost).")
@pass_env
def reinit(env: Env, backend: str, reason: str, keep_replicas: bool) -> str:
    from airflow_colocate.jobs.backends import reinit_backend

    catalog = env.catalog()
    b, lost = reinit_backend(catalog, backend, reason=reason, keep_replicas=keep_replicas)
    catalog.health.check_groups()
    tail = "its replicas were kept" if keep_replicas else f"{lost} replicas on it are lost; 'colocate balance' re-clones them"
    return f"backend {b.name} (id {b.id}) re-initialised: a new identity marker is at {b.root_uri}; {tail}"


@backend.command("remove", help="Delete an empty backend (decommission it first). BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@pass_env
def remove(env: Env, backend: str) -> str:
    env.catalog().backends.remove(backend)
    return f"backend {backend} removed"


@backend.command("probe", help="Heartbeat the backends; record alive or down (a backend an admin marked down stays down, however reachable). Writes, reads and deletes a small file under each root of the BACKENDs named (ids or names; default: all that are not decommissioned).")
@click.argument("backends", nargs=-1, metavar="[BACKEND]...")
@click.option("--timeout", type=params.SECONDS, default=20.0, show_default=True,
              help="Seconds before a backend counts as down.")
@click.option("--sample", type=params.COUNT, default=200, show_default=True,
              help="Replicas per backend whose files are listed and checked against the catalog this run "
                   "(rotating through all of them over successive probes; 0 = none).")
@click.option("--relocate-delay-minutes", type=params.MINUTES,
              help="Down longer than this is unavailable (default $COLOCATE_RELOCATE_DELAY_MINUTES or 30).")
@json_option
@pass_env
def probe(env: Env, backends: tuple[str, ...], timeout: float, sample: int, relocate_delay_minutes: float | None) -> Table:
    from airflow_colocate.jobs.health import probe_backends

    for name in backends:  # an unknown name is refused before any backend is probed
        env.catalog().backends.get(name)
    results = probe_backends(env.catalog(), backends=list(backends) or None, timeout=timeout, sample=sample,
                             relocate_delay=params.relocate_delay(relocate_delay_minutes))
    from airflow_colocate.cli.maintenance import exit_if

    table = Table(["BackendId", "Name", "State", "Reason", "Probe", "Error", "DownSince", "LastHeartbeat", "Unavailable",
                   "BadReplicas"],
                  [[r.backend.id, r.backend.name, r.backend.state,
                    r.backend.reason_line if r.backend.state != "alive" else None, "ok" if r.ok else "FAILED", r.error or None,
                    r.backend.state_since if r.backend.state != "alive" else None, r.backend.last_heartbeat,
                    r.backend.unavailable, len(r.bad_replicas)] for r in results])
    return exit_if(table, [f"backend {r.backend.name} failed the probe ({r.error}): recorded {r.backend.state}; the "
                           f"others were probed" for r in results if not r.ok], "backend probe")


def _mark(state: str, verb: str, help: str) -> click.Command:
    @backend.command(f"mark-{verb}", help=help)
    @click.argument("backend", metavar="BACKEND")
    @click.option("--reason", type=params.REASON, help="Why, e.g. 'disk pulled': shown with the state on the page, the API and "
                  "'backend list'. Who marked it is the event's actor (--actor, else the OS user).")
    @pass_env
    def mark(env: Env, backend: str, reason: str | None) -> str:
        catalog = env.catalog()
        b, changed = catalog.backends.mark(backend, state, reason=reason)
        why = f" ({b.reason_line})" if b.reason_line and b.state != "alive" else ""
        if not changed:
            return f"backend {b.name} (id {b.id}) is already {b.state} since {timestamp(b.state_since)}{why}: nothing changed"
        catalog.health.check_groups()
        return f"backend {b.name} (id {b.id}) is now {b.state}{why}"

    return mark


mark_down = _mark("down", "down", "Admin: mark a backend down. The health probe never brings it back; mark-up does.")
mark_up = _mark("alive", "up", "Admin: mark a backend up (alive) again.")


@backend.command("set-root", help="Move a backend to another root that already holds its files (a disk remounted "
                 "elsewhere, a copied home), e.g. 'colocate backend set-root be1 file:///new/mount'. The identity "
                 "marker there must be this backend's; its root and every replica path move in one catalog "
                 "transaction, logged with the old and new root. BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@click.argument("root", type=params.URI)
@click.option("--reason", type=params.REASON, help="Why, e.g. 'disk remounted at /mnt/sdc' (kept in the event log).")
@json_option
@pass_env
def set_root(env: Env, backend: str, root: str, reason: str | None) -> Report:
    from airflow_colocate.jobs.backends import set_backend_root

    catalog = env.catalog()
    change = set_backend_root(catalog, backend, root, reason=reason)
    b = change.backend
    if change.changed:
        line = (f"backend {b.name} (id {b.id}) moved from {change.old_root} to {b.root_uri}: "
                f"{change.replicas} replica paths follow it")
        if b.state == "down" and b.reason_source == "probe":
            line += f"; it stays down until a probe reaches it there ('colocate backend probe {b.name}')"
    else:
        line = f"backend {b.name} (id {b.id}) is already at {b.root_uri}: nothing changed"
    return Report([line], data={"backend": b.name, "backend_id": b.id, "old_root": change.old_root,
                                "new_root": b.root_uri, "replicas": change.replicas, "changed": change.changed,
                                "reason": (reason or "").strip() or None, "actor": catalog.actor})

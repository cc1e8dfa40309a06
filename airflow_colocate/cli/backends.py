"""``colocate backend``: the storage nodes buckets are placed on."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Report, Table, json_option
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
    from airflow_colocate.jobs.backends import change_state

    b, _ = change_state(env.catalog(), backend, "decommission")
    return f"backend {b.name} (id {b.id}) is decommissioning: the next balance moves its replicas away"


@backend.command("cancel-decommission", help="Stop draining a decommissioning backend: it is alive again and keeps what it still holds. BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@pass_env
def cancel_decommission(env: Env, backend: str) -> str:
    from airflow_colocate.jobs.backends import change_state

    b, _ = change_state(env.catalog(), backend, "cancel-decommission")
    return f"backend {b.name} (id {b.id}) is alive again: its decommission is cancelled"


@backend.command("remove", help="Delete an empty backend (decommission it first). BACKEND is an id or a name.")
@click.argument("backend", metavar="BACKEND")
@pass_env
def remove(env: Env, backend: str) -> str:
    env.catalog().backends.remove(backend)
    return f"backend {backend} removed"


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

"""``colocate backend probe``, ``mark-down``, ``mark-up`` and ``reinit``: a backend's health, as the
heartbeat finds it or as an admin declares it."""

from __future__ import annotations

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.backends import backend
from airflow_colocate.cli.base import Env, pass_env
from airflow_colocate.cli.output import Table, json_option, timestamp


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
        from airflow_colocate.jobs.backends import change_state

        b, changed = change_state(env.catalog(), backend, state, reason=reason)
        why = f" ({b.reason_line})" if b.reason_line and b.state != "alive" else ""
        if not changed:
            return f"backend {b.name} (id {b.id}) is already {b.state} since {timestamp(b.state_since)}{why}: nothing changed"
        return f"backend {b.name} (id {b.id}) is now {b.state}{why}"

    return mark


mark_down = _mark("down", "down", "Admin: mark a backend down. The health probe never brings it back; mark-up does.")
mark_up = _mark("alive", "up", "Admin: mark a backend up (alive) again.")

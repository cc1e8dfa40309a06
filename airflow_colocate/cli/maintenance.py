"""``colocate init``, ``flag``, ``events`` and ``gc``: the catalog itself, its switches, its audit
log, and the files nothing needs any more."""

from __future__ import annotations

from datetime import timedelta

import click

from airflow_colocate.catalog import FLAGS
from airflow_colocate.cli import params
from airflow_colocate.cli.base import Command, Env, Group, pass_env
from airflow_colocate.cli.output import Table, json_option


@click.command("init", cls=Command, help="Create or upgrade the catalog (safe to run again).")
@pass_env
def init(env: Env) -> str:
    catalog = env.catalog(check_schema=False)
    catalog.init()
    return f"catalog ready at {catalog.engine.url.render_as_string(hide_password=True)}"


@click.group("flag", cls=Group, help="Global switches: disable join, relocate, balance. They hold everywhere until set back.")
def flag() -> None:
    pass


@flag.command("set", help="Set FLAG to VALUE (true or false).")
@click.argument("flag", type=params.Choice(FLAGS))
@click.argument("value")
@pass_env
def set_(env: Env, flag: str, value: str) -> str:
    on = params.boolean(value)
    env.catalog().set_flag(flag, on)
    return f"{flag} = {str(on).lower()}"


@flag.command("list", help="Every flag and its value.")
@json_option
@pass_env
def list_(env: Env) -> Table:
    return Table(["Flag", "Value"], [[k, bool(v)] for k, v in env.catalog().flags().items()])


@click.command("events", cls=Command, help="The audit log, newest first.")
@click.option("--limit", type=params.COUNT, default=50, show_default=True, help="At most this many events.")
@click.option("--kind", help="Only events of this kind, e.g. table.create.")
@click.option("--before", type=params.ID, help="Only events older than this EventId: the last EventId of a page "
                                                "gives the next page.")
@json_option
@pass_env
def events(env: Env, limit: int, kind: str | None, before: int | None) -> Table:
    found = env.catalog().events(limit=limit, kind=kind, before=before)
    return Table(["EventId", "Time", "Actor", "Kind", "Subject", "Detail"],
                 [[e.id, e.ts, e.actor, e.kind, e.subject, e.detail] for e in found])


@click.command("gc", cls=Command, help="Remove files that no visible version needs. Staging of dead writes, superseded versions after the grace, purged tables, temporary copies of killed jobs; lists them.")
@click.option("--grace-minutes", type=params.MINUTES, default=60.0, show_default=True,
              help="Keep superseded versions this long for running readers.")
@click.option("--stale-hours", type=params.HOURS, default=24.0, show_default=True,
              help="A write still staging, or a temporary copy, after this long is dead.")
@click.option("--deep", is_flag=True,
              help="Also walk every replica directory for temporary files (left there by jobs before 0.2).")
@click.option("--dry-run", is_flag=True, help="List what would be removed, remove nothing.")
@json_option
@pass_env
def gc(env: Env, grace_minutes: float, stale_hours: float, deep: bool, dry_run: bool) -> Table:
    """Files are deleted before their rows are forgotten: a crash in between only means the next
    gc deletes nothing and forgets them. Temporary copies are looked for on every reachable backend
    (alive or decommissioning; a down backend's are removed when it is back). A backend that cannot
    be opened is skipped, the others cleaned, and the command exits 1 naming it (jobs/gc.py)."""
    from airflow_colocate.jobs.gc import collect_garbage

    done = collect_garbage(env.catalog(), grace=timedelta(minutes=grace_minutes),
                           stale_after=timedelta(hours=stale_hours), deep=deep, dry_run=dry_run)
    rows = ([[i.reason, i.uri, not dry_run] for i in done.items]
            + [["temporary copy of a killed job", uri, not dry_run] for uri in done.temps]
            + [[f"not deleted: {reason}", uri, False] for uri, reason in done.failed])
    rows += [[f"backend unreachable, skipped: {reason}", name, False] for name, reason in done.unreachable.items()]
    if done.held:
        rows.append([f"{done.held} item(s) kept: a retained Iceberg snapshot names them ('colocate iceberg expire')",
                     "", False])
    if done.awaited:
        rows.append([f"{done.awaited} item(s) kept: a lagging Iceberg table's catch-up names them "
                     f"('colocate iceberg publish')", "", False])
    table = Table(["Reason", "Uri", "Removed"], rows, title="dry run: nothing is removed" if dry_run else None)
    problems = [f"backend {name} unreachable ({reason}): skipped; gc cleaned the others" + (
        f", {done.skipped} item(s) left for the next gc" if done.skipped else "")
        for name, reason in done.unreachable.items()]
    problems += [f"{uri} not deleted: {reason}" for uri, reason in done.failed if not any(
        uri.startswith(n) for n in done.unreachable)]
    return exit_if(table, problems, "gc")


def exit_if(result, problems: list[str], command: str):
    """``result`` as the command's output; with ``problems`` (one line each, e.g. a backend that
    could not be opened), print the result first, then each problem on stderr, and exit 1: the
    command did its work on everything else, and a script still sees that something was skipped."""
    if not problems:
        return result
    from airflow_colocate.cli import output

    output.render(result, as_json=output.wants_json())
    for line in problems:
        click.echo(f"colocate {command}: {line}", err=True)
    click.get_current_context().exit(1)

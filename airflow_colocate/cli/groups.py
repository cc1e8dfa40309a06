"""``colocate show`` and ``colocate group``: the seeds' ``SHOW PROC '/colocation_group'`` views,
why a group is unstable, and an operator's override of its stability."""

from __future__ import annotations

import click

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Bullets, Report, Table, json_option

GROUP_COLUMNS = ["GroupId", "GroupName", "TableIds", "BucketsNum", "ReplicationNum", "DistCols", "IsStable"]
MAP_COLUMNS = ["BucketIndex", "BackendIds"]
GROUP_REF = "GROUP is a group id (dbId.grpId), a full name (dbId_name) or a name."


def group_table(catalog: Catalog) -> Table:
    """``SHOW PROC '/colocation_group'``."""
    return Table(GROUP_COLUMNS, [[g.group_id, g.full_name, list(g.table_ids), g.bucket_num, g.replication_num,
                                  list(g.dist_col_types), g.stable] for g in catalog.groups.list()])


def map_table(catalog: Catalog, ref: str, db: str) -> Table:
    """``SHOW PROC '/colocation_group/<id>'``, titled with the group's stability."""
    g = catalog.groups.get(ref, db=db)
    title = f"group {g.full_name} ({g.group_id}): {'stable' if g.stable else 'UNSTABLE: ' + (g.unstable_reason or '')}"
    return Table(MAP_COLUMNS, [[i, list(ids)] for i, ids in enumerate(g.bucket_map)], title=title)


@click.group("show", cls=Group, help="Colocation groups and their bucket maps. The seeds' SHOW PROC '/colocation_group' views.")
def show() -> None:
    pass


@show.command("groups", help="All colocation groups (the seeds' columns).")
@json_option
@pass_env
def show_groups(env: Env) -> Table:
    return group_table(env.catalog())


@show.command("group", help=f"One group's bucket map, and why it is unstable. {GROUP_REF}")
@click.argument("group")
@json_option
@pass_env
def show_group(env: Env, group: str) -> Report:
    catalog = env.catalog()
    blocks: list = [map_table(catalog, group, env.db)]
    health = catalog.health.group_health(group, db=env.db)
    if not health.stable:
        heading = f"unstable because ({health.problems} problems, checked {health.checked_at.isoformat(timespec='seconds')}):"
        blocks.append(Bullets([r.text for r in health.reasons], heading=heading))
    return Report(blocks)


@click.group("group", cls=Group, help="Stability of groups: check it, or override it. An unstable group's joins fall back to a shuffle.")
def group() -> None:
    pass


@group.command("check", help=f"Recompute stability from the replicas, with reasons. Checks GROUP, or every group when none is given. {GROUP_REF}")
@click.argument("group", required=False)
@json_option
@pass_env
def check(env: Env, group: str | None) -> Report:
    catalog = env.catalog()
    healths = [catalog.health.check_group(group, db=env.db)] if group else catalog.health.check_groups()
    blocks: list = [Table(["GroupId", "GroupName", "IsStable", "Problems", "Reason"],
                          [[h.group_id, h.full_name, h.stable, h.problems, h.reason] for h in healths])]
    if group and not healths[0].stable:
        blocks.append(Bullets([r.text for r in healths[0].reasons]))
    return Report(blocks, data=[h.to_dict() for h in healths])


def _mark(stable: bool) -> click.Command:
    word = "stable" if stable else "unstable"

    @group.command(f"mark-{word}", help=f"Operator override: mark a group {word}. {GROUP_REF}")
    @click.argument("group")
    @click.option("--reason", help="Why (shown as the reason of an unstable group).")
    @pass_env
    def mark(env: Env, group: str, reason: str | None) -> str:
        g = env.catalog().groups.set_stable(group, stable, reason=reason, db=env.db)
        return f"group {g.full_name} ({g.group_id}) marked {'stable' if g.stable else 'unstable'}"

    return mark


mark_stable = _mark(True)
mark_unstable = _mark(False)

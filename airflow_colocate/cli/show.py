"""``colocate show``: the seeds' ``SHOW PROC '/colocation_group'`` views, a group's bucket map
and why it is unstable."""

from __future__ import annotations

import click

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.output import Bullets, Report, Table, json_option, plural

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
        heading = (f"unstable because ({plural(health.problems, 'problem')}, checked "
                   f"{health.checked_at.strftime('%Y-%m-%d %H:%M:%S')} UTC):")
        blocks.append(Bullets([r.text for r in health.reasons], heading=heading))
    return Report(blocks)

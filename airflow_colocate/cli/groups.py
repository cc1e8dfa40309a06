"""``colocate group``: why a group is unstable, what happens next, an operator's override of its
stability or its join policy, and its tables' Iceberg publication."""

from __future__ import annotations

import click

from airflow_colocate.cli import params
from airflow_colocate.cli.base import Env, Group, pass_env
from airflow_colocate.cli.outlook_text import OUTLOOK_COLUMNS, outlook_lines, outlook_row
from airflow_colocate.cli.output import Bullets, Fields, Report, Table, json_option, plural
from airflow_colocate.cli.show import GROUP_REF, MAP_COLUMNS
from airflow_colocate.model.layouts import describe_layouts

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


DELAY_OPTION = click.option("--relocate-delay-minutes", type=params.MINUTES,
                            help="The delay relocation waits for (default $COLOCATE_RELOCATE_DELAY_MINUTES or 30; "
                                 "give what the maintenance run uses).")


@group.command("list", help="Every group: stable or since when not, when relocation starts, whether joins shuffle now.")
@DELAY_OPTION
@json_option
@pass_env
def list_groups(env: Env, relocate_delay_minutes: float | None) -> Table:
    catalog = env.catalog()
    outlooks = catalog.groups.outlooks(relocate_delay=params.relocate_delay(relocate_delay_minutes))
    rows = [(g, outlooks.get(g.grp_id) or catalog.groups.outlook(g.group_id)) for g in catalog.groups.list()]
    return Table(OUTLOOK_COLUMNS, [outlook_row(g, o) for g, o in rows])


@group.command("show", help=f"One group: why it is unstable, since when, when relocation starts, whether joins shuffle "
               f"now, its tables' unavailable partitions and its bucket map. {GROUP_REF}")
@click.argument("group")
@DELAY_OPTION
@json_option
@pass_env
def show_one(env: Env, group: str, relocate_delay_minutes: float | None) -> Report:
    catalog = env.catalog()
    g = catalog.groups.get(group, db=env.db)
    o = catalog.groups.outlook(g.group_id, relocate_delay=params.relocate_delay(relocate_delay_minutes))
    health = catalog.health.group_health(g.group_id)
    names = {t.id: t.qualified_name for t in catalog.tables.list()}
    lost = catalog.tables.availability().tables
    unavailable = [lost[t] for t in g.table_ids if t in lost]
    state = "stable" if g.stable else f"UNSTABLE: {g.unstable_reason or 'marked unstable'}"
    layouts = catalog.groups.layouts(g.group_id)
    blocks: list = [Fields(f"group {g.full_name} ({g.group_id})", [
        ("state", state), *outlook_lines(o, catalog.now(), g.stable), ("join policy", g.join_policy),
        ("buckets", describe_layouts(g.bucket_num, g.layout, layouts)),
        ("tables", ", ".join(names.get(t, str(t)) for t in g.table_ids) or "(none)"),
        ("unavailable", "; ".join(f"{u.table}: {u.count} partitions" for u in unavailable) or "none")])]
    if not health.stable:
        blocks.append(Bullets([r.text for r in health.reasons], heading=f"unstable because ({plural(health.problems, 'problem')}):"))
    for u in unavailable:
        more = f" (first {len(u.partitions)} of {u.count})" if u.count > len(u.partitions) else ""
        blocks.append(Bullets(list(u.partitions), heading=f"unavailable partitions of {u.table}{more}: their last "
                              f"verified copy of a bucket is on {', '.join(u.backends)}, not alive"))
    blocks.append(Table(MAP_COLUMNS, [[i, list(ids)] for i, ids in enumerate(g.bucket_map)]))
    data = dict(group_id=g.group_id, group=g.full_name, tables=[names.get(t, str(t)) for t in g.table_ids],
                stable=g.stable, unstable_reason=g.unstable_reason, **o.to_dict(),
                reasons=[r.text for r in health.reasons] if not health.stable else [],
                unavailable_tables=[{"table": u.table, "unavailable_count": u.count,
                                     "unavailable_partitions": list(u.partitions),
                                     "unavailable_backends": list(u.backends)} for u in unavailable],
                bucket_map=[list(r) for r in g.bucket_map], bucket_num=g.bucket_num, layout_buckets=g.layout,
                layouts={str(c): n for c, n in sorted(layouts.items())})
    return Report(blocks, data=data)


def _mark(stable: bool) -> click.Command:
    word = "stable" if stable else "unstable"

    @group.command(f"mark-{word}", help=f"Operator override: mark a group {word}. {GROUP_REF}")
    @click.argument("group")
    @click.option("--reason", type=params.REASON, help="Why (shown as the reason of an unstable group).")
    @pass_env
    def mark(env: Env, group: str, reason: str | None) -> str:
        g = env.catalog().groups.set_stable(group, stable, reason=reason, db=env.db)
        return f"group {g.full_name} ({g.group_id}) marked {'stable' if g.stable else 'unstable'}"

    return mark


@group.command("set-join-policy", help="When the group's joins stay bucketed: 'stable' (only while the group is "
               "stable, the default: Doris's rule) or 'readable' (also while it is unstable, as long as every bucket "
               f"has a verified replica on an alive backend; only locality is lost). {GROUP_REF}")
@click.argument("group")
@click.argument("policy", type=params.Choice(["stable", "readable"]))
@pass_env
def set_join_policy(env: Env, group: str, policy: str) -> str:
    g = env.catalog().groups.set_join_policy(group, policy, db=env.db)
    return f"group {g.full_name} ({g.group_id}): join policy {g.join_policy}"


@group.command("split", help="New partitions of the group's tables use FACTOR times its buckets; committed ones keep "
               "theirs (no file is rewritten). Joins still run bucket by bucket with no shuffle: finer bucket j is read "
               f"with bucket j mod the map's count, where it is stored. Refused while a balance job changes the group. {GROUP_REF}")
@click.argument("group")
@click.option("--factor", type=int, required=True, help="The multiple, at least 2 (e.g. 2: 8 buckets become 16).")
@pass_env
def split(env: Env, group: str, factor: int) -> str:
    g = env.catalog().groups.split(group, factor, db=env.db)
    return f"group {g.full_name} ({g.group_id}): new versions written at {g.layout} buckets ({g.bucket_num} in the map)"


@group.command("alter", help="Publish every table of the group, and every table created in it later, as an Iceberg "
               f"table (on), or stop (off; their Iceberg tables stay as they are). {GROUP_REF}")
@click.argument("group")
@click.option("--iceberg", type=params.Choice(["on", "off"]), required=True, help="Publish the group's tables (on) or stop.")
@click.option("--iceberg-warehouse", metavar="URI", help="With --iceberg on: the folder for the Iceberg metadata.")
@pass_env
def alter(env: Env, group: str, iceberg: str, iceberg_warehouse: str | None) -> str:
    from airflow_colocate.jobs.iceberg import enable_group

    done = enable_group(env.catalog(), group, iceberg == "on", warehouse=iceberg_warehouse, db=env.db)
    return "\n".join([f"group {group}: Iceberg publication {iceberg}", *(o.line() for o in done)])


mark_stable = _mark(True)
mark_unstable = _mark(False)

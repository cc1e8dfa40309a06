"""The colocation index in the seeds' JSON shape (StarRocks/Doris ``GET /api/colocate``).

Keys follow Doris's ``ColocateTableIndex``: a group id is ``{"dbId": .., "grpId": ..}`` and the
per-group maps are keyed by ``"dbId.grpId"``. ``groupName2Id`` is keyed by the full group name
``dbId_groupName`` (a global group's full name is its name), because names are unique per database
only. Doris serialises its multimap ``group2Tables`` as ``{}``; we fill it in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from airflow_colocate.model.views import GroupView

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def group_id(g: GroupView) -> dict[str, int]:
    return {"dbId": g.db_id, "grpId": g.grp_id}


def column_type(type_name: str) -> dict:
    """A catalog type (``bigint``, ``decimal(15,2)``) as Doris prints a distribution column type."""
    m = _DECIMAL.fullmatch(type_name)
    precision, scale = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    return {"type": "DECIMAL" if m else type_name.upper(), "len": -1,
            "isAssignedStrLenInColDefinition": False, "precision": precision, "scale": scale}


def colocate_meta(groups: Iterable[GroupView]) -> dict:
    groups = list(groups)
    return {
        "groupName2Id": {g.full_name: group_id(g) for g in groups},
        "group2Tables": {g.group_id: list(g.table_ids) for g in groups},
        "table2Group": {str(t): group_id(g) for g in groups for t in g.table_ids},
        "group2Schema": {
            g.group_id: {"groupId": group_id(g), "distributionColTypes": [column_type(t) for t in g.dist_col_types],
                         "bucketsNum": g.bucket_num, "replicationNum": g.replication_num}
            for g in groups
        },
        "group2BackendsPerBucketSeq": {g.group_id: [list(row) for row in g.bucket_map] for g in groups},
        "unstableGroups": [group_id(g) for g in groups if not g.stable],
    }

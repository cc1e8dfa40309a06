"""Which replica of every bucket a read registers, and which tables of a query are read bucketed.

Tables that cannot take part in a colocated join are registered without a bucket spec, so Spark
shuffles exactly them, and the reason travels with the plan to the explain. Pure: the caller reads
the catalog and passes what it read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from airflow_colocate.catalog.views import (
    GroupView,
    PartitionReplicas,
    ReplicaView,
    TableView,
)
from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable
from airflow_colocate.core.errors import PlacementError
from airflow_colocate.placement.replica_choice import choose_replicas
from airflow_colocate.planner.join import (
    DISABLED,
    NOT_COLOCATED,
    NOT_SAME_GROUP,
    NOT_STABLE,
)


def read_table(view: TableView, partitions: Sequence[PartitionReplicas], *, available: Collection[int],
               chosen: Sequence[int] | None = None, name: str | None = None, bucketed: bool = True) -> ReadTable:
    """Register ``view`` reading, per bucket, the replica on ``chosen[bucket]`` (a colocated join
    reads every table's bucket b from one backend) or else the first verified replica on an
    available backend. The other verified replicas on available backends follow as candidates:
    the Spark side registers the first whose directory holds exactly its recorded files."""
    parts = []
    for p in partitions:
        paths, candidates = [], []
        for seq, replicas in enumerate(p.buckets):
            pick = None
            if chosen is not None:
                pick = next((r for r in replicas if r.backend_id == chosen[seq]), None)
            if pick is None:
                pick = next((r for r in replicas if r.backend_id in available), None)
            if pick is None:
                raise PlacementError(
                    f"{view.qualified_name}/{p.value} v{p.version} bucket {seq} has no verified replica on an alive "
                    f"backend (replicas on {[r.backend_id for r in replicas] or 'none'}): repair the group first"
                )
            paths.append(pick.path if pick.rows else "")
            candidates.append([_read_replica(r) for r in [pick, *(r for r in replicas if r is not pick
                                                                   and r.backend_id in available)]])
        parts.append(ReadPartition(value=p.value, bucket_paths=paths, candidates=candidates))
    return ReadTable(name=name or view.name, columns=[list(c) for c in view.columns], dist_cols=list(view.dist_cols),
                     partition_cols=list(view.partition_cols), bucket_num=view.bucket_num, partitions=parts,
                     bucketed=bucketed, table=view.qualified_name)


def _read_replica(r: ReplicaView) -> ReadReplica:
    return ReadReplica(replica_id=r.id, backend_id=r.backend_id, path=r.path, bytes=r.bytes, rows=r.rows,
                       files=None if r.files is None else [[n, int(size)] for n, size in r.files])


@dataclass(frozen=True)
class JoinReads:
    tables: list[ReadTable]
    reasons: dict[str, str]  # alias -> reason it is not bucketed ('' if bucketed)
    groups: dict[str, str]  # alias -> group id or ''
    group: str | None  # the group read colocated, if any
    chosen: list[int] | None  # backend per bucket seq for that group


def plan_reads(reads: Mapping[str, tuple[TableView, Sequence[PartitionReplicas]]], groups: Mapping[str, GroupView],
               *, available: Collection[int], disabled: bool, hosts: Mapping[int, str] | None = None,
               executor_hosts: Collection[str] | None = None) -> JoinReads:
    """Register every table of the query; tables of the best-represented stable group bucketed,
    reading bucket *b* of all of them from one backend (spread over ``hosts``, backend id -> host,
    preferring backends on ``executor_hosts``: placement.replica_choice)."""
    in_group = Counter(view.group_id for view, _ in reads.values() if view.group_id)
    group_id = in_group.most_common(1)[0][0] if in_group else None
    reasons: dict[str, str] = {}
    chosen = None
    group_reason = ""
    if disabled:
        group_reason = DISABLED
    elif group_id is not None:
        g = groups[group_id]
        down = sorted({b for ids in g.bucket_map for b in ids} - set(available))
        if not g.stable:
            group_reason = f"{NOT_STABLE}: {g.unstable_reason or 'marked unstable'}"
        elif down:
            # The seeds: a group whose map names an unavailable backend is unstable until repaired.
            group_reason = f"{NOT_STABLE}: its bucket map names backend(s) {', '.join(map(str, down))}, which are not alive"
        else:
            try:
                chosen = choose_replicas(g.bucket_map, available, hosts=hosts, executor_hosts=executor_hosts)
            except PlacementError as exc:
                group_reason = f"{NOT_STABLE}: {exc}"
            if chosen is not None:
                group_reason = _missing_replica(reads, group_id, chosen)
                chosen = chosen if not group_reason else None
    for alias, (view, _) in reads.items():
        if view.group_id is None:
            reasons[alias] = DISABLED if disabled else NOT_COLOCATED
        elif view.group_id != group_id:
            reasons[alias] = DISABLED if disabled else f"{NOT_SAME_GROUP}: {view.name} is in group {view.group_name}"
        else:
            reasons[alias] = group_reason
    tables = [read_table(view, parts, available=available, chosen=chosen if not reasons[alias] else None,
                         name=alias, bucketed=not reasons[alias])
              for alias, (view, parts) in reads.items()]
    return JoinReads(tables=tables, reasons=reasons,
                     groups={alias: view.group_id or "" for alias, (view, _) in reads.items()},
                     group=group_id if not group_reason else None, chosen=chosen)


def _missing_replica(reads, group_id: str, chosen: Sequence[int]) -> str:
    """A colocated read needs bucket *b* of every table on backend ``chosen[b]``."""
    for view, parts in reads.values():
        if view.group_id != group_id:
            continue
        for p in parts:
            for seq, replicas in enumerate(p.buckets):
                if chosen[seq] not in {r.backend_id for r in replicas}:
                    return (f"{NOT_STABLE}: {view.qualified_name}/{p.value} bucket {seq} has no verified replica on "
                            f"backend {chosen[seq]}")
    return ""

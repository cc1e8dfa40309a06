"""Which replica of every bucket a read registers, and which tables of a query are read bucketed.

Tables that cannot take part in a colocated join are registered without a bucket spec, so Spark
shuffles exactly them, and the reason travels with the plan to the explain. Pure: the caller reads
the catalog and passes what it read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from airflow_colocate.core.contract import ReadPartition, ReadReplica, ReadTable
from airflow_colocate.core.errors import PlacementError
from airflow_colocate.model.reasons import Fallback, JoinPolicy
from airflow_colocate.model.rules import group_join_fallback
from airflow_colocate.model.views import GroupView, PartitionReplicas, ReplicaView, TableView
from airflow_colocate.placement.replica_choice import choose_replicas


def read_table(view: TableView, partitions: Sequence[PartitionReplicas], *, available: Collection[int],
               chosen: Sequence[int] | None = None, name: str | None = None, bucketed: bool = True,
               read_buckets: int = 0) -> ReadTable:
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
        parts.append(ReadPartition(value=p.value, bucket_paths=paths, candidates=candidates,
                                   layout_buckets=p.layout_buckets if p.layout_buckets != len(p.buckets) else 0))
    return ReadTable(name=name or view.name, columns=[list(c) for c in view.columns], dist_cols=list(view.dist_cols),
                     partition_cols=list(view.partition_cols), bucket_num=view.bucket_num, partitions=parts,
                     bucketed=bucketed, table=view.qualified_name,
                     read_buckets=read_buckets if bucketed and 0 < read_buckets < view.bucket_num else 0)


def _read_replica(r: ReplicaView) -> ReadReplica:
    return ReadReplica(replica_id=r.id, backend_id=r.backend_id, path=r.path, bytes=r.bytes, rows=r.rows,
                       checksum=r.checksum,
                       files=None if r.files is None else [[n, int(size)] for n, size in r.files])


@dataclass(frozen=True)
class JoinReads:
    tables: list[ReadTable]
    reasons: dict[str, str]  # alias -> reason it is not bucketed ('' if bucketed)
    groups: dict[str, str]  # alias -> group id or ''
    group: str | None  # the group read colocated, if any
    chosen: list[int] | None  # backend per bucket seq for that group
    notes: tuple[str, ...] = ()  # what the explain says about the bucket reads (an unstable group read bucketed)
    peers: Mapping[str, str] = field(default_factory=dict)  # other group id -> the group it joins bucket by bucket


def plan_reads(reads: Mapping[str, tuple[TableView, Sequence[PartitionReplicas]]], groups: Mapping[str, GroupView],
               *, available: Collection[int], disabled: bool, hosts: Mapping[int, str] | None = None,
               executor_hosts: Collection[str] | None = None, names: Mapping[int, str] | None = None,
               policy: str | None = None) -> JoinReads:
    """Register every table of the query; tables of the best-represented stable group bucketed,
    reading bucket *b* of all of them from one backend (spread over ``hosts``, backend id -> host,
    preferring backends on ``executor_hosts``: placement.replica_choice). ``names``: backend id ->
    name, for the reason a group's join shuffles (``model.rules.group_join_fallback``). ``policy``
    overrides the group's join policy for this query (``model.reasons.JoinPolicy``)."""
    in_group = Counter(view.group_id for view, _ in reads.values() if view.group_id)
    group_id = in_group.most_common(1)[0][0] if in_group else None
    chosen, group_reason = None, ""
    effective = JoinPolicy.parse(policy or groups[group_id].join_policy) if group_id is not None else JoinPolicy.STABLE
    if disabled:
        group_reason = Fallback.DISABLED.because()
    elif group_id is not None:
        chosen, group_reason = _choose_group(reads, group_id, groups[group_id], available=available, hosts=hosts,
                                             executor_hosts=executor_hosts, names=names or {},
                                             policy=effective)
    peers: dict[str, tuple[str, list[int] | None]] = {}
    if group_id is not None and not group_reason:
        peers = _peers(reads, groups, group_id, available=available, hosts=hosts, executor_hosts=executor_hosts,
                       names=names or {}, policy=policy)
    reasons = {alias: "" if view.group_id in peers and not disabled else
               _table_reason(view, group_id, group_reason, disabled, groups) for alias, (view, _) in reads.items()}
    own = {view.group_id: chosen for view, _ in reads.values()} | {g: c for g, (_, c) in peers.items()}
    coarsest = read_count(groups, group_id, peers) if group_id is not None and not group_reason else 0
    tables = [read_table(view, parts, available=available, chosen=own.get(view.group_id) if not reasons[alias] else None,
                         name=alias, bucketed=not reasons[alias], read_buckets=coarsest)
              for alias, (view, parts) in reads.items()]
    notes = () if group_reason or group_id is None else _remote_note(groups[group_id], tables, reasons, effective)
    notes += layout_notes(reads, groups, reasons, peers)
    return JoinReads(tables=tables, reasons=reasons,
                     groups={alias: view.group_id or "" for alias, (view, _) in reads.items()},
                     group=group_id if not group_reason else None, chosen=chosen, notes=notes,
                     peers={g: main for g, (main, _) in peers.items()})


def _peers(reads, groups: Mapping[str, GroupView], group_id: str, *, available, hosts, executor_hosts, names,
           policy: str | None) -> dict[str, tuple[str, list[int] | None]]:
    """The other groups of the query whose tables join ``group_id``'s bucket by bucket: the same
    distribution column types and map counts that divide one another (Spark's bucket ids nest:
    ``pmod(h, k·n) mod n = pmod(h, n)``, whatever finer layout each was split to), and bucketed
    reads allowed by their own join policy. All are read at the coarsest count (:func:`read_count`):
    a group created at k·n reads its buckets b, b+n, ... in task b. Each reads its own replicas:
    such a join loses locality between the groups, never rows."""
    main = groups[group_id]
    out = {}
    for other in sorted({v.group_id for v, _ in reads.values() if v.group_id and v.group_id != group_id}):
        g = groups[other]
        if not _nested(g.bucket_num, main.bucket_num) or tuple(g.dist_col_types) != tuple(main.dist_col_types):
            continue
        chosen, reason = _choose_group(reads, other, g, available=available, hosts=hosts,
                                       executor_hosts=executor_hosts, names=names,
                                       policy=JoinPolicy.parse(policy or g.join_policy))
        if not reason:
            out[other] = (group_id, chosen)
    coarsest = read_count(groups, group_id, out)
    return {g: v for g, v in out.items() if groups[g].bucket_num % coarsest == 0}


def _nested(a: int, b: int) -> bool:
    return a % b == 0 or b % a == 0


def read_count(groups: Mapping[str, GroupView], group_id: str, peers: Mapping[str, tuple[str, object]]) -> int:
    """The bucket count a colocated read runs at: the coarsest of the group's and its peers' map
    counts (each a multiple of it, or the peer is not kept: :func:`_peers`)."""
    return min([groups[group_id].bucket_num, *(groups[g].bucket_num for g in peers)])


def layout_notes(reads, groups: Mapping[str, GroupView], reasons: Mapping[str, str],
                 peers: Mapping[str, tuple[str, list[int] | None]]) -> tuple[str, ...]:
    """What the explain says of split layouts read bucketed: per table, how many partitions were
    written at which bucket count (all read at the map's count: finer bucket j with bucket j mod n),
    and each other group joined bucket by bucket."""
    lines = []
    for alias, (view, parts) in reads.items():
        if reasons.get(alias) or not view.group_id:
            continue
        counts = Counter(p.layout_buckets or len(p.buckets) for p in parts)
        if len(counts) > 1 or any(c != view.bucket_num for c in counts):
            shown = " and ".join(f"{n} at {c}" for c, n in sorted(counts.items()))
            lines.append(f"bucket layouts: {alias} reads partitions at {' and '.join(map(str, sorted(counts)))} buckets "
                         f"({shown}), bucket by bucket at {view.bucket_num}: a finer bucket j is read with bucket "
                         f"j mod {view.bucket_num}, no shuffle")
    coarsest = 0
    for other, (main, _) in sorted(peers.items()):
        g, m_ = groups[other], groups[main]
        coarsest = read_count(groups, main, peers)
        lines.append(f"bucket layouts: group {g.full_name} (layout {g.layout} buckets) joins group {m_.full_name} "
                     f"(layout {m_.layout}) bucket by bucket at {coarsest} buckets, each read from its own group's "
                     f"replicas (no shuffle; locality only within a group)")
    for gid in sorted({main for main, _ in peers.values()} | set(peers)):
        g = groups[gid]
        if coarsest and g.bucket_num > coarsest:
            k = g.bucket_num // coarsest
            finer = ", ".join(f"b+{i * coarsest}" for i in range(1, min(k, 3))) + (", ..." if k > 3 else "")
            lines.append(f"bucket layouts: group {g.full_name} was created at {g.bucket_num} buckets and is read at "
                         f"{coarsest}: task b reads its {k} buckets b, {finer}, each from its own replicas (no "
                         f"shuffle; those replicas' backends need not share a host, so such a task may read "
                         f"remotely)")
    return tuple(lines)


def _choose_group(reads, group_id: str, g: GroupView, *, available, hosts, executor_hosts, names,
                  policy: JoinPolicy) -> tuple[list[int] | None, str]:
    """The backend per bucket seq that the group's tables read, or why the group's join shuffles.
    Under ``JoinPolicy.READABLE`` a bucket whose chosen backend lacks its replica reads another
    verified one on an alive backend (``read_table``), and no backend may be chosen at all."""
    mapped = {b for ids in g.bucket_map for b in ids}
    readable = policy is JoinPolicy.READABLE
    reason = group_join_fallback(disabled=False, stable=g.stable, unstable_reason=g.unstable_reason,
                                 mapped=mapped, alive=available, names=names, policy=policy,
                                 unreadable=_unreadable(reads, group_id, available) if readable else None)
    if reason:
        return None, reason
    try:
        chosen = choose_replicas(g.bucket_map, available, hosts=hosts, executor_hosts=executor_hosts)
    except PlacementError as exc:
        return (None, "") if readable else (None, Fallback.NOT_STABLE.because(str(exc)))
    reason = "" if readable else _missing_replica(reads, group_id, chosen)
    return (None, reason) if reason else (chosen, "")


def _unreadable(reads, group_id: str, available: Collection[int]) -> str | None:
    """The first bucket of the group's tables that no verified replica on an alive backend holds."""
    for view, parts in reads.values():
        if view.group_id != group_id:
            continue
        for p in parts:
            for seq, replicas in enumerate(p.buckets):
                if not any(r.backend_id in available for r in replicas):
                    held = ", ".join(sorted({str(r.backend_id) for r in replicas})) or "none"
                    return (f"{view.qualified_name}/{p.value} bucket {seq} has no verified replica on an alive "
                            f"backend (replicas on backend ids {held})")
    return None


def _remote_note(g: GroupView, tables: Sequence[ReadTable], reasons: Mapping[str, str],
                 policy: JoinPolicy) -> tuple[str, ...]:
    """For a group read bucketed while it is not stable (join policy ``readable``): which buckets
    read a replica other than their map's first backend, and which of those read off every
    backend their map names (their tasks read remotely)."""
    first, off = set(), set()
    for t in tables:
        if reasons.get(t.name):
            continue
        for p in t.partitions:
            for seq, cands in enumerate(p.candidates):
                if cands and seq < len(g.bucket_map) and g.bucket_map[seq]:
                    if cands[0].backend_id != g.bucket_map[seq][0]:
                        first.add(seq)
                    if cands[0].backend_id not in g.bucket_map[seq]:
                        off.add(seq)
    if g.stable and not off:
        return ()

    def listed(seqs: set[int]) -> str:
        ordered = sorted(seqs)
        return (": " + ", ".join(map(str, ordered[:20])) + (", ..." if len(ordered) > 20 else "")) if ordered else ""

    state = "stable" if g.stable else f"not stable ({g.unstable_reason or 'marked unstable'})"
    return (f"bucket reads: group {g.full_name} is {state} and stays bucketed (join policy "
            f"{policy.value}); {len(first)} of {g.bucket_num} buckets read a replica other than their map's "
            f"first{listed(first)}; {len(off)} read off their map's backends (remote){listed(off)}",)


def _table_reason(view: TableView, group_id: str | None, group_reason: str, disabled: bool,
                  groups: Mapping[str, GroupView] | None = None) -> str:
    if disabled:
        return Fallback.DISABLED.because()
    if view.group_id is None:
        return Fallback.NOT_COLOCATED.because()
    if view.group_id != group_id:
        mine, main = (groups or {}).get(view.group_id), (groups or {}).get(group_id or "")
        if mine is not None and main is not None and mine.bucket_num != main.bucket_num:
            return Fallback.NOT_SAME_GROUP.because(
                f"{view.name} is in group {view.group_name}, whose map has {mine.bucket_num} buckets, not "
                f"{main.bucket_num}: groups join bucket by bucket only when their map counts divide one another "
                f"(a group split to a finer layout keeps its map's count: colocate group split)")
        return Fallback.NOT_SAME_GROUP.because(f"{view.name} is in group {view.group_name}")
    return group_reason


def _missing_replica(reads, group_id: str, chosen: Sequence[int]) -> str:
    """A colocated read needs bucket *b* of every table on backend ``chosen[b]``."""
    for view, parts in reads.values():
        if view.group_id != group_id:
            continue
        for p in parts:
            for seq, replicas in enumerate(p.buckets):
                if chosen[seq] not in {r.backend_id for r in replicas}:
                    return Fallback.NOT_STABLE.because(
                        f"{view.qualified_name}/{p.value} bucket {seq} has no verified replica on backend {chosen[seq]}")
    return ""

"""Turn catalog state into the JSON plans the Spark jobs execute. Pure: no database, no Spark."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

from airflow_colocate.catalog.views import PartitionReplicas, TableView, WriteTicket
from airflow_colocate.errors import PlacementError
from airflow_colocate.plans import BucketTarget, ReadPartition, ReadTable, ReplicaTarget, Source, WritePlan
from airflow_colocate.storage import layout


def write_plan(ticket: WriteTicket, source: Source, work_uri: str) -> WritePlan:
    """Every bucket's replica directories in the new version, primary first."""
    t = ticket.table
    buckets = []
    for seq, targets in enumerate(ticket.targets):
        replicas = [ReplicaTarget(backend_id, layout.replica_dir(root, t.db, t.name, t.id, ticket.partition_value,
                                                                  ticket.version, seq))
                    for backend_id, root in targets]
        base = list(ticket.base_paths[seq]) if ticket.base_version else []
        buckets.append(BucketTarget(seq, replicas, base))
    # Spark's raw output goes to the backend that is primary for most buckets, so that placing the
    # files is mostly a rename on the same file system.
    primaries = Counter(targets[0][1] for targets in ticket.targets)
    staging_root = primaries.most_common(1)[0][0]
    job = f"write-{ticket.job_id}"
    return WritePlan(job_id=job, table=t.qualified_name, columns=[list(c) for c in t.columns],
                     dist_cols=list(t.dist_cols), partition_cols=list(t.partition_cols),
                     partition_value=ticket.partition_value, bucket_num=len(ticket.targets), mode=ticket.mode,
                     version=ticket.version, source=source, buckets=buckets,
                     staging_uri=layout.staging_dir(staging_root, job),
                     report_uri=f"{work_uri.rstrip('/')}/{job}/report.json")


def read_table(view: TableView, partitions: Sequence[PartitionReplicas], *, available: Collection[int],
               chosen: Sequence[int] | None = None, name: str | None = None, bucketed: bool = True) -> ReadTable:
    """Register ``view`` reading, per bucket, the replica on ``chosen[bucket]`` (a colocated join
    reads every table's bucket b from one backend) or else the first verified replica on an
    available backend."""
    parts = []
    for p in partitions:
        paths = []
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
        parts.append(ReadPartition(value=p.value, bucket_paths=paths))
    return ReadTable(name=name or view.name, columns=[list(c) for c in view.columns], dist_cols=list(view.dist_cols),
                     partition_cols=list(view.partition_cols), bucket_num=view.bucket_num, partitions=parts,
                     bucketed=bucketed)

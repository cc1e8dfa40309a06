"""The write plan: where every bucket's replicas of a new partition version go. Pure."""

from __future__ import annotations

from collections import Counter

from airflow_colocate.model.views import WriteTicket
from airflow_colocate.core.contract import BucketTarget, ReplicaTarget, Source, WritePlan
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
        files = ([None if f is None else [list(x) for x in f] for f in ticket.base_files[seq]]
                 if ticket.base_version and ticket.base_files else [])
        buckets.append(BucketTarget(seq, replicas, base, files))
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
                     report_uri=f"{work_uri.rstrip('/')}/{job}/report.json",
                     layout_buckets=ticket.layout_buckets if ticket.layout_buckets != len(ticket.targets) else 0)

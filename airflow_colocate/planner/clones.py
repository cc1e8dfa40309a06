"""Clone plans: which source each needed replica is copied from, and how a round's copies are cut
into batches. Pure: the balance loop (:mod:`airflow_colocate.jobs.balance`) runs and registers them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from airflow_colocate.model.views import CloneNeed
from airflow_colocate.core.contract import ClonePlan, CloneTask, VerifyTask
from airflow_colocate.storage.layout import copied_by_the_store


def clone_plan(job_id: str, needs: Sequence[CloneNeed], report_uri: str,
               verifies: Sequence[VerifyTask] = ()) -> ClonePlan:
    """One task per needed replica; each source is the first-ranked healthy replica, spread so that
    no backend is read more than needed (least-used source among the equally ranked ones)."""
    used: Counter[int] = Counter()
    tasks = []
    for need in needs:
        best_rank = None
        choice = None
        for rank, (be, path) in enumerate(need.sources):
            key = (rank > 0, used[be])  # the preferred source (the move's own) when it is healthy
            if choice is None or key < best_rank:
                best_rank, choice = key, (be, path)
        used[choice[0]] += 1
        tasks.append(CloneTask(key=f"{need.partition_id}:{need.version}:{need.bucket_seq}:{need.backend_id}",
                               table=need.table, partition_id=need.partition_id, partition=need.partition,
                               version=need.version, bucket_seq=need.bucket_seq, backend_id=need.backend_id,
                               src_backend_id=choice[0], src=choice[1], dst=need.path, checksum=need.checksum,
                               bytes=need.bytes, rows=need.rows, sizes=dict(need.files or ()), root=need.root,
                               fresh=need.fresh, etags=dict(need.etags).get(choice[0]) or {}))
    return ClonePlan(job_id=job_id, copies=tasks, report_uri=report_uri, verifies=list(verifies))


def clone_batches(needs: Sequence[CloneNeed], max_bytes: int, max_replicas: int,
                  store_copy_replicas: int | None = None) -> list[list[CloneNeed]]:
    """``needs`` dealt into as few batches as keep each within ``max_replicas`` replicas and about
    ``max_bytes`` bytes, biggest first round robin, so every batch holds its share of the large
    replicas and of the small ones: a batch's few large copies keep the disk writing while its many
    small ones keep the cores busy (measured: biggest-first batches left the cores idle while the
    first batch's large files were written back, then the disk idle for the small ones), and each
    batch moves the progress by about the same bytes. A replica larger than ``max_bytes`` counts as
    ``max_bytes`` (it is one copy whatever its batch: a 64 GiB bucket must not cut thousands of
    small ones into batches of a few).

    ``store_copy_replicas``: the needs the store copies itself (S3 API to S3 API,
    :func:`storage.layout.copied_by_the_store`) go in batches of their own of up to that many,
    with no byte bound: their bytes never pass through the clone job, and every batch boundary
    costs the wait for its slowest request and a registration (measured on a lost S3 backend of
    10,240 replicas, bench_s3_repair.py: seven batches ×1.31-1.35 a plain server-side copy of the
    same objects, one batch ×1.08-1.19), while a killed run redoes at most one batch of cheap
    requests."""
    if not store_copy_replicas:
        return _deal(needs, max_bytes, max_replicas)
    by_store, rest = [], []
    for n in needs:
        (by_store if copied_by_the_store(n.path, [p for _, p in n.sources]) else rest).append(n)
    return (_deal(rest, max_bytes, max_replicas)
            + _deal(by_store, sum(n.bytes for n in by_store) + 1, store_copy_replicas))


def _deal(needs: Sequence[CloneNeed], max_bytes: int, max_replicas: int) -> list[list[CloneNeed]]:
    ordered = sorted(needs, key=lambda n: -n.bytes)
    if not ordered:
        return []
    cap = max(1, max_bytes)
    weight = sum(min(n.bytes, cap) for n in ordered)
    n = max(1, -(-len(ordered) // max(1, max_replicas)), min(len(ordered), -(-weight // cap)))
    return [ordered[i::n] for i in range(n)]

"""Versioned writes: begin a new partition version, commit or abort it, the replicas a read sees, garbage."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import timedelta

from sqlalchemy import bindparam, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import clone_targets
from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.clones import etags_of
from airflow_colocate.catalog.checks import (
    check_duration,
    check_partition_of,
    check_replication_vs_backends,
)
from airflow_colocate.catalog.rows import (
    partition_view,
    slot_load,
    table_row,
    table_view,
)
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.summary import tracking
from airflow_colocate.model.views import (
    GarbageItem,
    PartitionView,
    WriteTicket,
)
from airflow_colocate.core import naming
from airflow_colocate.core.contract import WriteReport
from airflow_colocate.core.errors import (
    ColocateError,
    Conflict,
    InvalidArgument,
    NotFound,
    PlacementError,
)
from airflow_colocate.core.times import utc
from airflow_colocate.placement.initial import initial_map
from airflow_colocate.placement.model import BackendSlot
from airflow_colocate.storage import layout


def _write_map(s: Session, t: m.Table, p: m.Partition, backends: dict, base_version: int) -> list[list[int]]:
    """The group's map; for a table outside any group, where its partition already lives, else
    a fresh round-robin placement."""
    if t.group_id is not None:
        rows = s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == t.group_id).order_by(m.BucketMap.bucket_seq))
        return [list(r.backend_ids) for r in rows]
    if p.visible_version:
        placed: dict[int, list[int]] = {}
        for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == p.visible_version,
                                                   m.Replica.state == "verified").order_by(m.Replica.id)):
            placed.setdefault(r.bucket_seq, []).append(r.backend_id)
        if len(placed) == p.bucket_num:
            return [placed[b] for b in range(p.bucket_num)]
    slots = [BackendSlot(id=b.id, host=b.host, capacity_bytes=b.capacity_bytes, available=b.state == "alive")
             for b in sorted(backends.values(), key=lambda b: b.id)]
    return initial_map(slots, p.bucket_num, p.replication_num, load=slot_load(s))

def _layout(s: Session, t: m.Table, p: m.Partition, base_version: int) -> int:
    """The bucket count a new version is written with: an append keeps its base version's (its
    files are carried over as they are), any other write takes the group's current layout
    (``group split``) when the partition has the group's bucket count."""
    if base_version:
        base = s.get(m.PartitionVersion, (p.id, base_version))
        return (base.layout_buckets if base is not None else None) or p.bucket_num
    g = s.get(m.ColocateGroup, t.group_id) if t.group_id is not None else None
    if g is not None and g.layout_buckets and p.bucket_num == g.bucket_num:
        return g.layout_buckets
    return p.bucket_num


def _base_paths(s: Session, p: m.Partition, base_version: int, targets: list) -> tuple[tuple, tuple]:
    """Per bucket and target: the base version's replica directory an append carries over, and
    the files the catalog recorded for it (checked before they are carried: a missing or short
    base file must not become a short new version)."""
    if not base_version:
        return tuple(tuple("" for _ in bucket) for bucket in targets), ()
    verified: dict[int, dict[int, m.Replica]] = {}
    for r in s.scalars(select(m.Replica).where(m.Replica.partition_id == p.id, m.Replica.version == base_version,
                                               m.Replica.state == "verified")):
        verified.setdefault(r.bucket_seq, {})[r.backend_id] = r
    paths, files = [], []
    for seq, bucket in enumerate(targets):
        have = verified.get(seq, {})
        if not have:
            raise Conflict(f"cannot append to partition {p.value}: bucket {seq} of version {base_version} has no "
                           f"verified replica; repair the group first or overwrite the partition")
        anyone = next(iter(have.values()))
        chosen = [have.get(backend_id, anyone) for backend_id, _ in bucket]
        paths.append(tuple(r.path for r in chosen))
        files.append(tuple(None if r.files is None else tuple((str(n), int(b)) for n, b in r.files) for r in chosen))
    return tuple(paths), tuple(files)

def _write_job(s: Session, job_id: int, *, allow_finished: bool = False):
    job = s.get(m.Job, job_id)
    if job is None or job.kind != "write":
        raise NotFound(f"unknown write job {job_id}")
    if job.state != "running" and not allow_finished:
        raise Conflict(f"write job {job_id} is {job.state}, not running: nothing to commit")
    p = s.get(m.Partition, job.plan["partition_id"])
    if p is None:
        raise Conflict(f"write job {job_id}: its table or partition was purged while it ran")
    pv = s.get(m.PartitionVersion, (p.id, job.plan["version"]))
    return job, p, pv, s.get(m.Table, p.table_id)

def _version_trees(s: Session, pid: int, version: int, dirs: Iterable[str]) -> list[str]:
    """The directories to delete for a garbage version: the version directories its write was
    granted, plus the version directory of any replica elsewhere (a clone), one tree per
    backend instead of one path per replica row."""
    trees = set(dirs)
    for path in s.scalars(select(m.Replica.path).where(m.Replica.partition_id == pid, m.Replica.version == version)):
        if any(path == d or path.startswith(d.rstrip("/") + "/") for d in trees):
            continue
        parent, _, leaf = path.rstrip("/").rpartition("/")
        in_layout = re.fullmatch(r"b\d{5}", leaf) and parent.endswith(f"/v{version:06d}")
        trees.add(parent if in_layout else path)
    return sorted(trees)


class Writes:
    """Versioned writes: begin a new partition version, commit or abort it, the replicas a read sees, garbage."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def begin(self, ref: str, partition_value: str, *, mode: str = "overwrite", db: str | None = None,
                    plan: dict | None = None) -> WriteTicket:
        """Allocate a new partition version in state ``staging`` and say where each bucket goes.

        Nothing becomes visible until :meth:`commit`; a write that dies leaves the version in
        staging, and ``colocate gc`` removes its files after the stale period.
        """
        if mode not in ("overwrite", "append"):
            raise InvalidArgument(f"invalid write mode {mode!r}: expected 'overwrite' (replace the partition) or 'append'")
        naming.check_partition_value(partition_value)

        def run(s: Session) -> WriteTicket:
            t = table_row(s, ref, db)
            view = table_view(s, t)
            p = s.scalar(select(m.Partition).where(m.Partition.table_id == t.id, m.Partition.value == partition_value))
            if p is None:
                if not t.partition_cols and partition_value != "all":
                    raise InvalidArgument(f"table {view.qualified_name} is not partitioned: write partition 'all', not {partition_value!r}")
                check_partition_of(t, partition_value)
                buckets, replicas = t.bucket_num, t.replication_num
                if t.group_id is not None:
                    g = s.get(m.ColocateGroup, t.group_id)
                    buckets, replicas = g.bucket_num, g.replication_num
                p = m.Partition(table_id=t.id, value=partition_value, bucket_num=buckets, replication_num=replicas,
                                visible_version=0, next_version=1, created_at=self.db.now())
                s.add(p)
                s.flush()
            if p.dropped_at is not None:
                raise Conflict(f"cannot write {view.qualified_name}/{partition_value}: the partition is in the recycle bin; "
                               f"'colocate partition recover {view.qualified_name} {partition_value}' brings it back, "
                               f"'colocate partition drop {view.qualified_name} {partition_value} --force' purges it so it "
                               f"can be written anew")
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            alive = [b for b in backends.values() if b.state == "alive"]
            if len({b.host for b in alive}) < p.replication_num:
                check_replication_vs_backends(s, p.replication_num)
            base_version = p.visible_version if mode == "append" else 0
            bucket_map = _write_map(s, t, p, backends, base_version)
            quorum = p.replication_num // 2 + 1
            targets, missing = [], []
            for seq, ids in enumerate(bucket_map):
                ok = [(i, backends[i].root_uri) for i in ids if i in backends and backends[i].state == "alive"]
                missing += [f"bucket {seq} on backend {backends[i].name if i in backends else i}" for i in ids
                            if i not in backends or backends[i].state != "alive"]
                if len(ok) < quorum:
                    down = ", ".join(backends[i].name if i in backends else str(i) for i in ids
                                     if i not in backends or backends[i].state != "alive")
                    raise PlacementError(
                        f"cannot write {view.qualified_name}/{partition_value}: bucket {seq} is mapped to backends "
                        f"{', '.join(map(str, ids))}, of which {down} are not alive, leaving {len(ok)} of the {quorum} "
                        f"replicas a write needs: bring the backends back ('colocate backend mark-up') or repair the group"
                    )
                targets.append(tuple(ok))
            base_paths, base_files = _base_paths(s, p, base_version, targets)
            layout_buckets = _layout(s, t, p, base_version)
            version = p.next_version
            p.next_version += 1
            job = m.Job(kind="write", group_id=t.group_id, state="running", plan=plan or {}, progress={},
                        created_at=self.db.now(), updated_at=self.db.now(), gc_pending="staging_uri" in (plan or {}))
            s.add(job)
            s.flush()
            s.add(m.PartitionVersion(partition_id=p.id, version=version, state="staging", mode=mode,
                                     base_version=base_version, created_at=self.db.now(), job_id=job.id,
                                     layout_buckets=layout_buckets if layout_buckets != p.bucket_num else None))
            job.plan = dict(job.plan, table_id=t.id, partition_id=p.id, version=version,
                            dirs=sorted({layout.version_dir(root, view.db, t.name, t.id, partition_value, version)
                                         for bucket in targets for _, root in bucket}))
            self.db.event(s, "write.begin", f"{view.qualified_name}/{partition_value}", job_id=job.id, version=version,
                        mode=mode, base_version=base_version, missing=missing)
            return WriteTicket(job_id=job.id, table=view, partition_id=p.id, partition_value=partition_value,
                               version=version, base_version=base_version, mode=mode, targets=tuple(targets),
                               base_paths=base_paths, missing=tuple(missing), base_files=base_files,
                               layout_buckets=layout_buckets)

        return self.db.tx(run)

    def commit(self, job_id: int, report: WriteReport) -> PartitionView:
        """Check the job's report against what :meth:`begin` granted, then make the version
        visible, in one transaction. Any mismatch aborts the version and commits nothing."""
        result = self.commit_many([(job_id, report)])[job_id]
        if isinstance(result, ColocateError):
            raise result
        return result

    def commit_many(self, items: Sequence[tuple[int, WriteReport]]) -> dict[int, PartitionView | ColocateError]:
        """Commit many writes in ONE transaction (a bulk import's placed partitions: one fsync, not
        one per partition). Each report is checked as :meth:`commit` checks it; one that does
        not match is aborted on its own (its previous version stays visible) and does not stop the
        others. Returns, per job, its new partition view or the error that kept it out."""
        problems: dict[int, list[str]] = {}
        refused: dict[int, ColocateError] = {}

        # the events of one transaction of several commits share it: one Iceberg snapshot replays them
        batch = f"write-{items[0][0]}" if len(items) > 1 else None

        def run(s: Session) -> dict[int, PartitionView]:
            problems.clear()
            refused.clear()
            done = {}
            for job_id, report in items:
                try:  # an unknown or finished job is refused before anything changes
                    view = self._commit_in(s, job_id, report, problems.setdefault(job_id, []), batch)
                except (NotFound, Conflict) as exc:
                    refused[job_id] = exc
                    continue
                if view is not None:
                    done[job_id] = view
            return done

        out: dict[int, PartitionView | ColocateError] = dict(self.db.tx(run)) if items else {}
        out.update(refused)
        for job_id, found in problems.items():
            if found:
                reason = "; ".join(found)
                self.abort(job_id, reason)
                out[job_id] = ColocateError(f"write job {job_id} not committed, the previous version stays visible: "
                                            f"{reason}")
        return out

    def _commit_in(self, s: Session, job_id: int, report: WriteReport, problems: list[str],
                   batch: str | None = None) -> PartitionView | None:
        """Check one report (problems go to ``problems``, nothing changes) and, when it holds, make its
        version visible in the session's transaction."""
        job, p, pv, t = _write_job(s, job_id)
        label = f"{table_view(s, t).qualified_name}/{p.value}"
        if report.version != pv.version or report.partition_value != p.value:
            problems.append(f"the report is for {report.partition_value} v{report.version}, the job wrote {p.value} v{pv.version}")
        granted = job.plan.get("targets", {})
        by_bucket: dict[int, list] = {}
        for r in report.replicas:
            by_bucket.setdefault(r.bucket_seq, []).append(r)
        for seq in range(p.bucket_num):
            want = sorted(granted.get(str(seq), []))
            got = by_bucket.get(seq, [])
            if sorted(r.backend_id for r in got) != want:
                problems.append(f"bucket {seq} has replicas on backends {sorted(r.backend_id for r in got)}, expected {want}")
                continue
            if len({r.checksum for r in got}) > 1 or len({r.rows for r in got}) > 1:
                problems.append(f"bucket {seq} replicas differ: " + ", ".join(f"backend {r.backend_id}: {r.rows} rows, {r.checksum[:12]}" for r in got))
        if p.dropped_at is not None:
            problems.append(f"partition {p.value} was dropped while this write ran; recover it or purge it, then re-run")
        if pv.mode == "append" and p.visible_version != pv.base_version:
            problems.append(f"partition moved from v{pv.base_version} to v{p.visible_version} while this append ran; re-run it")
        for r in report.replicas:
            files = _recorded_files(r)
            if files is not None and sum(size for _, size in files) != r.bytes:
                problems.append(f"bucket {r.bucket_seq} on backend {r.backend_id}: its files add up to "
                                f"{sum(size for _, size in files)} bytes, the report says {r.bytes}")
        if problems:
            return None  # nothing changed: the caller aborts it in a transaction of its own
        now = self.db.now()
        rows = sum(got[0].rows for got in by_bucket.values())
        old = p.visible_version
        with tracking(s, partitions=[p.id]):  # the summaries swap the old version's buckets for the new
            # One statement for every replica (row by row, the inserts were most of a commit's time).
            s.execute(insert(m.Replica), [
                dict(table_id=t.id, partition_id=p.id, version=pv.version, bucket_seq=r.bucket_seq, backend_id=r.backend_id,
                     state="verified", path=r.path, rows=r.rows, bytes=r.bytes, checksum=r.checksum, created_at=now,
                     files=_recorded_files(r), etags=etags_of(r))
                for r in report.replicas])
            if old:
                prev = s.get(m.PartitionVersion, (p.id, old))
                prev.state, prev.finished_at = "superseded", now
            pv.state, pv.rows, pv.bytes, pv.finished_at = "committed", rows, sum(r.bytes for r in report.replicas), now
            p.visible_version = pv.version
        job.state, job.updated_at = "committed", now
        job.progress = {"rows": rows, "replicas": len(report.replicas)}
        if t.group_id is not None and job.plan.get("missing"):
            g = s.get(m.ColocateGroup, t.group_id)
            g.stable = False
            g.unstable_reason = f"{label} v{pv.version} is missing replicas: " + "; ".join(job.plan["missing"][:5])
            g.version += 1
        self.db.event(s, "write.commit", label, job_id=job_id, version=pv.version, previous=old, rows=rows,
                      mode=pv.mode, **({"batch": batch} if batch else {}))
        return partition_view(p)

    def abort(self, job_id: int, reason: str) -> None:
        def run(s: Session) -> None:
            job, p, pv, t = _write_job(s, job_id, allow_finished=True)
            if pv.state != "staging":
                return
            pv.state, pv.finished_at = "aborted", self.db.now()
            job.state, job.updated_at, job.progress = "failed", self.db.now(), {"error": reason[:2000]}
            self.db.event(s, "write.abort", f"{table_view(s, t).qualified_name}/{p.value}", job_id=job_id,
                        version=pv.version, reason=reason[:2000])

        self.db.tx(run)

    def set_targets(self, job_id: int, targets: dict[int, list[int]], missing: Sequence[str], plan: dict) -> None:
        """Record the exact plan handed to Spark so that commit checks the report against it."""
        def run(s: Session) -> None:
            job = s.get(m.Job, job_id)
            job.plan = dict(job.plan, **plan, targets={str(k): list(v) for k, v in targets.items()}, missing=list(missing))
            job.gc_pending = "staging_uri" in job.plan
            job.updated_at = self.db.now()

        self.db.tx(run)

    def garbage(self, *, grace: timedelta = timedelta(hours=1), stale_after: timedelta = timedelta(hours=24),
                claim: bool = False) -> list[GarbageItem]:
        """Files no reader needs: aborted and superseded versions older than ``grace``, writes
        still in staging after ``stale_after`` (their job died), and the directories of clones
        their ended balance job abandoned (:mod:`catalog.clone_targets`). Also marks those stale
        writes aborted, so that a late report can no longer commit them, and (``claim``: gc, before
        it deletes; not a dry run or a listing) those clone directories ``removing``, so that no
        balance clones there meanwhile."""
        check_duration("grace period", grace, "1 hour, the default")
        check_duration("stale period", stale_after, "24 hours, the default")
        def run(s: Session) -> list[GarbageItem]:
            now = self.db.now()
            items: list[GarbageItem] = []
            # Set queries on small indexes: the running writes (stale ones are aborted), the writes
            # whose staging directory is still there, the writers of aborted and superseded versions.
            # (The conditions repeat the partial indexes' own, so that SQLite uses them.)
            old = list(s.execute(
                select(m.PartitionVersion.partition_id, m.PartitionVersion.version, m.PartitionVersion.state,
                       m.PartitionVersion.job_id)
                .where(m.PartitionVersion.state.in_(("staging", "aborted", "superseded")),
                       m.PartitionVersion.state != "staging", m.PartitionVersion.finished_at <= now - grace)))
            ids = set(s.scalars(select(m.Job.id).where(m.Job.kind == "write", m.Job.state == "running")))
            ids.update(s.scalars(select(m.Job.id).where(m.Job.gc_pending == True)))  # noqa: E712
            ids.update(job_id for _, _, _, job_id in old if job_id is not None)
            for job in s.scalars(select(m.Job).where(m.Job.id.in_(sorted(ids))).order_by(m.Job.id)) if ids else ():
                pid, version = job.plan.get("partition_id"), job.plan.get("version")
                pv = s.get(m.PartitionVersion, (pid, version)) if pid is not None else None
                if pv is None:
                    continue
                if pv.state == "staging" and utc(job.created_at) <= now - stale_after:
                    pv.state, pv.finished_at = "aborted", now
                    job.state, job.updated_at = "failed", now
                    self.db.event(s, "write.abort", f"job {job.id}", job_id=job.id, version=version, reason="stale")
                finished = utc(pv.finished_at)
                if pv.state in ("aborted", "superseded") and finished is not None and finished <= now - grace:
                    for d in _version_trees(s, pid, version, job.plan.get("dirs", [])):
                        items.append(GarbageItem(f"{pv.state} version", d, pid, version, job.id))
                    if "staging_uri" in job.plan:
                        items.append(GarbageItem("write staging", job.plan["staging_uri"], pid, version, job.id))
                if job.state in ("committed", "failed") and "staging_uri" in job.plan and pv.state != "staging":
                    if utc(job.updated_at) <= now - grace:
                        items.append(GarbageItem("write staging", job.plan["staging_uri"], None, None, job.id))
            for pid, version, state, job_id in old:
                if job_id is None:  # written before versions named their job: only the replica rows tell
                    items += [GarbageItem(f"{state} version", d, pid, version) for d in _version_trees(s, pid, version, [])]
            for job in s.scalars(select(m.Job).where(m.Job.kind == "gc", m.Job.state == "pending")):
                items += [GarbageItem(f"purged table {job.plan.get('table')}", path, job_id=job.id) for path in job.plan["paths"]]
            token = clone_targets.new_claim() if claim else None
            items += [GarbageItem("abandoned clone", path, target_id=i, claim=token)
                      for i, _, path in clone_targets.garbage(s, now, grace, claim=token)]
            return items

        return self.db.tx(run)

    def release_garbage(self, items: Iterable[GarbageItem]) -> None:
        """The abandoned clones among ``items`` gc left (unreachable, not deleted): unclaimed."""
        by_claim: dict[str, list[int]] = {}
        for i in items:
            if i.target_id is not None and i.claim is not None:
                by_claim.setdefault(i.claim, []).append(i.target_id)
        if by_claim:
            self.db.tx(lambda s: [clone_targets.release(s, ids, claim) for claim, ids in by_claim.items()])

    def forget_garbage(self, items: Iterable[GarbageItem]) -> None:
        """After the files are gone: drop the rows of the removed versions."""
        items = list(items)

        def run(s: Session) -> None:
            done = sorted({(i.partition_id, i.version) for i in items if i.partition_id is not None})
            if done:
                keys = [{"p": pid, "v": version} for pid, version in done]
                replicas, versions, partitions = m.Replica.__table__, m.PartitionVersion.__table__, m.Partition.__table__
                visible = select(partitions.c.visible_version).where(partitions.c.id == replicas.c.partition_id).scalar_subquery()
                # Never the visible version: what a reader uses (and the summaries count) is not garbage.
                s.execute(delete(replicas).where(replicas.c.partition_id == bindparam("p"), replicas.c.version == bindparam("v"),
                                                 replicas.c.version != visible), keys)
                s.execute(update(versions).where(versions.c.partition_id == bindparam("p"), versions.c.version == bindparam("v"),
                                                 # no IN (…): an expanding parameter cannot run executemany
                                                 or_(versions.c.state == "aborted", versions.c.state == "superseded"))
                          .values(state="removed"), keys)
            clone_targets.forget(s, [i.target_id for i in items if i.target_id is not None])
            for job_id in sorted({i.job_id for i in items if i.job_id is not None}):
                job = s.get(m.Job, job_id)
                if job is None:
                    continue
                if job.kind == "gc":
                    job.state, job.updated_at = "done", self.db.now()
                elif "staging_uri" in job.plan:
                    job.plan = {k: v for k, v in job.plan.items() if k != "staging_uri"}
                    job.gc_pending = False
            if items:  # a run that found nothing is no change: no event crowding Recent changes
                self.db.event(s, "gc", "catalog", versions=len(done), items=len(items))

        self.db.tx(run)


def _recorded_files(r) -> list[list] | None:
    """[[name, size], ...] of a reported replica, what reads check its directory against; None for
    a report without every size (a job from before 0.2: the replica is checked by its total)."""
    sizes = getattr(r, "sizes", None) or {}
    if any(n not in sizes for n in r.files):
        return None
    return [[n, int(sizes[n])] for n in sorted(r.files)]

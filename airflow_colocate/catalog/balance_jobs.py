"""Balance jobs (clone-and-drop): create, begin, revise, cancel, clone needs and results, map switch, finish, drops."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import clone_targets, clones
from airflow_colocate.catalog import models as m
from airflow_colocate.catalog.buckets import (lacking_rows, lacking_with_sources, load_buckets,
                                              mark_redundant)
from airflow_colocate.catalog.jobs import job_view
from airflow_colocate.catalog.rows import (active_job, bucket_maps, full_name, groups_of_tables, map_of,
                                           verified_backends)
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.catalog.snapshot import cluster_snapshot
from airflow_colocate.catalog.stability import find_problems, record_check
from airflow_colocate.catalog.summary import chunks, fetch, touch_tables, tracking
from airflow_colocate.model.views import (
    DEFAULT_RELOCATE_DELAY,
    ClusterSnapshot,
    ACTIVE,
    BALANCE_KINDS,
    DEFAULT_GRACE,
    Blocked,
    CloneNeed,
    DropItem,
    FinishResult,
    JobView,
    Reason,
    SwitchResult,
)
from airflow_colocate.core.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
)
from airflow_colocate.core.times import utc
from airflow_colocate.storage import layout


def _balance_job(s: Session, job_id: int) -> tuple[m.Job, m.ColocateGroup]:
    # one statement for both rows: every step of a balance job starts here
    found = s.execute(select(m.Job, m.ColocateGroup).outerjoin(m.ColocateGroup, m.ColocateGroup.id == m.Job.group_id)
                      .where(m.Job.id == job_id)).first()
    job, g = found if found is not None else (None, None)
    if job is None or job.kind not in BALANCE_KINDS:
        raise NotFound(f"unknown balance job {job_id}: 'colocate jobs list' shows the jobs")
    if g is None:
        raise Conflict(f"balance job {job_id}: its group was removed while it ran")
    return job, g


def _target(s: Session, job: m.Job, g: m.ColocateGroup) -> list[list[int]]:
    if job.progress.get("step") in ("switched", "finished"):
        return map_of(s, g.id)
    return [list(r) for r in job.plan["new_map"]]


class BalanceJobs:
    """Balance jobs (clone-and-drop): create, begin, revise, cancel, clone needs and results, map switch, finish, drops."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def snapshot(self, *, relocate_delay: timedelta = DEFAULT_RELOCATE_DELAY) -> ClusterSnapshot:
        """Everything the balance planner reads, in one consistent transaction (``catalog.snapshot``)."""
        return self.db.tx(lambda s: cluster_snapshot(s, self.db.now(), relocate_delay))

    def active(self) -> list[JobView]:
        def run(s: Session) -> list[JobView]:
            q = select(m.Job).where(m.Job.kind.in_(BALANCE_KINDS), m.Job.state == ACTIVE).order_by(m.Job.id)
            return [job_view(s, j) for j in s.scalars(q)]

        return self.db.tx(run)

    def create(self, grp_id: int, kind: str, plan: dict) -> JobView:
        """Persist a plan as a job (step ``planned``). Refused if the group already has an active
        balance job or its map is no longer the one the plan started from."""
        if kind not in BALANCE_KINDS:
            raise InvalidArgument(f"invalid balance job kind {kind!r}: expected one of {', '.join(BALANCE_KINDS)}")

        def run(s: Session) -> JobView:
            g = s.get(m.ColocateGroup, grp_id)
            if g is None:
                raise NotFound(f"unknown colocation group id {grp_id}")
            name = full_name(g)
            other = active_job(s, g.id)
            if other is not None:
                raise Conflict(f"group {name} already has balance job {other.id} running: it is resumed, not planned again")
            if map_of(s, g.id) != [list(r) for r in plan["old_map"]]:
                raise Conflict(f"the bucket map of group {name} changed since it was planned: plan again")
            now = self.db.now()
            job = m.Job(kind=kind, group_id=g.id, state=ACTIVE, plan=dict(plan, group=name),
                        progress={"step": "planned", "rounds": 0, "cloned": 0, "bytes": 0},
                        created_at=now, updated_at=now)
            s.add(job)
            s.flush()
            self.db.event(s, "balance.plan", name, job_id=job.id, job_kind=kind, moves=len(plan.get("moves", [])),
                        bytes=sum(mv["bytes"] for mv in plan.get("moves", [])))
            return job_view(s, job)

        return self.db.tx(run)

    def begin(self, job_id: int) -> JobView:
        """Step 2: the group is unstable while the job changes it (joins fall back)."""
        def run(s: Session) -> JobView:
            job, g = _balance_job(s, job_id)
            if job.progress.get("step") != "planned" or job.state != ACTIVE:
                return job_view(s, job)
            moves = job.plan.get("moves", [])
            why = (f"balance job {job.id} ({job.kind}) is moving {len(moves)} bucket replicas" if moves
                   else f"balance job {job.id} is repairing replicas")
            if g.stable:
                g.version += 1
            g.stable, g.unstable_reason = False, why
            g.unstable_detail = [asdict(Reason(why))]
            job.progress = dict(job.progress, step="unstable", started_at=self.db.now().isoformat())
            job.updated_at = self.db.now()
            self.db.event(s, "balance.start", full_name(g), job_id=job.id, reason=why)
            return job_view(s, job)

        return self.db.tx(run)

    def revise(self, job_id: int, new_map: Sequence[Sequence[int]], moves: Sequence[dict], note: str) -> JobView:
        """Change the target of a job before its switch (a lost backend came back early)."""
        def run(s: Session) -> JobView:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE or job.progress.get("step") not in ("planned", "unstable"):
                raise Conflict(f"balance job {job_id} is past its switch ({job.progress.get('step')}): it cannot be revised")
            job.plan = dict(job.plan, new_map=[list(r) for r in new_map], moves=list(moves))
            notes = list(job.progress.get("notes", [])) + [note]
            job.progress = dict(job.progress, notes=notes[-20:])
            job.updated_at = self.db.now()
            self.db.event(s, "balance.revise", full_name(g), job_id=job.id, note=note,
                        moves=len(moves))
            return job_view(s, job)

        return self.db.tx(run)

    def cancel(self, job_id: int, reason: str) -> JobView:
        """Stop a job before its switch (the map is unchanged; clones it made are redundant and
        dropped by the next repair). After the switch a job can only finish."""
        def run(s: Session) -> JobView:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE:
                return job_view(s, job)
            if job.progress.get("step") in ("switched", "finished"):
                raise Conflict(f"balance job {job_id} already switched the map of its group: it can only finish "
                               f"(run 'colocate balance' again)")
            job.state, job.updated_at = "cancelled", self.db.now()
            job.progress = dict(job.progress, cancelled=reason[:2000])
            self.db.event(s, "balance.cancel", full_name(g), job_id=job.id, reason=reason[:2000])
            s.flush()
            reasons, count, reused = find_problems(self.db, s, g)
            record_check(self.db, s, g, reasons, count, reused)
            return job_view(s, job)

        return self.db.tx(run)

    def clone_needs(self, job_id: int) -> tuple[list[CloneNeed], list[Blocked]]:
        """Every replica the job's target map names that has no verified copy yet: before the
        switch the target is the planned map, after it the group's map (so writes that landed on
        the old map meanwhile are cloned too)."""
        def run(s: Session) -> tuple[list[CloneNeed], list[Blocked]]:
            job, g = _balance_job(s, job_id)
            target = _target(s, job, g)
            current = map_of(s, g.id)
            switched = job.progress.get("step") in ("switched", "finished")
            old = [list(r) for r in job.plan["old_map"]]
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            moved_from: dict[tuple[int, int], int] = {(mv["bucket_seq"], mv["dst"]): mv["src"] for mv in job.plan.get("moves", [])}
            db_names = {d.id: d.name for d in s.scalars(select(m.Database))}

            alive_ids = {b.id for b in backends.values() if b.state == "alive"}
            alive = alive_ids.__contains__

            def wanted(seq: int, be: int) -> bool:
                # A mapped backend that is down is repaired when it is back or relocated; a move's
                # destination that died blocks the job (it is planned again).
                return alive(be) or (not switched and be not in old[seq])

            bk = load_buckets(s, g)
            needs: list[tuple] = []  # CloneNeed's fields, made once the file lists are decoded
            blocked: list[Blocked] = []
            # one statement: every lacking replica with its bucket's sources (10,000s in a repair)
            lacking = lacking_with_sources(s, bk.cells(target, wanted), alive_ids)
            # where a bucket has no usable source: the backends (down) that still hold it verified
            held_on = verified_backends(s, {(r.partition_id, r.version, r.bucket_seq) for r, known in lacking
                                            if alive(r.backend_id) and not known})
            # per table and backend once, not per need: ORM attribute reads cost more than the loop
            tinfo = {tid: (bk.labels[tid], db_names.get(t.db_id, "default"), t.name) for tid, t in bk.tables.items()}
            roots = {b.id: b.root_uri for b in backends.values()}
            tops: dict[tuple[int, int], str] = {}
            for r, known in lacking:
                seq, be = r.bucket_seq, r.backend_id
                label, db_name, table_name = tinfo[r.table_id]
                if not alive(be):
                    b = backends.get(be)
                    blocked.append(Blocked(label, r.partition, seq, be, f"target backend {b.name if b else be} is not alive",
                                           target_down=True))
                    continue
                if r.state == "deleting":
                    blocked.append(Blocked(label, r.partition, seq, be, "an old replica there is being deleted"))
                    continue
                good = [x for x in known if x.state == "verified" and x.backend_id != be and alive(x.backend_id)]
                if not good:
                    # Last resort: a bad replica on an alive backend (the target's own last). Its bytes
                    # may well be right (a bad mark can mean only a stray file beside them): the
                    # clone copies just the recorded files and keeps the copy only if it hashes to the
                    # recorded checksum, so a truly corrupt source yields nothing, never a wrong copy.
                    good = sorted((x for x in known if x.state == "bad" and alive(x.backend_id)),
                                  key=lambda x: (x.backend_id == be, x.backend_id))
                if not good:
                    held = [backends[x].name for x in sorted(held_on.get((r.partition_id, r.version, seq), ()))
                            if x in backends]
                    why = (f"no alive backend holds a verified replica (verified on: {', '.join(held)})" if held
                           else "no verified replica left anywhere: the bucket is lost; rewrite the partition")
                    blocked.append(Blocked(label, r.partition, seq, be, why))
                    continue
                if len(good) > 1 and good[0].state == "verified":
                    src, row = moved_from.get((seq, be)), current[seq] if seq < len(current) else []
                    good.sort(key=lambda x: (x.backend_id != src, x.backend_id not in row, x.backend_id))
                if (top := tops.get((r.table_id, be))) is None:  # layout.replica_dir's table folder, made once
                    top = tops[(r.table_id, be)] = layout.table_dir(roots[be], db_name, table_name, r.table_id)
                path = r.path if r.state is not None else f"{top}/{r.partition}/v{r.version:06d}/b{seq:05d}"
                first = good[0]
                needs.append((label, r.table_id, r.partition_id, r.partition, r.version, seq, be, path,
                              first.checksum, first.rows, first.bytes, tuple((x.backend_id, x.path) for x in good),
                              "bad" if r.state == "bad" else "missing", first.files, roots[be], r.state is None,
                              [(x.backend_id, x.etags) for x in good if x.etags is not None]))
            needs = _recorded(s, job.id, needs, blocked, self.db.now())
            # every copied source's file list decoded in one call (JSON text on SQLite), not one per need
            texts = [n[13] for n in needs if isinstance(n[13], str)]
            decoded = iter(json.loads(f"[{','.join(texts)}]") if texts else ())
            # and the sources' recorded ETags likewise (S3 API backends only: none elsewhere)
            etexts = [e for n in needs for _, e in n[16] if isinstance(e, str)]
            edecoded = iter(json.loads(f"[{','.join(etexts)}]") if etexts else ())
            return [CloneNeed(*n[:13], _files_view(next(decoded) if isinstance(n[13], str) else n[13]), n[14], n[15],
                              tuple((be, next(edecoded) if isinstance(e, str) else e) for be, e in n[16]))
                    for n in needs], blocked

        return self.db.tx(run, bulk=True)  # a repair's size: collector paused

    def register_clones(self, job_id: int, results: Iterable) -> tuple[int, list[str]]:
        """Record the replicas a clone job verified (``CloneResult``s with ``ok``) as ``verified``,
        with the name and size of each file; a clone that found its source's bytes differ from the
        catalog, or its directory holding files the catalog does not list, marks that source
        ``bad`` (repaired by the next round from a good copy).
        Returns (replicas registered, directories to delete: clones of versions that were
        garbage-collected while the clone ran). A job that ended while its batch ran (cancelled)
        registers nothing: gc may have removed those folders already (``clone_targets``), and
        what it has not is its to remove."""
        results = list(results)

        def run(s: Session) -> tuple[int, list[str]]:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE:
                return 0, []
            now = self.db.now()
            ok = [r for r in results if r.ok]
            quick = None if any(r.source_bad for r in results if not r.ok) else clones.register_new(s, ok, now)
            if quick is not None:  # new rows only (a repair's clones): no bucket's rows loaded
                added, stale, tables = quick
                failed = [f"{res.path}: {res.error}" for res in results if not res.ok]
                if added:
                    touch_tables(s, tables)
                return self._progress(s, job, g, now, results, added, stale, failed, [])
            added, stale, failed, bad = clones.register_loaded(self.db, s, results, now)
            return self._progress(s, job, g, now, results, added, stale, failed, bad)

        return self.db.tx(run, bulk=True)  # a repair's size: collector paused

    def _progress(self, s: Session, job: m.Job, g: m.ColocateGroup, now, results: list, added: int, stale: list[str],
                  failed: list[str], bad: list[str]) -> tuple[int, list[str]]:
        """A clone batch's mark on its job (rounds, replicas and bytes cloned, the last errors) and its event."""
        progress = dict(job.progress)
        progress["rounds"] = progress.get("rounds", 0) + 1
        progress["cloned"] = progress.get("cloned", 0) + added
        progress["bytes"] = progress.get("bytes", 0) + sum(r.bytes for r in results if r.ok)
        if failed:
            progress["errors"] = (list(progress.get("errors", [])) + failed)[-20:]
        job.progress, job.updated_at = progress, now
        self.db.event(s, "balance.clone", full_name(g), job_id=job.id, registered=added,
                      failed=len(failed), bad_sources=bad, stale=len(stale))
        return added, stale

    def move_progress(self, job_id: int) -> list[tuple[int, int]]:
        """Per planned move: (bytes already verified on its destination, bytes of the bucket)."""
        def run(s: Session) -> list[tuple[int, int]]:
            job, g = _balance_job(s, job_id)
            bk = load_buckets(s, g)
            out = []
            for mv in job.plan.get("moves", []):
                seq, dst = mv["bucket_seq"], mv["dst"]
                copied = sum(bk.counts.get((t, seq, dst), (0, 0, 0))[1] for t in bk.tables)
                out.append((copied, sum(bk.sizes.get((t, seq), 0) for t in bk.tables)))
            return out

        return self.db.tx(run)

    def switch_map(self, job_id: int) -> SwitchResult:
        """Step 4: make the planned map the group's map, once every replica it adds is verified.
        Cancels the job when the map changed under it (it is then planned again)."""
        def run(s: Session) -> SwitchResult:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE:
                return SwitchResult(False, cancelled=job.state == "cancelled", reason=f"job is {job.state}")
            if job.progress.get("step") in ("switched", "finished"):
                return SwitchResult(True)
            current = map_of(s, g.id)
            old = [list(r) for r in job.plan["old_map"]]
            new = [list(r) for r in job.plan["new_map"]]
            name = full_name(g)
            if current != old and current != new:
                job.state, job.updated_at = "cancelled", self.db.now()
                job.progress = dict(job.progress, cancelled="the bucket map changed under the job")
                self.db.event(s, "balance.cancel", name, job_id=job.id, reason="the bucket map changed under the job")
                return SwitchResult(False, cancelled=True, reason="the bucket map changed under the job")
            bk = load_buckets(s, g)
            # Only what a move adds: an in-place repair is done after the switch if needed.
            rows = lacking_rows(s, bk.cells(new, lambda seq, be: be not in old[seq]))
            missing = [f"{bk.labels[r.table_id]}/{r.partition} bucket {r.bucket_seq} on backend {r.backend_id}" for r in rows]
            if missing:
                return SwitchResult(False, missing=tuple(missing))
            now = self.db.now()
            if current != new:
                for row in s.scalars(select(m.BucketMap).where(m.BucketMap.group_id == g.id)):
                    row.backend_ids = list(new[row.bucket_seq])
                g.version += 1
                g.generation += 1
                self.db.event(s, "group.switch_map", name, job_id=job.id, old_map=old, new_map=new,
                            moves=len(job.plan.get("moves", [])))
            g.stable = False
            g.unstable_reason = (f"balance job {job.id} switched the bucket map; cloning what landed meanwhile"
                                 if current != new else f"balance job {job.id} is repairing replicas")
            g.unstable_detail = [asdict(Reason(g.unstable_reason))]
            job.progress = dict(job.progress, step="switched", switched_at=now.isoformat())
            job.updated_at = now
            return SwitchResult(True)

        return self.db.tx(run)

    def finish(self, job_id: int, *, grace: timedelta = DEFAULT_GRACE) -> FinishResult:
        """Step 5: once every replica the map names on an alive backend is verified, the job's
        changes are done (step ``finished``) and the group's stability is recorded: stable, if
        nothing else is wrong, from this commit on (a finished job no longer makes its group
        unstable: what is left is :meth:`close`, which only marks what the map no longer names).
        ``grace`` is not used here (kept for callers of the one step this was): :meth:`close`
        takes it. ``FinishResult.dropping`` stays 0; :meth:`close` returns the count."""
        def run(s: Session) -> FinishResult:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE:
                return FinishResult(done=job.state == "done")
            step = job.progress.get("step")
            if step == "finished":
                return FinishResult(done=True)
            if step != "switched":
                raise Conflict(f"balance job {job_id} has not switched its map yet (step {step})")
            bucket_map = map_of(s, g.id)
            backends = {b.id: b for b in s.scalars(select(m.Backend))}
            bk = load_buckets(s, g)
            rows = lacking_rows(s, bk.cells(bucket_map, lambda seq, be: be in backends and backends[be].state == "alive"))
            missing = [f"{bk.labels[r.table_id]}/{r.partition} bucket {r.bucket_seq} on backend {backends[r.backend_id].name}"
                       for r in rows]
            if missing:
                return FinishResult(done=False, missing=tuple(missing))
            now = self.db.now()
            job.updated_at = now
            job.progress = dict(job.progress, step="finished", finished_at=now.isoformat())
            s.flush()
            reasons, count, reused = find_problems(self.db, s, g, read=(bucket_map, backends, bk))
            health = record_check(self.db, s, g, reasons, count, reused)
            return FinishResult(done=True, health=health)

        return self.db.tx(run)

    def close(self, job_id: int, *, grace: timedelta = DEFAULT_GRACE) -> int:
        """Step 6, after :meth:`finish`: mark replicas the map no longer names ``dropping``
        (deleted after ``grace``) and end the job; returns how many were marked. A bucket's old
        replicas are only marked when all of its mapped replicas are verified, so a bucket never
        loses its last verified replica (rechecked here: a replica may have gone bad since). Apart
        from :meth:`finish` so that the group is stable without waiting for the marks of a lost
        disk's thousands of replicas; a run killed in between leaves a finished job that the next
        run closes."""
        def run(s: Session) -> int:
            job, g = _balance_job(s, job_id)
            if job.state != ACTIVE:
                return int(job.progress.get("dropping") or 0)
            if job.progress.get("step") != "finished":
                raise Conflict(f"balance job {job_id} is not finished yet (step {job.progress.get('step')})")
            now = self.db.now()
            dropping = mark_redundant(s, load_buckets(s, g), map_of(s, g.id), now + grace)
            job.state, job.updated_at = "done", now
            job.progress = dict(job.progress, dropping=dropping)
            self.db.event(s, "balance.finish", full_name(g), job_id=job.id, dropping=dropping)
            s.flush()  # the marks moved the generation: the recorded check is brought up to date
            record_check(self.db, s, g, *find_problems(self.db, s, g))
            return dropping

        return self.db.tx(run, bulk=True)  # a repair's size: collector paused

    def take_droppable(self) -> list[DropItem]:
        """Replicas whose grace period is over become ``deleting`` and are returned for their files
        to be removed; :meth:`forget_replicas` then deletes the rows. Re-checked here: a replica is
        only dropped while its bucket is whole on its map (a verified replica on every alive backend
        the map names, and at least one); otherwise it is kept, verified, as a source for the repair.
        Replicas on a backend that is down wait until it is back (its files cannot be deleted before)."""
        def run(s: Session) -> list[DropItem]:
            now = self.db.now()
            items: list[DropItem] = []
            R = m.Replica
            if s.scalar(select(R.id).where(R.state.in_(("dropping", "deleting"))).limit(1)) is None:
                return items  # nothing on its way out (ix_replica_leaving): the usual case, one lookup
            reachable = set(s.scalars(select(m.Backend.id).where(m.Backend.state.in_(("alive", "decommissioning")))))
            reachable_alive = set(s.scalars(select(m.Backend.id).where(m.Backend.state == "alive")))
            # columns, not ORM rows: a repair's drop pass takes thousands
            leaving = list(fetch(s, select(R.id, R.table_id, R.partition_id, R.version, R.bucket_seq, R.backend_id,
                                           R.state, R.path, R.drop_after)
                                 .where(R.state.in_(("dropping", "deleting"))).order_by(R.id)))
            due = [r for r in leaving if r.state == "dropping" and r.backend_id in reachable
                   and not (utc(r.drop_after) is not None and utc(r.drop_after) > now)]
            # what each due replica is checked against, in a few IN queries (not one per replica)
            groups = groups_of_tables(s, {r.table_id for r in due})
            maps = bucket_maps(s, set(groups.values()) - {None})
            verified = verified_backends(s, {(r.partition_id, r.version, r.bucket_seq) for r in due})
            deleting, revive = [], []
            for r in leaving:
                if r.backend_id not in reachable:
                    continue  # files on a down backend are deleted when it is back
                if r.state == "dropping":
                    if utc(r.drop_after) is not None and utc(r.drop_after) > now:
                        continue
                    group_id = groups.get(r.table_id)
                    mapped = maps.get((group_id, r.bucket_seq), set()) if group_id is not None else set()
                    others = verified.get((r.partition_id, r.version, r.bucket_seq), set())
                    if not (others & mapped) or not (mapped & reachable_alive) <= others:
                        # a replacement went bad or missing since: keep this copy as a source
                        revive.append(r)
                        verified.setdefault((r.partition_id, r.version, r.bucket_seq), set()).add(r.backend_id)
                        continue
                    deleting.append(r)
                items.append(DropItem(r.id, r.backend_id, r.path))
            # dropping -> deleting changes no summary (only verified and bad replicas count), a revived
            # copy does: the summaries are measured around those buckets only
            for chunk in chunks([r.id for r in deleting]):
                s.execute(update(R).where(R.id.in_(chunk)).values(state="deleting")
                          .execution_options(synchronize_session=False))
            with tracking(s, buckets={(r.partition_id, r.bucket_seq) for r in revive}):
                for chunk in chunks([r.id for r in revive]):
                    s.execute(update(R).where(R.id.in_(chunk)).values(state="verified", drop_after=None)
                              .execution_options(synchronize_session=False))
            touch_tables(s, {r.table_id for r in deleting})
            if items or revive:
                self.db.event(s, "replica.drop_start", "catalog", replicas=len(items), revived=len(revive))
            return items

        return self.db.tx(run)

    def forget_replicas(self, replica_ids: Iterable[int]) -> int:
        ids = list(replica_ids)

        def run(s: Session) -> int:
            n = 0
            gone = [(i, t) for part in range(0, len(ids), 500) for i, t in fetch(s,
                select(m.Replica.id, m.Replica.table_id)
                .where(m.Replica.id.in_(ids[part:part + 500]), m.Replica.state == "deleting"))]
            # a deleting replica counts in no summary: removing its row changes none, only the generation
            for part in range(0, len(gone), 500):
                n += s.execute(delete(m.Replica).where(m.Replica.id.in_([i for i, _ in gone[part:part + 500]]))
                               .execution_options(synchronize_session=False)).rowcount
            touch_tables(s, {t for _, t in gone})
            if n:
                self.db.event(s, "replica.drop", "catalog", replicas=n)
            return n

        return self.db.tx(run)


def _recorded(s: Session, job_id: int, needs: list[tuple], blocked: list[Blocked], now) -> list[tuple]:
    """Record the new replicas' directories before the copy (gc removes an abandoned clone's
    files); the needs whose directory gc is removing wait (added to ``blocked``)."""
    gc_has = clone_targets.note(s, job_id, [(n[2], n[4], n[5], n[6], n[7]) for n in needs if n[15]], now)
    blocked += [Blocked(n[0], n[3], n[5], n[6], clone_targets.HELD_BACK) for n in needs if n[7] in gc_has]
    return [n for n in needs if n[7] not in gc_has]


def _files_view(files: list | None) -> tuple[tuple[str, int], ...] | None:
    return None if files is None else tuple(map(tuple, files))  # [name, size] pairs as JSON decodes them

"""Storage backends: add, list, state changes, decommission, remove, loads."""

from __future__ import annotations

import json
import random
from dataclasses import asdict

from sqlalchemy import func, literal, select, update
from sqlalchemy.orm import Session

from airflow_colocate.catalog import models as m
from airflow_colocate.catalog import summary
from airflow_colocate.catalog.checks import BACKEND_STATES, nested, normalize_root
from airflow_colocate.catalog.rows import backend_row, backend_view, full_name
from airflow_colocate.catalog.session import CatalogSession
from airflow_colocate.model.views import ACTIVE, BackendView, Reason, RootChange, split_reason
from airflow_colocate.core import naming, validate
from airflow_colocate.core.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    PlacementError,
)


class Backends:
    """Storage backends: add, list, state changes, decommission, remove, loads."""

    def __init__(self, db: CatalogSession):
        self.db = db

    def add(self, root_uri: str, *, name: str | None = None, host: str | None = None,
                    capacity_bytes: int | None = None, marker_token: str | None = None) -> BackendView:
        """Register a storage backend. ``host`` defaults to the backend's own name, i.e. its own
        failure domain; give backends that share a machine the same host so that no bucket keeps
        two replicas there."""
        root = normalize_root(root_uri)
        if name is not None:
            naming.check_name("backend", name)
        if host is not None and (not isinstance(host, str) or not host or len(host) > 255 or any(c.isspace() or c == "/" for c in host)):
            raise InvalidArgument(f"invalid host {host!r}: expected a host name such as 'node-1.example.com'")
        if capacity_bytes is not None and (not isinstance(capacity_bytes, int) or capacity_bytes <= 0):
            raise InvalidArgument(f"invalid capacity {capacity_bytes!r}: expected a positive number of bytes, e.g. 1099511627776")

        def run(s: Session) -> BackendView:
            for other in s.scalars(select(m.Backend)):
                if nested(other.root_uri, root):
                    what = "is already" if other.root_uri == root else "overlaps"
                    raise AlreadyExists(
                        f"backend root {root!r} {what} backend {other.name} (id {other.id}, root {other.root_uri!r}): "
                        f"each backend needs its own root that is not inside another's"
                    )
                if name is not None and other.name == name:
                    raise AlreadyExists(f"backend name {name!r} is taken by backend id {other.id}: choose another name")
            now = self.db.now()
            row = m.Backend(name=name or f"tmp_{random.getrandbits(48):x}", root_uri=root, host=host or "",
                            capacity_bytes=capacity_bytes, state="alive", state_since=now, created_at=now,
                            marker_token=marker_token)
            s.add(row)
            s.flush()
            if name is None:
                row.name = f"be{row.id}"
            if not host:
                row.host = row.name
            self.db.event(s, "backend.add", row.name, id=row.id, root=root, host=row.host, capacity_bytes=capacity_bytes)
            return backend_view(row)

        return self.db.tx(run)

    def catalog_uid(self) -> str:
        """The catalog's own id, written into every backend's identity marker."""
        return self.db.tx(lambda s: s.scalar(select(m.CatalogInfo.uid).where(m.CatalogInfo.id == 1)))

    def markers(self) -> dict[int, str | None]:
        """backend id -> the token its identity marker must hold (None: added before 0.2)."""
        return self.db.tx(lambda s: dict(s.execute(select(m.Backend.id, m.Backend.marker_token)).all()))

    def reinit(self, ref: int | str, marker_token: str, *, reason: str, lost: bool = True) -> tuple[BackendView, int]:
        """Record a new identity marker for a backend (a replaced disk, or a backend from before 0.2
        that never had one). With ``lost`` its replicas are gone with the old disk: every verified
        replica on it becomes ``bad`` in one set update, its groups unstable, and the next balance
        re-clones them from the other replicas. Returns the backend and the number of replicas lost."""
        if not reason or not reason.strip():
            raise InvalidArgument("a re-initialisation needs a reason (e.g. 'disk sdb replaced'): it is kept in the event log")
        reason = validate.reason(reason, required=True)

        def run(s: Session) -> tuple[BackendView, int]:
            row = backend_row(s, ref)
            if row.state == "decommissioned":
                raise Conflict(f"backend {row.name} is decommissioned: add the disk as a new backend instead")
            lost_count = 0
            if lost:
                R = m.Replica
                columns = s.execute(select(R.table_id, R.bucket_seq).where(R.backend_id == row.id, R.state == "verified")
                                    .distinct()).all()
                with summary.tracking(s, columns=[tuple(c) for c in columns]):
                    lost_count = s.execute(update(R).where(R.backend_id == row.id, R.state == "verified")
                                           .values(state="bad").execution_options(synchronize_session=False)).rowcount
                why = f"backend {row.name} was re-initialised ({reason}): its {lost_count} replicas are lost"
                group_ids = set(s.scalars(select(m.Table.group_id).where(
                    m.Table.id.in_({t for t, _ in columns}), m.Table.group_id.is_not(None))))
                for g in s.scalars(select(m.ColocateGroup).where(m.ColocateGroup.id.in_(group_ids))):
                    if g.stable:
                        g.version += 1
                    g.stable, g.unstable_reason, g.unstable_detail = False, why, [asdict(Reason(why))]
            self.db.event(s, "backend.reinit", row.name, id=row.id, reason=reason, lost_replicas=lost_count)
            row.marker_token = marker_token
            return backend_view(row), lost_count

        return self.db.tx(run)

    def set_root(self, ref: int | str, root_uri: str, *, reason: str | None = None,
                 marker_token: str | None = None) -> RootChange:
        """Point a backend at another root (a disk remounted elsewhere, a demo home copied): its
        ``root_uri`` and the path of every replica on it move in one transaction, with one
        ``backend.root`` event (old and new root, the reason; the actor is the event's).

        The files must already be at the new root: the caller checks its identity marker first
        (:func:`airflow_colocate.jobs.backends.set_backend_root`) and passes the token it found, which
        must still be the backend's. Refused while a running job names a path under the old root
        or moves a bucket to or from the backend (a write, a clone: it would land on the disk that
        is being left)."""
        root = normalize_root(root_uri)
        reason = validate.reason(reason)

        def run(s: Session) -> RootChange:
            row = backend_row(s, ref)
            old = row.root_uri
            if row.state == "decommissioned":
                raise Conflict(f"backend {row.name} is decommissioned: it holds nothing; "
                               f"'colocate backend remove {row.name}' deletes it")
            if marker_token is not None and row.marker_token != marker_token:
                raise Conflict(f"backend {row.name}'s identity marker changed meanwhile (re-initialised?): "
                               f"check {root} again")
            if root == old:
                return RootChange(backend_view(row), old, 0, False)
            for other in s.scalars(select(m.Backend).where(m.Backend.id != row.id)):
                if nested(other.root_uri, root):
                    what = "is" if other.root_uri == root else "overlaps"
                    raise AlreadyExists(f"backend root {root!r} {what} the root of backend {other.name} "
                                        f"({other.root_uri!r}): each backend needs its own root")
            busy = [j for j in s.scalars(select(m.Job).where(m.Job.state == ACTIVE).order_by(m.Job.id))
                    if (old + "/") in json.dumps(j.plan) or _moves_on(j.plan, row.id)]
            if busy:
                listed = ", ".join(f"{j.kind} job {j.id}" for j in busy[:5]) + (" …" if len(busy) > 5 else "")
                raise Conflict(f"backend {row.name}'s root cannot move while {listed} still uses paths under {old}: "
                               f"let it finish (or abort it) first")
            R = m.Replica
            prefix = old + "/"
            outside = s.scalar(select(func.count()).select_from(R).where(
                R.backend_id == row.id, ~R.path.startswith(prefix, autoescape=True)))
            if outside:
                raise Conflict(f"backend {row.name} has {outside} replicas whose path is not under its root {old}: "
                               f"the catalog is inconsistent; run 'colocate verify' before moving the root")
            moved = s.execute(update(R).where(R.backend_id == row.id)
                              .values(path=literal(root) + func.substr(R.path, len(old) + 1))
                              .execution_options(synchronize_session=False)).rowcount
            self.db.event(s, "backend.root", row.name, id=row.id, old=old, new=root, reason=reason, replicas=moved)
            row.root_uri = root
            return RootChange(backend_view(row), old, moved, True)

        return self.db.tx(run)

    def list(self) -> list[BackendView]:
        return self.db.tx(lambda s: [backend_view(b) for b in s.scalars(select(m.Backend).order_by(m.Backend.id))])

    def get(self, ref: int | str) -> BackendView:
        return self.db.tx(lambda s: backend_view(backend_row(s, ref)))

    def set_state(self, ref: int | str, state: str, *, reason: str = "") -> BackendView:
        """Admin override (mark-down / mark-up); see :meth:`mark`."""
        return self.mark(ref, state, reason=reason)[0]

    def mark(self, ref: int | str, state: str, *, reason: str | None = None) -> tuple[BackendView, bool]:
        """Admin override (mark-down / mark-up), and whether it changed anything. The health probe
        records through :meth:`Health.record_probe`, which never overrides a state set here.

        ``reason`` is kept as given ("disk pulled"); who gave it is the event's actor. A mark of
        the state a backend is already in changes nothing (no event, the reason and "since" stay),
        except a mark-down of a backend the *probe* found down: the admin's mark then takes hold
        (with its reason), so a probe that reaches the disk again does not bring it back."""
        if state not in BACKEND_STATES:
            raise InvalidArgument(f"invalid backend state {state!r}: expected one of {', '.join(BACKEND_STATES)}")
        reason = validate.reason(reason) or ""

        def run(s: Session) -> tuple[BackendView, bool]:
            row = backend_row(s, ref)
            if row.state in ("decommissioning", "decommissioned") and state in ("alive", "down"):
                raise Conflict(f"backend {row.name} is {row.state}: a decommissioned backend does not come back; add it again under a new root")
            _, source = split_reason(row.state_reason)
            if row.state == state and (state != "down" or source == "admin"):
                return backend_view(row), False
            # An admin's mark holds: the health probe never brings up a backend marked down here.
            stored = None if state == "alive" else (f"admin: {reason}" if reason else "admin")[:1000]
            self.db.event(s, "backend.state", row.name, id=row.id, old=row.state, new=state, reason=reason or None)
            if row.state != state:
                row.state, row.state_since = state, self.db.now()
            row.state_reason = stored
            return backend_view(row), True

        return self.db.tx(run)

    def decommission(self, ref: int | str) -> BackendView:
        """Start draining: the balancer moves every replica away, then marks it decommissioned."""
        def run(s: Session) -> BackendView:
            row = backend_row(s, ref)
            if row.state == "decommissioned":
                raise Conflict(f"backend {row.name} is already decommissioned: 'colocate backend remove {row.name}' deletes it")
            if row.state != "decommissioning":
                _check_drainable(s, row)
                self.db.event(s, "backend.decommission", row.name, id=row.id, old=row.state)
                row.state, row.state_since = "decommissioning", self.db.now()
            return backend_view(row)

        return self.db.tx(run)

    def cancel_decommission(self, ref: int | str) -> BackendView:
        """Stop draining a backend that is still decommissioning: it is alive again and keeps what
        it still holds; buckets already moved off it stay where they are until a balance run."""
        def run(s: Session) -> BackendView:
            row = backend_row(s, ref)
            if row.state != "decommissioning":
                raise Conflict(f"backend {row.name} is {row.state}, not decommissioning: there is no decommission to cancel")
            self.db.event(s, "backend.decommission_cancelled", row.name, id=row.id)
            row.state, row.state_since, row.state_reason = "alive", self.db.now(), None
            return backend_view(row)

        return self.db.tx(run)

    def remove(self, ref: int | str) -> None:
        def run(s: Session) -> None:
            row = backend_row(s, ref)
            groups = sorted({g for g, ids in s.execute(select(m.BucketMap.group_id, m.BucketMap.backend_ids)) if row.id in ids})
            replicas = s.scalar(select(func.count()).select_from(m.Replica).where(m.Replica.backend_id == row.id))
            if groups or replicas:
                raise Conflict(
                    f"backend {row.name} still holds data ({replicas} replicas; in the bucket map of "
                    f"{len(groups)} groups): run 'colocate backend decommission {row.name}' and let the balancer drain it first"
                )
            self.db.event(s, "backend.remove", row.name, id=row.id, root=row.root_uri)
            s.delete(row)

        self.db.tx(run)

    def loads(self) -> dict[int, dict[str, int]]:
        """Per backend id: ``slots`` (bucket-replica entries of every group's map), and ``replicas``
        and ``bytes`` of the verified replicas of visible versions it holds (from the bucket
        summaries, so the cost does not grow with history)."""
        def run(s: Session) -> dict[int, dict[str, int]]:
            out = {b: {"slots": 0, "replicas": 0, "bytes": 0} for b in s.scalars(select(m.Backend.id))}
            for ids in s.scalars(select(m.BucketMap.backend_ids)):
                for be in ids:
                    out.setdefault(be, {"slots": 0, "replicas": 0, "bytes": 0})["slots"] += 1
            q = (select(m.BucketReplicas.backend_id, func.sum(m.BucketReplicas.verified), func.sum(m.BucketReplicas.bytes))
                 .group_by(m.BucketReplicas.backend_id))
            for be, count, size in s.execute(q):
                row = out.setdefault(be, {"slots": 0, "replicas": 0, "bytes": 0})
                row["replicas"], row["bytes"] = int(count), int(size)
            return out

        return self.db.tx(run)


def _moves_on(plan: dict, backend_id: int) -> bool:
    """Whether a balance job's plan copies to or from the backend (its clones name paths under the
    root they were planned with)."""
    moves = plan.get("moves") if isinstance(plan, dict) else None
    return any(isinstance(mv, dict) and backend_id in (mv.get("src"), mv.get("dst")) for mv in moves or [])


def _check_drainable(s: Session, row: m.Backend) -> None:
    """Refuse a decommission that can never finish: every replica on ``row`` needs somewhere to go,
    i.e. as many other alive backends on distinct hosts as its group (or partition) keeps replicas."""
    needs: list[tuple[int, str]] = []
    for g in s.scalars(select(m.ColocateGroup)):
        rows = s.scalars(select(m.BucketMap.backend_ids).where(m.BucketMap.group_id == g.id))
        if any(row.id in ids for ids in rows):
            needs.append((g.replication_num, f"group {full_name(g)}"))
    loose = s.execute(
        select(func.max(m.Partition.replication_num), func.min(m.Table.name))
        .join(m.Replica, m.Replica.partition_id == m.Partition.id)
        .join(m.Table, m.Table.id == m.Partition.table_id)
        .where(m.Replica.backend_id == row.id, m.Table.group_id.is_(None))
    ).one()
    if loose[0]:
        needs.append((loose[0], f"table {loose[1]}"))
    if not needs:
        return
    need, who = max(needs)
    others = list(s.scalars(select(m.Backend).where(m.Backend.state == "alive", m.Backend.id != row.id)
                            .order_by(m.Backend.id)))
    hosts = {b.host for b in others}
    if len(hosts) < need:
        listed = ", ".join(f"{b.name}@{b.host}" for b in others) or "none"
        raise PlacementError(
            f"backend {row.name} cannot be decommissioned: {who} keeps {need} replicas of every bucket on distinct "
            f"hosts, and only {len(hosts)} other alive host(s) would remain ({listed}); bring a backend back or add "
            f"one first ('colocate backend add')"
        )

"""Backend health: a heartbeat probe on each backend root, and the group state a sensor reports.

The probe first requires the backend's identity marker (a lost, empty or swapped disk is down, with
that reason, and is never recreated), then writes a small heartbeat object under
``{root}/_colocate/heartbeat/``, reads it back, compares and deletes it: a backend that cannot do
all of it (within a timeout) is down. The
catalog records alive / down-since (:meth:`Health.record_probes`); a backend down longer than the
relocate delay, or decommissioning, is *unavailable* and the balancer replaces it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import timedelta

from airflow_colocate.model.views import DEFAULT_RELOCATE_DELAY, BackendHealth
from airflow_colocate.core import validate
from airflow_colocate.core.contract import BadReplica
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.storage import fs, replica_dir
from airflow_colocate.storage.probe import probe_root

DEFAULT_PROBE_TIMEOUT = 20.0
# Replicas per backend whose files each probe lists: every 30 minutes, 200 cover 9,600 a day.
DEFAULT_SAMPLE = 200


def relocate_delay_from_env(default: timedelta = DEFAULT_RELOCATE_DELAY) -> timedelta:
    """``COLOCATE_RELOCATE_DELAY_MINUTES`` if set, else 30 minutes (the seeds' default)."""
    text = os.environ.get("COLOCATE_RELOCATE_DELAY_MINUTES")
    if not text:
        return default
    try:
        return validate.duration(text, "$COLOCATE_RELOCATE_DELAY_MINUTES", unit="minutes")
    except InvalidArgument as exc:  # a ValueError too, as before
        raise InvalidArgument(f"COLOCATE_RELOCATE_DELAY_MINUTES={validate.shown(text)}: expected a number of minutes, "
                              f"e.g. 30 ({str(exc).rsplit(': ', 1)[-1]})") from None


@dataclass(frozen=True)
class ProbeResult:
    """One backend's probe: what the probe found (``reachable``: the marker, the heartbeat write,
    read and delete all worked) apart from the state the catalog holds after it, which an admin's
    mark may keep ``down`` however reachable the disk is."""

    backend: BackendHealth  # as recorded after this probe
    ok: bool  # reachable (kept under this name for existing callers)
    error: str | None
    seconds: float
    bad_replicas: list[str] = field(default_factory=list)  # paths the file sample found wrong
    sample_error: str | None = None  # why the file sample could not be taken (the probe itself went on)

    @property
    def reachable(self) -> bool:
        return self.ok

    def to_dict(self) -> dict:
        """The result as a task returns it (XCom): the state with its reason, and the probe's finding
        under its own name, so ``state: down`` never sits next to a bare ``ok: true``."""
        b = self.backend
        return {"backend": b.name, "state": b.state, "state_reason": b.state_reason, "reason_source": b.reason_source,
                "state_since": b.state_since.isoformat() if b.state_since else None,
                "reachable": self.ok, "error": self.error, "seconds": self.seconds,
                "bad_replicas": len(self.bad_replicas), "sample_error": self.sample_error}


# Listings at once on a remote backend (each a round trip to a store or NameNode; a local one is a
# few system calls, checked in turn)
SAMPLE_THREADS = 16


def _check_all(replicas: list, check) -> list:
    if len(replicas) < 2 or fs.is_local(replicas[0].path):
        return [check(r) for r in replicas]
    with ThreadPoolExecutor(max_workers=min(SAMPLE_THREADS, len(replicas)), thread_name_prefix="colocate-sample") as pool:
        return list(pool.map(check, replicas))


def sample_files(catalog, backend_id: int, limit: int) -> list[str]:
    """Check that the next ``limit`` replicas of a backend hold exactly their recorded files (names
    and sizes; only a listing, no hashing), rotating through all of them over successive probes, so
    a deleted or truncated file is found without a full verify. Wrong ones are marked bad (their
    group unstable, the next balance repairs them); returns their paths."""
    bad = []
    sampled = catalog.health.sample_replicas(backend_id, limit)
    problems = _check_all(sampled, lambda r: replica_dir.check_replica(r.path, files=r.files, size=r.bytes))
    for r, problem in zip(sampled, problems):
        if problem:
            bad.append(BadReplica(replica_id=r.replica_id, table=r.table, partition=r.partition,
                                  bucket_seq=r.bucket_seq, backend_id=r.backend_id, path=r.path,
                                  reason=f"probe sample: {problem}"))
    return catalog.health.mark_replicas_bad(bad) if bad else []


def probe_backends(catalog, *, backends=None, timeout: float = DEFAULT_PROBE_TIMEOUT,
                   relocate_delay: timedelta | None = None, sample: int = DEFAULT_SAMPLE) -> list[ProbeResult]:
    """Probe every backend that is not decommissioned (in parallel, each within ``timeout``
    seconds) and record the outcome in the catalog; on every backend that answers, check the files
    of the next ``sample`` replicas (see :func:`sample_files`)."""
    delay = relocate_delay if relocate_delay is not None else relocate_delay_from_env()
    wanted = set(backends) if backends else None
    targets = [b for b in catalog.health.backends(relocate_delay=delay) if b.state != "decommissioned"
               and (wanted is None or b.name in wanted or str(b.id) in wanted)]
    if not targets:
        return []
    pool = ThreadPoolExecutor(max_workers=min(16, len(targets)), thread_name_prefix="colocate-probe")
    started = {b.id: time.monotonic() for b in targets}
    tokens, uid = catalog.backends.markers(), catalog.backends.catalog_uid()
    markers = {b.id: ({"backend_id": b.id, "catalog_id": uid, "token": tokens[b.id]} if tokens.get(b.id) else None)
               for b in targets}
    futures = {b.id: pool.submit(probe_root, b.root_uri, marker=markers[b.id]) for b in targets}
    errors: dict[int, str | None] = {}
    seconds: dict[int, float] = {}
    try:
        for b in targets:
            error = None
            try:
                futures[b.id].result(timeout=max(0.1, timeout - (time.monotonic() - started[b.id])))
            except FutureTimeout:
                error = f"no answer within {timeout:g}s"
            except Exception as exc:  # any I/O failure means the backend is not usable
                error = f"{type(exc).__name__}: {one_line_reason(exc, 480)}"
            errors[b.id], seconds[b.id] = error, round(time.monotonic() - started[b.id], 3)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a hung probe must not hang the caller
    # every outcome in one transaction (the probes ran in parallel, each within the timeout)
    recorded = catalog.health.record_probes([(b.id, errors[b.id] is None, errors[b.id]) for b in targets],
                                            relocate_delay=delay)
    changed = any(r.state != b.state for r, b in zip(recorded, targets))
    try:
        results = [_sampled(catalog, ProbeResult(r, errors[b.id] is None, errors[b.id], seconds[b.id]), sample)
                   for r, b in zip(recorded, targets)]
    finally:  # a backend went down or came back: groups say so at once, whatever the samples did
        if changed:
            catalog.health.check_groups()
    if changed or any(r.bad_replicas for r in results):
        from airflow_colocate.jobs.iceberg import follow_all

        follow_all(catalog)  # Iceberg tables name the replicas reads prefer now: none on a backend gone down
    return results


def _sampled(catalog, result: ProbeResult, sample: int) -> ProbeResult:
    """``result`` with its backend's file sample, or with the reason the sample could not be taken:
    one backend's listing failure must not stop the probe of the others (nor their group checks)."""
    if not (result.ok and sample):
        return result
    try:
        return dataclasses.replace(result, bad_replicas=sample_files(catalog, result.backend.id, sample))
    except Exception as exc:
        return dataclasses.replace(result, sample_error=f"{type(exc).__name__}: {one_line_reason(exc, 480)}")



def one_line_reason(exc: BaseException, limit: int = 300) -> str:
    """An error as the one line a report shows (pyarrow's cannot-load messages run to a hundred
    lines of dlopen attempts: the first says what is wrong)."""
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "") or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unreachable_backends(backends, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> dict[int, str]:
    """The backends (views with ``id`` and ``root_uri``) whose file system cannot be opened or
    does not answer within ``timeout`` seconds, id -> the reason; a root that opens but is missing
    is reachable (a lost disk: its replicas fail their checks, which is the truth). ``gc``,
    ``verify`` and the probe skip these and go on with the others."""
    targets = list(backends)
    if not targets:
        return {}
    from airflow_colocate.storage import fs

    pool = ThreadPoolExecutor(max_workers=min(16, len(targets)), thread_name_prefix="colocate-reach")
    futures = {b.id: pool.submit(fs.exists, b.root_uri) for b in targets}
    out: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    try:
        for b in targets:
            try:
                futures[b.id].result(timeout=max(0.1, deadline - time.monotonic()))
            except FutureTimeout:
                out[b.id] = f"no answer within {timeout:g}s"
            except Exception as exc:  # noqa: BLE001 - any failure to open it is the reason
                out[b.id] = one_line_reason(exc)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out


def not_their_disks(catalog, backends, *, timeout: float = DEFAULT_PROBE_TIMEOUT) -> dict[int, str]:
    """:func:`unreachable_backends`, and the backends whose root answers but is not their own disk
    (identity marker missing or another's: a disk unmounted, the empty mount point left). Deleting
    there removes nothing, and forgetting what was deleted would leave the files behind for good
    once the disk is back; ``gc`` and a balance's drops skip these and try again later."""
    targets = list(backends)
    out = unreachable_backends(targets, timeout=timeout)
    tokens, uid = catalog.backends.markers(), catalog.backends.catalog_uid()
    from airflow_colocate.storage import identity

    for b in targets:
        if b.id in out or not tokens.get(b.id):
            continue
        try:
            problem = identity.marker_problem(b.root_uri, backend_id=b.id, catalog_id=uid, token=tokens[b.id])
        except Exception as exc:  # noqa: BLE001 - any failure to read the marker is the reason
            problem = one_line_reason(exc)
        if problem:
            out[b.id] = problem
    return out


def _minutes(td: timedelta) -> str:
    minutes = td.total_seconds() / 60
    return f"{minutes:.0f} min" if minutes >= 1 else f"{td.total_seconds():.0f} s"


def describe(r: ProbeResult) -> str:
    """One backend that is not simply alive and reachable, as the probe's line names it: the state
    with its reason, then what the probe found when the state does not already say it, e.g.
    ``be2 down (admin: disk pulled), reachable`` or ``be2 down (probe: no answer within 20s)``."""
    b = r.backend
    text = b.name + " " + b.state + (f" ({b.reason_line})" if b.reason_line and b.state != "alive" else "")
    if r.ok:
        return text + ", reachable" if b.state != "alive" else text
    if b.reason_source == "probe" and b.state_reason == r.error:
        return text
    return f"{text}, unreachable ({r.error})"


def probe_line(results: list[ProbeResult]) -> str:
    """One line for a whole probe (not one per backend): how many are alive after it, and every
    other one with its state, reason and what the probe found, e.g. ``probed 3 backends in 0.4s:
    2 alive; be2 down (admin: disk pulled), reachable``. The count is of states, not of answers:
    a backend an admin holds down is never counted alive because its disk answered."""
    if not results:
        return "probed no backend (none registered, or all decommissioned)"
    alive = [r for r in results if r.backend.state == "alive" and r.ok]
    others = [describe(r) for r in results if not (r.backend.state == "alive" and r.ok)]
    bad = sum(len(r.bad_replicas) for r in results)
    line = f"probed {len(results)} backends in {max(r.seconds for r in results):.1f}s: {len(alive)} alive"
    if others:
        line += "; " + "; ".join(others)
    if bad:
        line += f"; {bad} replicas failed the file sample (marked bad, balance repairs them)"
    return line


def waiting_to_relocate(health, delay: timedelta, now, source: str = "COLOCATE_RELOCATE_DELAY_MINUTES") -> list[str]:
    """Why a repair does nothing yet: a backend down for less than the relocate delay keeps its
    buckets (it may come back; its replicas are read elsewhere meanwhile). One line per such backend,
    e.g. ``be2 down 4 min; relocation starts after 30 min (COLOCATE_RELOCATE_DELAY_MINUTES)``.
    ``health`` is the catalog's view, whose times are UTC already."""
    lines = []
    for b in health:
        if b.state == "down" and not b.unavailable:
            down_for = now - b.state_since
            lines.append(f"{b.name} down {_minutes(down_for)}; relocation starts after {_minutes(delay)} ({source}), "
                         f"in {_minutes(max(delay - down_for, timedelta(0)))}")
    return lines

def group_state(catalog, group: str, *, check: bool = True, db: str = "default") -> dict:
    """The state a sensor or trigger reports: ``{"group", "group_id", "stable", "reason",
    "reasons", "problems", "checked_at"}``. With ``check`` the stability is recomputed from the
    replicas (and recorded); else the last recorded state is read."""
    health = catalog.health.check_group(group, db=db) if check else catalog.health.group_health(group, db=db)
    return health.to_dict()


__all__ = ["ProbeResult", "describe", "group_state", "one_line_reason", "probe_backends", "probe_line", "probe_root",
           "relocate_delay_from_env", "unreachable_backends", "waiting_to_relocate"]

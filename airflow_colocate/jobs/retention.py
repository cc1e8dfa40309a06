"""Retention, as the maintenance DAG runs it: expire, purge the recycle bin, erase the files.

1. every table with a retention drops into the recycle bin the partitions dated before
   ``today - retention_days`` (:meth:`catalog.partitions.expire`);
2. partitions dropped longer than the recycle-bin window ago are purged: their version becomes
   superseded (:meth:`catalog.partitions.purge_dropped`);
3. gc erases what no reader needs after the grace (``writes.garbage``), the purged versions among
   it, so a read that listed a replica before the drop still finds its files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.partitions import DEFAULT_RECYCLE_BIN, partition_date
from airflow_colocate.jobs.gc import collect_garbage
from airflow_colocate.jobs.iceberg import expire_quietly as expire_snapshots
from airflow_colocate.jobs.iceberg import follow

DEFAULT_GRACE = timedelta(hours=1)  # what 'colocate gc' keeps superseded versions for running readers
DEFAULT_STALE = timedelta(hours=24)  # and after which a write still staging is dead


@dataclass
class RetentionResult:
    expired: list[dict] = field(default_factory=list)  # {"table", "partition", "retention_days"}
    purged: list[dict] = field(default_factory=list)  # {"table", "partition", "version"}
    erased: list[str] = field(default_factory=list)  # directories deleted
    dry_run: bool = False
    unreachable: dict[str, str] = field(default_factory=dict)  # backend -> why gc left its files for later

    def sentence(self) -> str:
        """What the pass did, or why it did nothing, in one sentence (the task log's last line)."""
        verb = ("would drop", "would purge", "would erase") if self.dry_run else ("dropped", "purged", "erased")
        done = [f"{verb[0]} {len(self.expired)} partition(s) past their table's retention into the recycle bin"
                if self.expired else "",
                f"{verb[1]} {len(self.purged)} partition(s) from the recycle bin" if self.purged else "",
                f"{verb[2]} {len(self.erased)} purged folder(s)" if self.erased else ""]
        done = [d for d in done if d]
        later = f"; gc left files on {', '.join(sorted(self.unreachable))} for later (not reachable)" \
            if self.unreachable else ""
        if not done:
            return ("retention: nothing to do: no partition is past its table's retention, none is due to leave "
                    "the recycle bin, no purged file is past gc's grace" + later + (" (dry run)" if self.dry_run else ""))
        return "retention: " + "; ".join(done) + later + (" (dry run: nothing changed)" if self.dry_run else "")

    def as_dict(self) -> dict:
        return {"expired": self.expired, "purged": self.purged, "erased": self.erased, "dry_run": self.dry_run,
                "unreachable": self.unreachable}


def apply_retention(catalog: Catalog, *, today: date | None = None, window: timedelta = DEFAULT_RECYCLE_BIN,
                    grace: timedelta = DEFAULT_GRACE, dry_run: bool = False) -> RetentionResult:
    """One pass of the three steps; ``today`` (default: the catalog clock's date) is what the
    retentions count back from. ``dry_run``: report what expires, change nothing."""
    result = RetentionResult(dry_run=dry_run)
    if dry_run:
        for t in catalog.tables.list():
            if t.retention_days:
                cutoff = (today or catalog.now().date()) - timedelta(days=t.retention_days)
                result.expired += [{"table": t.qualified_name, "partition": p.value, "retention_days": t.retention_days}
                                   for p in catalog.partitions.list(t.id)
                                   if (d := partition_date(p.value)) is not None and d < cutoff]
        return result
    result.expired = [{"table": e.table, "partition": e.partition, "retention_days": e.retention_days}
                      for e in catalog.partitions.expire(today=today)]
    if result.expired:
        follow(catalog, {catalog.tables.get(t).id for t in {e["table"] for e in result.expired}})
    result.purged = [{"table": t, "partition": p.value, "version": p.dropped_version}
                     for t, p in catalog.partitions.purge_dropped(retention=window)]
    expire_snapshots(catalog, window)  # the snapshots past the window stop keeping their files
    # gc as 'colocate gc' runs it (jobs/gc.py): files before rows, an unreachable backend's left for later
    gc = collect_garbage(catalog, grace=grace, stale_after=DEFAULT_STALE)
    result.erased = sorted({i.uri for i in gc.items})
    result.unreachable = dict(gc.unreachable)
    return result


__all__ = ["DEFAULT_GRACE", "RetentionResult", "apply_retention"]

"""The lines our operators end a task log with: what was written or joined, how big, where, and how
long each phase took, so a reader finds the answer at the bottom of the log instead of in Spark's
output above it. Pure text from the summaries the operators return (their XCom)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from statistics import median

from airflow_colocate.core.sizes import human_bytes

MAX_BUCKET_ROWS = 16  # a per-bucket table longer than this shows the largest buckets and the spread


class Phases:
    """Elapsed seconds per phase of a task (plan, spark job, commit), in the order they ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    def line(self) -> str:
        parts = [f"{name} {seconds:.1f}s" for name, seconds in self.seconds.items()]
        return f"elapsed: {', '.join(parts)} (total {sum(self.seconds.values()):.1f}s)"


def bucket_table(replicas: Sequence[Mapping], names: Mapping[int, str], limit: int = MAX_BUCKET_ROWS) -> list[str]:
    """``bucket rows size backends``, one line per bucket, from a write summary's ``buckets`` (one
    entry per replica). Above ``limit`` buckets: the spread (min/median/max) and the largest ones."""
    by_bucket: dict[int, dict] = {}
    for r in replicas:
        b = by_bucket.setdefault(r["bucket"], {"rows": r["rows"], "bytes": r["bytes"], "backends": []})
        b["backends"].append(names.get(r["backend"], f"backend {r['backend']}"))
    rows = [(seq, b["rows"], b["bytes"], ", ".join(b["backends"])) for seq, b in sorted(by_bucket.items())]
    lines = []
    if len(rows) > limit:
        sizes = [r[2] for r in rows]
        counts = [r[1] for r in rows]
        lines.append(f"{len(rows)} buckets: rows min {min(counts):,} / median {int(median(counts)):,} / max {max(counts):,}; "
                     f"size min {human_bytes(min(sizes))} / median {human_bytes(median(sizes))} / max {human_bytes(max(sizes))}")
        lines.append(f"the {limit} largest (every bucket is in the XCom's 'buckets'):")
        rows = sorted(sorted(rows, key=lambda r: -r[2])[:limit])
    table = [("bucket", "rows", "size", "backends")] + [(str(s), f"{n:,}", human_bytes(b), where) for s, n, b, where in rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        lines.append(f"{row[0]:>{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}")
    return lines


def write_lines(summary: Mapping, names: Mapping[int, str]) -> list[str]:
    """The committed version: table, partition, version, rows, size, then the per-bucket table."""
    buckets = {r["bucket"] for r in summary["buckets"]}
    lines = [f"committed {summary['table']} partition {summary['partition']} version {summary['version']} "
             f"({summary['mode']}): {summary['rows']:,} rows, {human_bytes(summary['bytes'])} in "
             f"{summary['replicas']} replicas of {len(buckets)} buckets"]
    if summary.get("missing_replicas"):
        lines.append(f"replicas to repair later (backend not alive): {'; '.join(summary['missing_replicas'])}")
    return lines + bucket_table(summary["buckets"], names)


def join_lines(summary: Mapping, names: Mapping[int, str]) -> list[str]:
    """The join's verdict and result, then its explain and, for a catalog output, its write."""
    verdict = "colocated" if summary.get("colocate") else "not colocated (see the reasons below)"
    lines = [f"join {summary['job_id']}: {summary['rows']:,} result rows, {verdict}"]
    lines += str(summary.get("explain") or "").splitlines()
    if summary.get("phases"):
        order = ["register", "plan", "run"]  # the report's JSON sorts its keys
        ranked = sorted(summary["phases"].items(), key=lambda p: order.index(p[0]) if p[0] in order else len(order))
        lines.append("inside the Spark job: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in ranked))
    if summary.get("marked_bad"):
        lines.append(f"replicas found bad and marked for repair: {', '.join(map(str, summary['marked_bad']))}")
    if summary.get("output"):
        lines += write_lines(summary["output"], names)
    return lines


__all__ = ["Phases", "bucket_table", "write_lines", "join_lines", "MAX_BUCKET_ROWS"]

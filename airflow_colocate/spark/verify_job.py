"""The verify job: prove that replicas hold what the catalog says, to the byte and to the row.

``colocate verify`` (and the maintenance DAG's ``verify`` action) hands this job a
:class:`~airflow_colocate.core.contract.VerifyPlan` and gets a
:class:`~airflow_colocate.core.contract.VerifyReport`:

1. **hashes**: every replica's files are re-hashed against the catalog's checksum and size — the
   clone job's own verify tasks (:func:`airflow_colocate.spark.clone_job.run_clone`), so a replica
   is judged here exactly as balance judges a clone;
2. **rows**: per table, one Spark job reads the distribution columns of every replica whose bytes
   were right and counts, per file, the rows of each ``pmod(hash(dist cols), n)`` — Spark's own
   bucket id. A replica is good when every row is in its bucket and it holds the rows the catalog
   recorded. The bytes can be right and the rows wrong: a writer that misplaced rows had its files
   checksummed as they were, and Spark's bucketed scan trusts file names, so only this finds it.

A table whose job fails (a file Spark cannot read) is checked again one replica at a time, so the
report names the replicas at fault. The job never touches the catalog: the control plane
(:mod:`airflow_colocate.jobs.verify`) marks the bad replicas.

    spark-submit airflow_colocate/spark/entry.py --kind verify --plan /path/verify-plan.json
"""

from __future__ import annotations

import logging
import math
import time
from urllib.parse import unquote, urlparse

from airflow_colocate.core.contract import (
    ClonePlan,
    RowCheck,
    RowCheckResult,
    RowCheckTable,
    VerifyPlan,
    VerifyReport,
)
from airflow_colocate.spark.failures import first_line
from airflow_colocate.spark.session import scoped
from airflow_colocate.storage import layout

# Read as the registered tables read (spark/register.py): a flipped byte in a data page fails.
READ_OPTIONS = {"parquet.page.verify-checksum.enabled": "true"}


log = logging.getLogger("airflow_colocate.spark.verify")  # shown as colocate-verify: … (spark.entry)


def dir_key(uri: str) -> str:
    """A directory URI as Spark's ``_metadata.file_path`` spells its files' parent: ``file:///x``
    and ``file:/x`` are one directory, and Spark percent-encodes what ``Path.as_uri`` may not."""
    u = urlparse(uri.rstrip("/"))
    path = unquote(u.path).rstrip("/")
    if u.scheme in ("", "file"):
        return f"file:{path}"
    return f"{u.scheme}://{u.netloc}{path}"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def modulus(table: RowCheckTable, replicas: list[RowCheck]) -> int:
    """The count rows are hashed at: the finest layout among ``replicas`` (a group's layouts are
    each a multiple of the one before, so ``pmod(h, M) mod L = pmod(h, L)`` for each of them)."""
    out = table.bucket_num
    for r in replicas:
        if r.layout_buckets and r.layout_buckets % out == 0:
            out = r.layout_buckets
        elif r.layout_buckets and out % r.layout_buckets:
            out = math.lcm(out, r.layout_buckets)
    return out


def bucket_counts(spark, table: RowCheckTable, replicas: list[RowCheck]) -> dict[str, dict[tuple[str, int], int]]:
    """Directory key -> {(file name, pmod(hash, :func:`modulus`)): rows} over the files of
    ``replicas``, in one Spark job."""
    from pyspark.sql import functions as F

    schema = ", ".join(f"{_quote(n)} {t}" for n, t in table.columns)
    reader = spark.read.schema(schema)
    for key, value in READ_OPTIONS.items():
        reader = reader.option(key, value)
    df = reader.parquet(*[r.path for r in replicas])
    keys = ", ".join(_quote(n) for n, _ in table.columns)
    seq = F.expr(f"pmod(hash({keys}), {modulus(table, replicas)})").alias("seq")
    out: dict[str, dict[tuple[str, int], int]] = {}
    for row in df.select(F.col("_metadata.file_path").alias("file"), seq).groupBy("file", "seq").count().collect():
        parent, name = row["file"].rsplit("/", 1)
        counts = out.setdefault(dir_key(parent), {})
        key = (unquote(name), int(row["seq"]))
        counts[key] = counts.get(key, 0) + int(row["count"])
    return out


def judge(check: RowCheck, by_file: dict, table: str, bucket_num: int = 0) -> RowCheckResult:
    """One replica's verdict from its rows per (file, bucket at the finest layout checked) (or per
    bucket, without file names), ``bucket_num`` the map's count the bucket seq is at."""
    by_file = {k if isinstance(k, tuple) else ("", k): n for k, n in by_file.items()}
    counts: dict[int, int] = {}
    for (_, s), n in by_file.items():
        b = s % bucket_num if bucket_num else s
        counts[b] = counts.get(b, 0) + n
    rows = sum(counts.values())
    wrong = rows - counts.get(check.bucket_seq, 0)
    where = f"{table}/{check.partition} bucket {check.bucket_seq}"
    if wrong:
        others = ", ".join(f"{n} of bucket {b}" for b, n in sorted(counts.items()) if b != check.bucket_seq)
        return RowCheckResult(check.replica_id, False, rows, wrong, (
            f"bucket check: {wrong} of its {rows} rows belong to other buckets ({others}) in {where}"))
    if check.layout_buckets:
        # a split layout's file holds one finer bucket, named in it: the guard of a join at the
        # family's count cannot see a row of the wrong finer bucket, verify does
        off = sum(n for (name, s), n in by_file.items() if layout.layout_bucket_of(name) != s % check.layout_buckets)
        if off:
            return RowCheckResult(check.replica_id, False, rows, off, (
                f"bucket check: {off} of its {rows} rows are not of the bucket their file names in the layout of "
                f"{check.layout_buckets} buckets in {where}"))
    if rows != check.rows:
        return RowCheckResult(check.replica_id, False, rows, 0, (
            f"bucket check: {where} holds {rows} rows, the catalog recorded {check.rows}"))
    return RowCheckResult(check.replica_id, True, rows, 0)


def check_rows(spark, table: RowCheckTable) -> list[RowCheckResult]:
    """Every replica of ``table``: one Spark job, or one per replica when the job fails."""
    with_rows = [r for r in table.replicas if r.rows]
    results = [RowCheckResult(r.replica_id, True) for r in table.replicas if not r.rows]
    if not with_rows:
        return results
    with scoped(spark, description=f"colocate-verify rows of {table.table}: {len(with_rows)} replicas"):
        return _check_rows(spark, table, with_rows, results)


def _check_rows(spark, table: RowCheckTable, with_rows: list[RowCheck],
                results: list[RowCheckResult]) -> list[RowCheckResult]:
    try:
        counts = bucket_counts(spark, table, with_rows)
    except Exception as exc:
        log.info(f"{table.table}: reading {len(with_rows)} replicas at once failed ({first_line(exc)}); one at a time")
        for r in with_rows:
            try:
                counts = bucket_counts(spark, table, [r])
            except Exception as one:
                results.append(RowCheckResult(r.replica_id, False, error=(
                    f"bucket check: cannot read {r.path}: {first_line(one)}")[:2000]))
                continue
            results.append(judge(r, counts.get(dir_key(r.path), {}), table.table, table.bucket_num))
        return results
    return results + [judge(r, counts.get(dir_key(r.path), {}), table.table, table.bucket_num) for r in with_rows]


def run_verify(spark, plan: VerifyPlan) -> VerifyReport:
    """Re-hash, then check the rows of the replicas whose bytes are right (a replica whose bytes
    are wrong is bad already; reading it would only fail or say the same)."""
    from airflow_colocate.spark.clone_job import run_clone

    started = time.time()
    hashes = []
    if plan.hashes:
        log.info(f"job {plan.job_id}: re-hashing {len(plan.hashes)} replicas ({sum(t.bytes for t in plan.hashes)} bytes)")
        hashes = run_clone(spark, ClonePlan(job_id=plan.job_id, copies=[], report_uri=plan.report_uri,
                                            verifies=plan.hashes)).verifies
    failed = {h.replica_id for h in hashes if not h.ok}
    rows: list[RowCheckResult] = []
    total = sum(len(t.replicas) for t in plan.tables)
    done = 0
    for table in plan.tables:
        todo = [r for r in table.replicas if r.replica_id not in failed]
        rows += check_rows(spark, RowCheckTable(table.table, table.columns, table.bucket_num, todo))
        done += len(table.replicas)
        bad = sum(1 for r in rows if not r.ok)
        log.info(f"rows of {table.table}: {len(todo)} replicas checked ({done}/{total} in all, {bad} bad so far)")
    report = VerifyReport(job_id=plan.job_id, hashes=hashes, rows=rows, seconds=round(time.time() - started, 3),
                          bytes=sum(h.bytes for h in hashes), spark_version=spark.version)
    log.info(f"{len(hashes)} re-hashed ({report.bytes} bytes, {len(failed)} bad), {len(rows)} row-checked "
        f"({sum(r.rows for r in rows)} rows, {sum(1 for r in rows if not r.ok)} bad) in {report.seconds:.1f}s")
    return report


"""One nemesis operation in a process of its own, so that the harness can SIGKILL it anywhere:
``python nemesis_op.py '<op as JSON>'`` with the catalog in ``COLOCATE_CATALOG_URL``.

A write goes through the product's control plane (``jobs.write.prepare_write``, the plan's
replica directories, ``finish_write``'s commit) with pyarrow standing in for the Spark write job,
as tests/balance/balance_lake.py does (tests/balance/test_lake_writer_matches_spark.py holds that
writer to the real job): a Spark JVM per killable write would cost the whole budget. Every other
operation is the ``colocate`` command itself. Exit 0: acknowledged; else failed, with the error's
last line on stderr."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def write(op: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from colocate_testing import spark_bucket
    from nemesis_model import rows

    from airflow_colocate.catalog import Catalog
    from airflow_colocate.core.contract import ReplicaReport, Source, WriteReport
    from airflow_colocate.jobs.write import finish_write, prepare_write
    from airflow_colocate.storage import copy as copy_mod
    from airflow_colocate.storage import fs, layout, replica_dir
    from airflow_colocate.storage.place import write_id_for

    catalog = Catalog(actor="nemesis")
    work = Path(os.environ["COLOCATE_HOME"]) / "runs"
    ticket, plan = prepare_write(catalog, op["table"], op["dt"], Source(format="parquet", path=str(work)), work_dir=work)
    try:
        by_bucket: dict[int, list] = {}
        for i, v, _ in sorted(rows(op["table"], op["dt"], op["wseed"])):
            by_bucket.setdefault(spark_bucket(i, plan.bucket_num), []).append((i, v))
        extra = [(n, t) for n, t in ticket.table.columns if n not in ("id", "v", "dt")]
        reports = []
        for b in plan.buckets:
            got = by_bucket.get(b.bucket_seq, [])
            primary = b.replicas[0].path
            fs.makedirs(primary)
            files = []
            if got:
                name = layout.bucket_file_name(write_id_for(plan), b.bucket_seq)
                cols = {"id": pa.array([i for i, _ in got], pa.int64()), "v": pa.array([v for _, v in got])}
                cols |= {n: pa.nulls(len(got), pa.string()) for n, _ in extra}
                pq.write_table(pa.table(cols), fs.local_path(fs.join(primary, name)))
                files.append((name, copy_mod.sha256_file(fs.join(primary, name))))
            sizes = dict(replica_dir.replica_files(primary))
            for r in b.replicas[1:]:
                copy_mod.copy_replica(primary, r.path)
            checksum = replica_dir.replica_checksum(files)
            reports += [ReplicaReport(b.bucket_seq, r.backend_id, r.path, [n for n, _ in files], len(got),
                                      sum(sizes.values()), checksum, sizes=sizes) for r in b.replicas]
        report = WriteReport(job_id=plan.job_id, table=plan.table, partition_value=op["dt"], version=ticket.version,
                             source_rows=sum(len(g) for g in by_bucket.values()), replicas=reports, seconds=0.0,
                             spark_version="pyarrow")
    except BaseException as exc:
        try:
            catalog.writes.abort(ticket.job_id, f"{type(exc).__name__}: {exc}")
        except Exception:  # the catalog unreachable too: the first error is the one that tells what happened
            pass
        raise
    print(json.dumps(finish_write(catalog, ticket, report)["version"]))


def command(op: dict) -> list[str]:
    """The ``colocate`` arguments of a process op other than a write."""
    kind = op["kind"]
    if kind in ("drop", "recover"):
        return ["partition", kind, op["table"], op["dt"]]
    if kind == "expire":
        from nemesis_model import EXPIRE_TODAY

        return ["partition", "expire", "--today", EXPIRE_TODAY]
    if kind == "alter":
        return ["table", "alter", op["table"], "--add-column", f"{op['column']} string"]
    if kind == "balance":
        return ["balance", "--runner", "local", "--grace-minutes", "0"] + (["--verify"] if op.get("verify") else [])
    if kind == "decommission":
        return ["backend", "cancel-decommission" if op["cancel"] else "decommission", op["backend"]]
    if kind == "gc":
        return ["gc", "--grace-minutes", "0"] + (["--stale-hours", "0"] if op.get("stale") else [])
    if kind == "probe":
        return ["backend", "probe"]
    raise SystemExit(f"unknown nemesis op {kind!r}: expected one of write, drop, recover, expire, alter, balance, "
                     "decommission, gc, probe")


def main(argv: list[str]) -> int:
    op = json.loads(argv[0])
    if op["kind"] == "write":
        write(op)
        return 0
    from airflow_colocate.cli import main as colocate

    return colocate(command(op))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

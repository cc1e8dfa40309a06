"""A small lake for balance tests: a SQLite catalog with a clock the test moves, local backends,
and a writer that follows the write job's contract (plan, replica directories, report, commit)
with pyarrow instead of Spark, so a fault test sets up in milliseconds with real files.

The writer puts each row in the bucket Spark would (``pmod(murmur3(id, 42), n)``) under the file
name the write job gives it; test_lake_writer_matches_spark.py holds it to the real write job.
Balance runs clone with :func:`~airflow_colocate.jobs.runners.local_runner` (the clone job's own
task function, in this process) unless the lake was given a Spark session."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from colocate_testing import spark_bucket

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import ReplicaReport, Source, WriteReport
from airflow_colocate.jobs.balance import BalanceOptions, Balancer
from airflow_colocate.jobs.runners import Runner, local_runner, session_runner
from airflow_colocate.jobs.write import finish_write, prepare_write
from airflow_colocate.storage import copy as copy_mod
from airflow_colocate.storage import replica_dir
from airflow_colocate.storage import fs, layout
from airflow_colocate.storage.place import write_id_for

COLUMNS = [("id", "bigint"), ("v", "string"), ("dt", "date")]


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.t

    def advance(self, **kwargs) -> None:
        self.t += timedelta(**kwargs)


@dataclass
class Lake:
    catalog: Catalog
    clock: Clock
    root: Path
    spark: object = None  # given: balance runs clone with the Spark clone job in this session
    names: dict[str, int] = field(default_factory=dict)

    @property
    def runner(self) -> Runner:
        return local_runner() if self.spark is None else session_runner(self.spark)

    @property
    def work(self) -> Path:
        return self.root / "runs"

    def backend_root(self, name: str) -> str:
        """Where a new backend lives: a local folder here; an object store's lake overrides it."""
        path = self.root / "backends" / name
        path.mkdir(parents=True, exist_ok=True)
        return path.as_uri()

    def add_backend(self, name: str, **kwargs):
        b = self.catalog.backends.add(self.backend_root(name), name=name, **kwargs)
        self.names[name] = b.id
        return b

    def etags(self, path: str) -> dict[str, str]:
        """What the write job reports of a replica's files besides their sizes: their ETags on an
        S3 API (storage/place.py), none on a file system."""
        return {}

    def create(self, table: str, group: str = "g", buckets: int = 4, replicas: int = 2):
        return self.catalog.tables.create(table, COLUMNS, ["id"], bucket_num=buckets, replication_num=replicas,
                                         partition_cols=["dt"], colocate_with=group)

    def write(self, table: str, partition: str, keys, *, ticket_and_plan=None) -> dict:
        """Write ``keys`` as one new version of ``table/partition``, each in Spark's bucket for it."""
        ticket, plan = ticket_and_plan or prepare_write(self.catalog, table, partition,
                                                         Source(format="parquet", path=str(self.root)), work_dir=self.work)
        keys = list(keys)
        by_bucket: dict[int, list[int]] = {}
        for k in keys:
            by_bucket.setdefault(spark_bucket(k, plan.bucket_num), []).append(k)
        reports = []
        for b in plan.buckets:
            ks = by_bucket.get(b.bucket_seq, [])
            primary = b.replicas[0].path
            fs.makedirs(primary)
            files = []
            if ks:
                name = layout.bucket_file_name(write_id_for(plan), b.bucket_seq)
                data = pa.table({"id": pa.array(ks, pa.int64()), "v": pa.array([f"{table}-{partition}-{k}" for k in ks])})
                self.put(data, fs.join(primary, name))
                files.append((name, copy_mod.sha256_file(fs.join(primary, name))))
            sizes = dict(replica_dir.replica_files(primary))
            size = sum(sizes.values())
            for r in b.replicas[1:]:
                copy_mod.copy_replica(primary, r.path)
            checksum = replica_dir.replica_checksum(files)
            reports += [ReplicaReport(b.bucket_seq, r.backend_id, r.path, [n for n, _ in files], len(ks), size, checksum,
                                      sizes=sizes, etags=self.etags(r.path))
                        for r in b.replicas]
        report = WriteReport(job_id=plan.job_id, table=plan.table, partition_value=partition, version=ticket.version,
                             source_rows=len(keys), replicas=reports, seconds=0.0, spark_version="pyarrow")
        return finish_write(self.catalog, ticket, report)

    def put(self, data: pa.Table, uri: str) -> None:
        """Write one bucket file where the write job's placement would put it."""
        with fs.open_write(uri) as out:
            pq.write_table(data, out)

    def balancer(self, on_step=None, **options) -> Balancer:
        options.setdefault("grace", timedelta(0))
        return Balancer(self.catalog, self.runner, BalanceOptions(**options), work_dir=self.work,
                        on_step=on_step, echo=print)

    def run(self, on_step=None, **options) -> dict:
        return self.balancer(on_step, **options).run()


class Killed(Exception):
    """A balance run killed at a step (``kill_at``): the process ends there, as a SIGKILL would."""


def dies_after_copying(balancer: Balancer) -> Balancer:
    """``balancer`` with a clone job that copies every file, then dies before the control plane
    hears of it."""
    runner = balancer.runner

    def dying(plan):
        runner(plan)
        raise Killed("clone job lost after copying")

    balancer.runner = dying
    return balancer


def kill_at(step_name):
    """An ``on_step`` hook that kills the run the first time it reaches ``step_name``."""
    fired = []

    def hook(step, job_id):
        if step == step_name and not fired:
            fired.append(job_id)
            raise Killed(f"killed after step {step}")

    return hook


def rows(catalog: Catalog, table: str) -> dict[str, list[tuple]]:
    """Every row of every committed partition, read from each bucket's first verified replica."""
    _, parts = catalog.reads.replicas(table)
    out = {}
    for p in parts:
        got = []
        for bucket in p.buckets:
            assert bucket, f"{table}/{p.value}: a bucket has no verified replica"
            for name, _ in replica_dir.replica_files(bucket[0].path):
                with fs.open_read(fs.join(bucket[0].path, name)) as f:
                    got += [tuple(r.values()) for r in pq.read_table(f).to_pylist()]
        out[p.value] = sorted(got)
    return out


def fingerprint(catalog: Catalog) -> dict[tuple[str, str, int], str]:
    """(table, partition, bucket) -> replica checksum, across every table of every group."""
    out = {}
    for t in catalog.tables.list():
        _, parts = catalog.reads.replicas(t.qualified_name)
        for p in parts:
            for seq, bucket in enumerate(p.buckets):
                sums = {r.checksum for r in bucket}
                assert len(sums) == 1, f"{t.qualified_name}/{p.value} bucket {seq}: replicas disagree {sums}"
                out[(t.qualified_name, p.value, seq)] = sums.pop()
    return out


def assert_whole(catalog: Catalog, group: str = "g") -> None:
    """The group is stable, each bucket's verified replicas sit exactly on the backends its map
    names, and every replica's files hash to the checksum the catalog holds."""
    g = catalog.groups.get(group)
    health = catalog.health.check_group(group)
    assert health.stable, health.reason
    for t in catalog.tables.list():
        if t.group_name != g.full_name:
            continue
        _, parts = catalog.reads.replicas(t.qualified_name)
        for p in parts:
            for seq, bucket in enumerate(p.buckets):
                assert sorted(r.backend_id for r in bucket) == sorted(g.bucket_map[seq]), (t.name, p.value, seq)
                for r in bucket:
                    files = [(n, copy_mod.sha256_file(fs.join(r.path, n))) for n, _ in replica_dir.replica_files(r.path)]
                    assert replica_dir.replica_checksum(files) == r.checksum, r.path


def replica_dirs(root: Path) -> set[str]:
    """Every bucket directory that holds data files, under every backend."""
    return {str(p.parent) for p in (root / "backends").rglob("*.parquet")}

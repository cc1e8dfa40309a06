"""Issue 46: a table read through ``register()`` and the user's own ``spark.sql`` reads a bucket
from another good replica when the one registered fails (spark.replica_paths and the jar's
``ReplicaFileSystem``), on a classic session and on Spark Connect.

Two backends, one table of 4 buckets with replication 2; the replica reads choose for bucket 1 is
damaged as tests/joins/test_read_failover.py damages it (a flipped byte, a truncated file, a footer
cut and padded, another bucket's rows at the recorded size, a deleted file), before the
registration or, for a file cut or deleted after the listing check, between the registration and
the query. ``SELECT count(*), sum(k), max(v) FROM t`` returns plain Spark's answer over the source
rows; the replica passed over is reported and the next registration marks it bad. A retry needs a
master that runs a task again: the sessions here are ``local[2,3]`` (the classic one in a process of
its own, the suite's session being ``local[2]``). With every replica of the bucket bad the query
fails naming the bucket and each replica; without the jar's setting (the suite's ``local[2]``
session) it fails as before, on the registered replica's file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from colocate_testing import add_local_backends
from test_read_failover import FAULTS, corrupt, state_of

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source
from airflow_colocate.jobs.read import collect_read_failures, read_plans, register, unregister
from airflow_colocate.jobs.write import write_in_session
from airflow_colocate.spark import replica_paths

pytestmark = pytest.mark.spark

DAY = "2026-11-01"
SQL = "SELECT count(*), sum(k), max(v) FROM t"
MASTER = "local[2,3]"  # a failed task runs again (local[2] runs it once)
LATE = ["truncated_late", "deleted_late"]  # damaged after the registration's listing check
# a byte of the footer flipped so that the file reads as other rows with no error (no page checksum
# covers the footer): only the replica's hash (the jar's verify-checksums) sees it
FOOTER = "footer_flipped"
CASES = [*FAULTS, *LATE, FOOTER]
# every replica of the bucket damaged: flipped before the registration, or each replica's directory
# gone after it (a Spark Connect session lists at every query, and Spark lists a partition directory
# that raises FileNotFoundException as empty: the bucket's rows must not silently go missing)
ALL_BAD = ["all_bad", "all_gone_late"]
BUCKET = 1
HERE = Path(__file__).resolve().parent


def make_lake(spark, root: Path, case: str, *, every_replica: bool = False) -> dict:
    """A catalog with one table ``t``; bucket 1's first replica damaged (all of them with
    ``every_replica``), except a ``LATE`` case, which the reading process damages itself."""
    root.mkdir(parents=True)
    url = f"sqlite:///{root / 'catalog.db'}"
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, root / "backends", n=2)
    cat.tables.create("t", [("k", "bigint"), ("v", "string"), ("dt", "date")], ["k"], bucket_num=4,
                      replication_num=2, partition_cols=["dt"])
    src = root / "src"
    src.mkdir()
    keys = list(range(3000))
    pq.write_table(pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k:05d}" for k in keys]}), src / "data.parquet")
    write_in_session(spark, cat, "t", DAY, Source(format="parquet", path=str(src)), work_dir=root / "runs")
    candidates = read_plans(cat, {"t": None}).tables[0].partitions[0].candidates
    victims = candidates[BUCKET] if every_replica else candidates[BUCKET][:1]
    why = ""
    for victim in victims if not case.endswith("_late") else []:
        why = flip_footer(victim) if case == FOOTER else corrupt(case, victim, candidates[BUCKET + 1][0])
    cat.dispose()
    want = [tuple(r) for r in spark.read.parquet(str(src)).selectExpr("count(*)", "sum(k)", "max(v)").collect()]
    return {"case": case, "url": url, "victims": [v.path for v in victims], "why": why, "want": [list(w) for w in want]}


def flip_footer(victim) -> str:
    """Flip the first byte of the footer after which the file still reads, with no error, as
    another number of rows (a column chunk's value count: no page checksum covers the footer)."""
    f = next(Path(victim.path.removeprefix("file://")).glob("*.parquet"))
    data = f.read_bytes()
    rows = pq.read_table(f).num_rows
    start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    for at, bit in ((at, bit) for at in range(start, len(data) - 8) for bit in (1, 2, 4, 8, 16, 32, 64, 128)):
        flipped = data[:at] + bytes([data[at] ^ bit]) + data[at + 1:]
        try:
            if pq.read_table(pa.BufferReader(flipped)).num_rows not in (0, rows):
                f.write_bytes(flipped)
                return "checksum mismatch"
        except Exception:  # noqa: BLE001 - a flip the reader refuses is not the case here
            continue
    raise AssertionError(f"no silent footer flip in {f}")


def damage_late(lake: dict) -> None:
    """The file of a ``LATE`` case's victim, cut or deleted after the registration listed it."""
    if lake["case"] == "deleted_late":
        next(Path(lake["victims"][0].removeprefix("file://")).glob("*.parquet")).unlink()
    elif lake["case"] == "all_gone_late":
        for victim in lake["victims"]:
            shutil.rmtree(victim.removeprefix("file://"))
    elif lake["case"] == "truncated_late":
        f = next(Path(lake["victims"][0].removeprefix("file://")).glob("*.parquet"))
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def read_lake(spark, lake: dict) -> dict:
    """register() and the user's spark.sql over one lake: its rows, or the error's text."""
    cat = Catalog(lake["url"], actor="reader")
    try:
        register(spark, {"t": None}, catalog=cat, replace_views=True)
        damage_late(lake)
        try:
            return {"rows": [list(r) for r in spark.sql(SQL).collect()]}
        except Exception as exc:  # noqa: BLE001 - the test reads the message
            return {"error": str(exc)}
        finally:
            unregister(spark, ["t"])
    finally:
        cat.dispose()


def main(lakes_json: str) -> None:
    """The classic session's side, in a process of its own (``python -c``): every lake read in
    one ``local[2,3]`` session with the jar; one JSON line of results on stdout."""
    from airflow_colocate.spark.session import get_spark

    spark = get_spark("register-failover", master=MASTER, conf={"spark.ui.enabled": "false",
                                                                  "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("OFF")
    out = {lake["case"]: read_lake(spark, lake) for lake in json.loads(Path(lakes_json).read_text())}
    spark.stop()
    print("RESULTS " + json.dumps(out))


def check_read(lake: dict, got: dict) -> None:
    """The rows are plain Spark's; the damaged replica is reported, then marked bad with its reason."""
    assert "error" not in got, got.get("error", "")[:3000]
    assert [tuple(r) for r in got["rows"]] == [tuple(w) for w in lake["want"]]
    cat = Catalog(lake["url"], actor="pytest")
    try:
        (victim,) = lake["victims"]
        collect_read_failures(cat, cat.backends.list())  # what the next register() / query() does first
        assert state_of(cat, victim) == "bad"
        assert [r.path for r in replicas_in_state(cat, "bad")] == [victim]  # no good replica reported
        (reason,) = [e.detail["reason"] for e in cat.events(kind="replica.bad") if e.subject == victim]
        expected = {"truncated": lake["why"], "deleted": lake["why"], "deleted_late": "missing file",
                    "truncated_late": "bytes, the catalog recorded"}
        assert expected.get(lake["case"], "checksum mismatch") in reason, reason
        folder = Path(victim.removeprefix("file://")).parents[4] / "_colocate" / "read-failures"
        assert not folder.exists() or not list(folder.iterdir())  # read once, then deleted
    finally:
        cat.dispose()


def replicas_in_state(cat, state: str) -> list:
    from sqlalchemy import select

    from airflow_colocate.catalog import models as m

    with cat.engine.connect() as c:
        return list(c.execute(select(m.Replica.path).where(m.Replica.state == state)))


@pytest.fixture(scope="module")
def classic_results(spark, tmp_path_factory):
    """Every case's lake (and one with both replicas of bucket 1 flipped) read by a classic session."""
    root = tmp_path_factory.mktemp("register-failover")
    lakes = [make_lake(spark, root / case, case) for case in CASES]
    lakes.append(make_lake(spark, root / "all-bad", "flipped_byte", every_replica=True) | {"case": "all_bad"})
    lakes.append(make_lake(spark, root / "all-gone", "all_gone_late", every_replica=True))
    (root / "lakes.json").write_text(json.dumps(lakes))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    script = f"import test_register_failover as t; t.main({str(root / 'lakes.json')!r})"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900, cwd=root)
    results = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")]
    assert results, done.stderr[done.stderr.find("Traceback"):][:3000]
    return {lake["case"]: lake for lake in lakes}, json.loads(results[0].removeprefix("RESULTS "))


@pytest.mark.parametrize("case", CASES)
def test_a_registered_table_reads_around_a_bad_replica_classic(classic_results, case):
    lakes, got = classic_results
    check_read(lakes[case], got[case])


def check_all_bad(lake: dict, got: dict) -> None:
    """No good replica left: the query fails naming the bucket and every replica."""
    message = got.get("error", "")
    assert "rows" not in got, got
    assert f"cannot read default.t partition {DAY} bucket {BUCKET}: every replica failed" in message, message[:3000]
    for victim in lake["victims"]:
        assert victim in message


@pytest.mark.parametrize("case", ALL_BAD)
def test_every_replica_bad_fails_naming_the_bucket_and_every_replica_classic(classic_results, case):
    lakes, got = classic_results
    check_all_bad(lakes[case], got[case])


def test_without_retries_the_read_fails_on_the_registered_replica(spark, tmp_path):
    """The suite's session runs a task once (local[2]): the registration names plain replica
    directories, as before the replica file system, and the bad page fails the query."""
    lake = make_lake(spark, tmp_path / "lake", "flipped_byte")
    assert not replica_paths.usable(spark)
    got = read_lake(spark, lake)
    assert "rows" not in got and "CRC checksum verification failed" in got["error"], got
    assert str(_data_file_path(lake)) in got["error"]


def _data_file_path(lake: dict) -> Path:
    return next(Path(lake["victims"][0].removeprefix("file://")).glob("*.parquet"))


@pytest.fixture(scope="module")
def retrying_connect_server(tmp_path_factory):
    """A Spark Connect server like the suite's (tests/joins/conftest.py) whose master retries a
    failed task, with the jar and its settings."""
    from sparkconnect import start_connect_server

    from airflow_colocate.spark.locality import locality_conf

    conf = {"spark.sql.catalogImplementation": "in-memory", "spark.sql.sources.bucketing.enabled": "true",
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "1g",
            **locality_conf()}
    server = start_connect_server(tmp_path_factory.mktemp("connect-retry"), conf, master=MASTER)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("case", [*CASES, *ALL_BAD])
def test_a_registered_table_reads_around_a_bad_replica_on_spark_connect(spark, retrying_connect_server, tmp_path, case):
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    lake = make_lake(spark, tmp_path / "lake", "flipped_byte" if case == "all_bad" else case,
                     every_replica=case in ALL_BAD) | {"case": case}
    remote = ConnectSession.builder.remote(retrying_connect_server.url).create()
    try:
        assert replica_paths.usable(remote)
        got = read_lake(remote, lake)
    finally:
        remote.stop()
    (check_all_bad if case in ALL_BAD else check_read)(lake, got)


def test_task_attempts_by_master():
    assert replica_paths.task_attempts("local[2]", "8") == 1
    assert replica_paths.task_attempts("local", None) == 1
    assert replica_paths.task_attempts("local[*, 3]", None) == 3
    assert replica_paths.task_attempts("spark://h:7077", None) == 4
    assert replica_paths.task_attempts("yarn", "1") == 1


def test_a_replica_set_path_names_the_checked_replica_first():
    from airflow_colocate.core.contract import BadReplica, ReadPartition, ReadReplica, ReadTable

    reps = [ReadReplica(replica_id=i, backend_id=i, path=f"file:///be{i}/t/b00000", bytes=7, checksum=f"c{i}",
                        files=[["part-0", 7]]) for i in (1, 2, 3)]
    planned = ReadTable(name="t", columns=[["k", "bigint"]], dist_cols=["k"], partition_cols=[], bucket_num=1,
                        partitions=[ReadPartition(value="", bucket_paths=[reps[0].path], candidates=[reps])])
    chosen = ReadTable(name="t", columns=[["k", "bigint"]], dist_cols=["k"], partition_cols=[], bucket_num=1,
                       partitions=[ReadPartition(value="", bucket_paths=[reps[1].path])])
    bad = [BadReplica(replica_id=1, table="t", partition="", bucket_seq=0, backend_id=1, path=reps[0].path, reason="x")]
    (out,) = replica_paths.with_replica_sets([chosen], [planned], bad, {2: "file:///be2/_colocate/read-failures"})
    path = out.partitions[0].bucket_paths[0]
    assert path.startswith("colocatereplica:///")
    import base64
    import zlib

    token = path.removeprefix("colocatereplica:///")
    lines = zlib.decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))).decode().splitlines()
    assert lines[0] == replica_paths.MAGIC and lines[1] == "t\t\t0" and lines[2] == "part-0\t7"
    assert [row.split("\t")[0] for row in lines[3:]] == ["2", "3"]  # the checked one, then the one not found bad
    assert lines[3].split("\t")[4] == "file:///be2/_colocate/read-failures" and lines[4].split("\t")[4] == ""


def test_a_join_planned_next_marks_a_reported_replica_bad_and_reads_another(spark, tmp_path):
    """The executors' report (a line in the backend's read-failures folder) reaches the catalog the
    next time the control plane plans a read, here a join's (jobs.join.prepare_join)."""
    from airflow_colocate.jobs.join import prepare_join
    from airflow_colocate.storage import layout

    lake = make_lake(spark, tmp_path / "lake", "flipped_byte")
    (victim,) = lake["victims"]
    cat = Catalog(lake["url"], actor="pytest")
    try:
        backend = next(b for b in cat.backends.list() if victim.startswith(b.root_uri.rstrip("/") + "/"))
        folder = Path(layout.read_failures_dir(backend.root_uri).removeprefix("file://"))
        folder.mkdir(parents=True)
        rid = read_plans(cat, {"t": None}).tables[0].partitions[0].candidates[BUCKET][0].replica_id
        line = [str(rid), str(backend.id), "default.t", DAY, str(BUCKET), victim, "read failed: checksum mismatch: x"]
        (folder / f"r{rid}-1.tsv").write_text("\t".join(line) + "\n")
        plan, _ = prepare_join(cat, SQL, {"t": None}, work_dir=tmp_path / "runs")
        assert state_of(cat, victim) == "bad" and not list(folder.iterdir())
        assert victim not in [r.path for r in plan.tables[0].partitions[0].candidates[BUCKET]]
    finally:
        cat.dispose()

"""The locality jar's file system (issue 17) in the test session: block locations are the host of the
backend that holds the file, and Spark's bucketed scan turns them into each bucket partition's
preferred host. (Where the tasks then run is tests/balance/test_local_reads.py, on a cluster.)"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_colocate.core.contract import JoinLocality, ReadPartition, ReadTable
from airflow_colocate.spark import locality

pytestmark = pytest.mark.spark


def test_roots_hosts_and_locations_are_plain_functions(tmp_path):
    roots = {(tmp_path / "be1").as_uri(): "node-1", (tmp_path / "be1" / "inner").as_uri(): "node-2",
             "s3a://bucket/be3": "node-3"}
    assert locality.roots_spec(roots).splitlines() == [f"node-1={tmp_path}/be1", f"node-2={tmp_path}/be1/inner"]
    assert locality.host_of((tmp_path / "be1" / "t" / "b0").as_uri(), roots) == "node-1"
    assert locality.host_of((tmp_path / "be1" / "inner" / "t").as_uri(), roots) == "node-2"  # longest root
    assert locality.host_of((tmp_path / "be10" / "t").as_uri(), roots) is None  # not a prefix by name
    t = ReadTable(name="t", columns=[["id", "bigint"]], dist_cols=["id"], partition_cols=[], bucket_num=2,
                  partitions=[ReadPartition(value="x", bucket_paths=[(tmp_path / "be1" / "b0").as_uri(), ""])])
    assert locality.bucket_hosts([t], roots) == [{"node-1"}, set()]
    loc = JoinLocality(tasks=8, node_local=6, levels={"ANY": 2, "NODE_LOCAL": 6}, bytes_read=800, bytes_remote=200)
    assert locality.line(loc) == ("locality: 6/8 input tasks node-local (75%: ANY 2, NODE_LOCAL 6), "
                                  "200 of 800 bytes read from a non-local backend")
    assert locality.line(JoinLocality(note="the locality jar is absent")) == "locality: unknown (the locality jar is absent)"


def test_jobs_ship_the_jar_with_their_own_jars(monkeypatch, tmp_path):
    jar = tmp_path / "colocate-locality.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv(locality.JAR_ENV, str(jar))
    conf = locality.locality_conf("/opt/a.jar")
    assert conf["spark.jars"] == f"/opt/a.jar,{jar}" and locality.with_jar(str(jar)) == str(jar)
    assert conf[f"spark.hadoop.fs.{locality.SCHEME}.impl"] == locality.FS_CLASS
    monkeypatch.setenv(locality.JAR_ENV, str(tmp_path / "missing.jar"))
    monkeypatch.setattr(locality, "__file__", str(tmp_path / "a" / "b" / "c.py"))  # no source checkout either
    monkeypatch.setattr(locality, "package_jar", lambda line: None)  # nor a jar in the installed package
    assert locality.locality_conf("/opt/a.jar") == {} and locality.with_jar("/opt/a.jar") == "/opt/a.jar"


@pytest.fixture
def jar_session(spark):
    if locality.jar_path() is None or not locality._class_loadable(spark):
        message = "the locality jar is not built or not in the session: run scripts/setup.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield spark
    spark.conf.unset(locality.ROOTS_KEY)


def test_block_locations_name_the_backends_host(jar_session, tmp_path):
    spark = jar_session
    (tmp_path / "be1" / "t").mkdir(parents=True)
    (tmp_path / "be1" / "t" / "f.parquet").write_bytes(b"x" * 10)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_bytes(b"y")
    spark.conf.set(locality.ROOTS_KEY, locality.roots_spec({(tmp_path / "be1").as_uri(): "127.0.0.2"}))
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    path = jvm.org.apache.hadoop.fs.Path(f"{locality.SCHEME}://{tmp_path}/be1/t")
    fs = path.getFileSystem(conf)
    (status,) = fs.listStatus(path)
    assert status.getPath().toString() == f"{locality.SCHEME}:{tmp_path}/be1/t/f.parquet" and status.getLen() == 10
    (block,) = fs.getFileBlockLocations(status, 0, status.getLen())
    assert list(block.getHosts()) == ["127.0.0.2"] and block.getLength() == 10
    other = fs.getFileStatus(jvm.org.apache.hadoop.fs.Path(f"{locality.SCHEME}://{tmp_path}/other/f"))
    assert [list(b.getHosts()) for b in fs.getFileBlockLocations(other, 0, 1)] == [["localhost"]]  # no backend
    with pytest.raises(Exception, match="read-only"):
        fs.create(jvm.org.apache.hadoop.fs.Path(f"{locality.SCHEME}://{tmp_path}/be1/new"))
    assert not (tmp_path / "be1" / "new").exists()


def test_bucketed_scan_prefers_each_buckets_host(jar_session, tmp_path):
    spark = jar_session
    hosts = {0: "127.0.0.2", 1: "127.0.0.3"}
    roots = {(tmp_path / f"be{i}").as_uri(): h for i, h in hosts.items()}
    for b in range(4):
        d = tmp_path / f"be{b % 2}" / "t" / f"b{b}"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([b], pa.int64())}), d / f"part-00000-x_{b:05d}.c000.snappy.parquet")
    spark.conf.set(locality.ROOTS_KEY, locality.roots_spec(roots))
    empty = tmp_path / "empty"
    empty.mkdir()
    spark.sql("DROP TABLE IF EXISTS locality_t")
    spark.sql(f"CREATE TABLE locality_t (id BIGINT, b INT) USING parquet PARTITIONED BY (b) "
              f"CLUSTERED BY (id) INTO 4 BUCKETS LOCATION '{locality.read_location(spark, empty.as_uri())}'")
    specs = " ".join(f"PARTITION (b = {b}) LOCATION '{locality.read_location(spark, (tmp_path / f'be{b % 2}' / 't' / f'b{b}').as_uri())}'"
                     for b in range(4))
    spark.sql(f"ALTER TABLE locality_t ADD {specs}")
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # the scan node itself, not AQE's wrapper
    try:
        df = spark.sql("SELECT * FROM locality_t a JOIN locality_t c ON a.id = c.id")
        leaves = df._jdf.queryExecution().executedPlan().collectLeaves()
        scan = leaves.head()
        rdd = scan.inputRDDs().head()
        preferred = [rdd.preferredLocations(p).mkString(",").split(",") for p in rdd.partitions()]
        assert sorted(r[0] for r in df.select("a.id").collect()) == [0, 1, 2, 3]
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        spark.sql("DROP TABLE IF EXISTS locality_t")
    assert preferred == [[hosts[b % 2]] for b in range(4)]

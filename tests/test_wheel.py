"""Issue 27, done when: the wheel carries the locality jar. Built from the sdist, installed into a
fresh virtualenv outside the checkout, the package runs a colocated join whose buckets are read in
key order by the jar's extension, and ``colocate doctor`` finds the jar inside the installed package."""

from __future__ import annotations

import json
import tarfile
import textwrap
import zipfile

import pytest

from wheel_testing import JAR_IN_WHEEL, JARS_IN_WHEEL

pytestmark = pytest.mark.spark

JOIN = textwrap.dedent('''
    import json, sys
    from pathlib import Path

    import airflow_colocate
    from airflow_colocate.catalog import Catalog
    from airflow_colocate.core.contract import Source
    from airflow_colocate.core.sqltypes import parse_columns
    from airflow_colocate.jobs.join import join_in_session
    from airflow_colocate.jobs.write import write_in_session
    from airflow_colocate.spark.session import get_spark

    root = Path(sys.argv[1])
    cat = Catalog(f"sqlite:///{root / 'catalog.db'}", actor="wheel-test")
    cat.init()
    for i in (1, 2):
        (root / f"be{i}").mkdir()
        cat.backends.add((root / f"be{i}").as_uri(), name=f"be{i}")
    sources = {"wa": "SELECT id AS k, concat('a', id) AS v FROM range(200)",
               "wb": "SELECT 2 * (id % 150) AS k, id AS w FROM range(300)"}
    spark = get_spark("wheel-test", conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    for name, cols in (("wa", "k bigint, v string, dt date"), ("wb", "k bigint, w bigint, dt date")):
        cat.tables.create(name, parse_columns(cols), ["k"], bucket_num=4, replication_num=1, partition_cols=["dt"],
                          colocate_with="g_wheel")
        write_in_session(spark, cat, name, "2026-11-01", Source(query=sources[name]), work_dir=root / "runs")
    query = "SELECT x.dt, x.k, x.v, y.w FROM wa x JOIN wb y ON x.dt = y.dt AND x.k = y.k"
    result = join_in_session(spark, cat, query, {"wa": ["2026-11-01"], "wb": ["2026-11-01"]}, hash_budget="1g")
    got = sorted((str(r.dt), r.k, r.v, r.w) for r in spark.sql(query).collect())
    plain = spark.sql(f"SELECT DATE'2026-11-01' AS dt, x.k, x.v, y.w FROM ({sources['wa']}) x "
                      f"JOIN ({sources['wb']}) y ON x.k = y.k")
    want = sorted((str(r.dt), r.k, r.v, r.w) for r in plain.collect())
    spark.stop()
    print(json.dumps({"package": airflow_colocate.__file__, "explain": result["explain"],
                      "colocate": result["colocate"], "rows": result["rows"], "same": got == want, "n": len(want)}))
''')


def test_the_sdist_has_the_java_sources_and_the_wheel_the_jar(colocate_wheel):
    with zipfile.ZipFile(colocate_wheel) as wheel:
        names = set(wheel.namelist())
        # one jar per Spark line, and no other jar (issue 42)
        assert {n for n in names if n.endswith(".jar")} == set(JARS_IN_WHEEL.values()), sorted(
            n for n in names if not n.endswith(".py"))
        jars = {line: wheel.read(name) for line, name in JARS_IN_WHEEL.items()}
    assert colocate_wheel.name.endswith("-py3-none-any.whl")  # a jar is no platform's: still a pure wheel
    for line, jar_bytes in jars.items():
        with zipfile.ZipFile(__import__("io").BytesIO(jar_bytes)) as jar:
            classes = set(jar.namelist())
            manifest = jar.read("META-INF/MANIFEST.MF").decode()
        assert f"Colocate-Spark-Line: {line}" in manifest
        assert "colocate/locality/LocalityFileSystem.class" in classes
        # the ordered read and the columnar join are Spark 4's (docs/spark-lines.md)
        assert ("colocate/ordered/ColocateExtensions.class" in classes) == (line != "3.5"), (line, sorted(classes))
    (sdist,) = colocate_wheel.parent.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = [m.split("/", 1)[1] for m in tar.getnames() if "/" in m]
    assert "java/colocate-locality/src/main/java/colocate/ordered/SkipSortedSort.java" in members
    assert "build_support/colocate_build.py" in members
    assert not [m for m in members if m.endswith(".jar")]  # built from sources, never shipped prebuilt


def test_installed_wheel_joins_with_its_jar_and_doctor_finds_it(wheel_venv, tmp_path):
    work = tmp_path / "elsewhere"  # not the checkout: `import airflow_colocate` must find the venv's
    work.mkdir()
    (work / "join.py").write_text(JOIN)
    home = work / "home"
    done = wheel_venv.run([wheel_venv.python, "join.py", work], cwd=work, timeout=400, COLOCATE_HOME=str(home))
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["package"].startswith(str(wheel_venv.root)), out["package"]
    assert out["colocate"] is True and out["same"] and out["rows"] == out["n"] > 0, out
    assert "bucket reads: 2 in key order (no sort, order checked per row), 0 sorted by Spark" in out["explain"], out["explain"]

    done = wheel_venv.run([wheel_venv.colocate, "--catalog", f"sqlite:///{work / 'catalog.db'}", "doctor", "--json"],
                          cwd=work, COLOCATE_HOME=str(home))
    assert done.returncode == 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    jar = report["jar"]
    assert jar["found"] and jar["origin"] == "package" and jar["in_package"], jar
    assert jar["path"].startswith(str(wheel_venv.root)) and jar["path"].endswith(JAR_IN_WHEEL), jar
    assert {line: (path or "").endswith(name) for line, (path, name) in
            ((line, (jar["lines"][line], JARS_IN_WHEEL[line])) for line in JARS_IN_WHEEL)} == dict.fromkeys(JARS_IN_WHEEL, True)
    assert report["package"]["location"].startswith(str(wheel_venv.root)) and not report["package"]["editable"]
    assert report["catalog"]["source"] == "flag" and [b["reachable"] for b in report["backends"]] == [True, True]

"""Fetch hadoop-aws and its AWS SDK for a Spark line from Maven Central into the local Maven
repository (``~/.m2/repository``, where ``airflow_colocate.spark.object_stores`` looks), each
file checked against Maven Central's SHA-1. Usage: ``python build_support/s3_jars.py [LINE ...]``
(default: the line of the installed pyspark); ``--minicluster`` adds hadoop-client-minicluster of
the installed line's Hadoop, the tests' HDFS. Idempotent: a file already there is kept."""

from __future__ import annotations

import hashlib
import sys
import urllib.request

from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import local_line

CENTRAL = "https://repo1.maven.org/maven2"


def fetch(group: str, artifact: str, version: str) -> None:
    dst = object_stores.maven_path(group, artifact, version)
    if dst.exists():
        return
    url = f"{CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
    with urllib.request.urlopen(url + ".sha1", timeout=60) as r:
        want = r.read().decode().split()[0]
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".jar.part")
    h = hashlib.sha1()
    with urllib.request.urlopen(url, timeout=600) as r, open(tmp, "wb") as out:
        while chunk := r.read(1 << 20):
            h.update(chunk)
            out.write(chunk)
    if h.hexdigest() != want:
        tmp.unlink()
        raise SystemExit(f"{url}: SHA-1 {h.hexdigest()} is not Maven Central's {want}")
    tmp.rename(dst)
    print(f"fetched {group}:{artifact}:{version}")


def main(args: list[str]) -> None:
    lines = [a for a in args if not a.startswith("--")]
    for line in lines or [local_line()]:
        for coordinate in object_stores.coordinates(line):
            fetch(*coordinate.split(":"))
    if "--minicluster" in args:  # the tests' HDFS (tests/hdfsserver.py), of the installed line's Hadoop
        fetch("org.apache.hadoop", "hadoop-client-minicluster", object_stores.HADOOP_OF_LINE[local_line()])


if __name__ == "__main__":
    main(sys.argv[1:])

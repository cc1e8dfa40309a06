"""What a Spark job needs to read and write ``s3a://`` backends: hadoop-aws and its AWS SDK.

pyspark ships Hadoop's client but not ``hadoop-aws``. Platforms that run on S3 (EMR, most
Kubernetes images) put it on the cluster's classpath themselves; everywhere else a job ships it,
as it ships the locality jar. The jars must be those of the Hadoop the Spark line bundles (a
hadoop-aws of another release fails at class loading), so each line has its own set:
:data:`HADOOP_OF_LINE` and :data:`ARTIFACTS`. ``scripts/setup.sh --with-s3`` fetches the pinned
line's from Maven Central into the local Maven repository; ``COLOCATE_S3_JARS`` names them
elsewhere (a comma-separated list of paths or URLs, as ``spark.jars`` takes).

The store's address and key are read where the AWS SDKs read them, so the control plane
(pyarrow, boto3) and hadoop-aws agree without a setting of ours: ``AWS_ENDPOINT_URL`` (an S3 API
that is not AWS's: path-style addressing is then on), ``AWS_REGION``, and the key from
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` or the instance's role. The key is never put in a
plan file and never logged; on a cluster it reaches the executors as their environment, which
Spark's UI redacts (``spark.redaction.regex`` matches ``SECRET``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from airflow_colocate.core.errors import ColocateError
from airflow_colocate.spark.replica_paths import remote_stores
from airflow_colocate.storage import fs, layout

# The Hadoop each Spark line bundles (its pyspark's jars/hadoop-client-api-*.jar).
HADOOP_OF_LINE = {"3.5": "3.3.4", "4.0": "3.4.1", "4.1": "3.4.2", "4.2": "3.5.0", "4.3": "3.5.0"}

# hadoop-aws's compile dependencies at each Hadoop release (its pom and hadoop-project's).
ARTIFACTS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "3.3.4": (("org.apache.hadoop", "hadoop-aws", "3.3.4"), ("com.amazonaws", "aws-java-sdk-bundle", "1.12.262")),
    "3.4.1": (("org.apache.hadoop", "hadoop-aws", "3.4.1"), ("software.amazon.awssdk", "bundle", "2.24.6")),
    "3.4.2": (("org.apache.hadoop", "hadoop-aws", "3.4.2"), ("software.amazon.awssdk", "bundle", "2.29.52"),
              ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.2.1")),
    "3.5.0": (("org.apache.hadoop", "hadoop-aws", "3.5.0"), ("software.amazon.awssdk", "bundle", "2.35.4"),
              ("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", "1.3.1")),
}

ENV_JARS = "COLOCATE_S3_JARS"
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def maven_repository() -> Path:
    return Path(os.environ.get("COLOCATE_MAVEN_REPO") or Path.home() / ".m2" / "repository")


def maven_path(group: str, artifact: str, version: str) -> Path:
    return maven_repository().joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")


def coordinates(line: str) -> list[str]:
    """``group:artifact:version`` of the jars a job on Spark ``line`` ships to reach S3."""
    return [":".join(a) for a in ARTIFACTS[HADOOP_OF_LINE[line]]]


def jars(line: str) -> list[str]:
    """The jars to ship for ``line``: ``COLOCATE_S3_JARS`` when set, else the local Maven
    repository's, else [] (the cluster must have hadoop-aws itself)."""
    given = os.environ.get(ENV_JARS, "").strip()
    if given:
        return [j.strip() for j in given.split(",") if j.strip()]
    paths = [maven_path(*a) for a in ARTIFACTS[HADOOP_OF_LINE[line]]]
    return [str(p) for p in paths] if all(p.exists() for p in paths) else []


def wanted() -> bool:
    """A session ships hadoop-aws when the environment names an S3 API or the jars: the 655 MB
    SDK is not put on every Spark session's classpath (it adds ~10 s to a start)."""
    return bool(os.environ.get("AWS_ENDPOINT_URL") or os.environ.get(ENV_JARS))


def s3a_conf(line: str, master: str) -> dict[str, str]:
    """Spark settings for ``s3a://`` backends on Spark ``line``: the jars and the store's address;
    empty when :func:`wanted` is false. Executors of a cluster get the key as their environment."""
    if not wanted():
        return {}
    conf: dict[str, str] = {}
    shipped = jars(line)
    if shipped:
        conf["spark.jars"] = ",".join(shipped)
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    if not master.startswith("local"):
        for name in ("AWS_ENDPOINT_URL", "AWS_REGION", *CREDENTIAL_ENV):
            if os.environ.get(name):
                conf[f"spark.executorEnv.{name}"] = os.environ[name]
    return conf


def credentials_source() -> str:
    """Where the S3 key comes from, for ``colocate doctor`` (never the key itself)."""
    if os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        return "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
    if os.environ.get("AWS_PROFILE") or Path.home().joinpath(".aws", "credentials").exists():
        return f"the AWS shared credentials file (profile {os.environ.get('AWS_PROFILE', 'default')})"
    return "the AWS SDK's default chain (an instance or pod role), as nothing else names a key"


def location_for(table, location: str) -> str:
    """The backing table's LOCATION: ``location``, unless the replicas are remote (S3, HDFS).
    Spark's in-memory catalog checks each partition's directory with the file system of the table's
    LOCATION, and an ``s3a`` file system is one bucket's, an ``hdfs`` one a namespace's: such a
    table's LOCATION is then its first replica's backend ``_colocate`` folder (where the identity
    marker lives), on the same file system."""
    paths = [p for part in table.partitions for p in part.bucket_paths if p]
    stores = remote_stores(table)
    if not stores or urlsplit(location).scheme in {scheme for scheme, _ in stores}:
        return location  # local, or replica sets under their own scheme (spark.replica_paths)
    if len(stores) > 1 or len(stores) < len({urlsplit(p)[:2] for p in paths}):
        names = ", ".join(sorted(f"{a}://{b}" for a, b in {urlsplit(p)[:2] for p in paths}))
        raise ColocateError(
            f"table {table.name}: its replicas are in {names}, and a Spark table reads its partitions from one "
            f"file system; read through the replica file system (ship the locality jar: spark.jars, or "
            f"build it with build_support/locality_jar.py), or put the group's object-store backends under prefixes "
            f"of one bucket")
    root = layout.replica_root(paths[0]) or fs.parent(paths[0])
    return fs.join(root, "_colocate")

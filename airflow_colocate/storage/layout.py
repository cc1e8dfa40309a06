"""Where files live on a backend. One place, so planner, jobs and gc agree.

``{root}/{db}/{table}_{tableId}/{partition}/v{version}/b{bucket}/part-…_{bucket:05d}.c000.snappy.parquet``

The table id in the path keeps a re-created table apart from a dropped one of the same name; the
version directory makes every write land somewhere new, so a failed write never touches visible
files; the ``_{bucket:05d}`` suffix is Spark's own bucket-file naming, which Spark's bucketed scan
parses to assign files to buckets.

Temporary copies (clone and write) go to ``{root}/_colocate/tmp/`` on the same backend, outside
every replica directory: Spark reads every file of a registered replica directory, so a half copy
left there by a killed job would be read as rows. They are renamed into place once verified, and
``colocate gc`` removes the ones a killed job left behind.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

STAGING = "_staging"
TMP = "_colocate/tmp"
# where a registered table's read leaves a line per replica it found bad (spark.replica_paths), for
# the control plane to mark the next time it reads (jobs.read); outside every replica directory
READ_FAILURES = "_colocate/read-failures"

# the URI schemes of an S3 API: a copy between two of its locations is made by the server
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})

_REPLICA_DIR = re.compile(r"^(?P<root>.+)/[^/]+/[^/]+_\d+/[^/]+/v\d{6}/b\d{5}$")


def table_dir(root: str, db: str, table: str, table_id: int) -> str:
    return f"{root.rstrip('/')}/{db}/{table}_{table_id}"


def version_dir(root: str, db: str, table: str, table_id: int, partition: str, version: int) -> str:
    return f"{table_dir(root, db, table, table_id)}/{partition}/v{version:06d}"


def replica_dir(root: str, db: str, table: str, table_id: int, partition: str, version: int, bucket: int) -> str:
    return f"{version_dir(root, db, table, table_id, partition, version)}/b{bucket:05d}"


def staging_dir(root: str, job_id: str) -> str:
    return f"{root.rstrip('/')}/{STAGING}/{job_id}"


def bucket_file_name(write_id: str, bucket: int, suffix: str = ".c000.snappy.parquet") -> str:
    """Spark's ``BucketingUtils`` name: ``part-00000-<id>_<bucket:05d>.c000…``."""
    return f"part-00000-{write_id}_{bucket:05d}{suffix}"


_LAYOUT = re.compile(r"_\d{5}\.s(\d{5,})\.c\d{3}\.")


def layout_suffix(layout_bucket: int, index: int = 0) -> str:
    """The suffix of a split layout's file: ``.s<layout bucket>.c<index>`` after Spark's
    ``_<bucket>``, so Spark's bucketed scan still reads it as its map bucket (the family) and
    verify can check its rows against the finer bucket it names."""
    return f".s{layout_bucket:05d}.c{index:03d}.snappy.parquet"


def layout_bucket_of(name: str) -> int | None:
    """The finer bucket a split layout's file name carries (:func:`layout_suffix`), else None."""
    m = _LAYOUT.search(name)
    return int(m.group(1)) if m else None


def read_failures_dir(root: str) -> str:
    """The backend's folder of read-failure reports (:data:`READ_FAILURES`)."""
    return f"{root.rstrip('/')}/{READ_FAILURES}"


def tmp_dir(root: str) -> str:
    """The backend's area for temporary copies: same file system as its replica directories (so
    the final rename is atomic), never inside one of them."""
    return f"{root.rstrip('/')}/{TMP}"


def replica_root(path: str) -> str | None:
    """The backend root a replica directory made by :func:`replica_dir` lives under, or None for a
    path of another shape."""
    m = _REPLICA_DIR.match(path.rstrip("/"))
    return m.group("root") if m else None


def copied_by_the_store(dst: str, sources) -> bool:
    """True when a clone to ``dst`` is a copy the store makes itself (S3 API to S3 API) whichever of
    ``sources`` (replica dirs) the clone plan picks: no byte passes through the clone job, so what
    bounds a batch of them is the requests, not the bytes."""
    return urlsplit(str(dst)).scheme in S3_SCHEMES and all(urlsplit(str(s)).scheme in S3_SCHEMES for s in sources)

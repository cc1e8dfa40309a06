"""Which data files an Iceberg table of a colocated table names: exactly one replica of every
bucket of every visible partition version, the one our reads prefer.

One replica, because every replica of a bucket holds the same rows: naming two would double them.
The one reads prefer (the read planner's choice, handed in), so an engine reading through Iceberg
loads the backends as our own reads do and never a replica the catalog knows to be bad.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


# Hadoop's names for an S3 bucket, which Iceberg's FileIOs (pyiceberg's, Iceberg's S3FileIO, Trino's)
# do not know: they read the same object as s3://.
ICEBERG_SCHEMES = {"s3a": "s3", "s3n": "s3"}


@dataclass(frozen=True)
class WantedFile:
    partition: str  # our partition value ('all' for an unpartitioned table)
    replica_dir: str  # the bucket's chosen replica directory, as the catalog names it (what gc must keep)
    path: str  # the data file's URI as Iceberg names it (iceberg_uri)
    size: int  # bytes, as the catalog recorded them


def iceberg_uri(uri: str) -> str:
    """Our URI as an Iceberg table names it: ``s3a://b/k`` is ``s3://b/k`` (the same object), so
    every engine's FileIO opens what we publish; any other URI is left as it is."""
    scheme, sep, rest = uri.partition("://")
    return f"{ICEBERG_SCHEMES[scheme.lower()]}://{rest}" if sep and scheme.lower() in ICEBERG_SCHEMES else uri


def our_uri(uri: str, roots: Iterable[str]) -> str:
    """The inverse of :func:`iceberg_uri` for a path under one of our backend ``roots``: what a
    retained snapshot names, as the catalog's pins name it (the longest matching root wins)."""
    for root in sorted(roots, key=len, reverse=True):
        base, ours = iceberg_uri(root).rstrip("/"), root.rstrip("/")
        if uri == base or uri.startswith(base + "/"):
            return ours + uri[len(base):]
    return uri


def wanted_files(read_table) -> list[WantedFile]:
    """From a read plan's table (``core.contract.ReadTable``: per partition and bucket, the chosen
    replica first among its candidates), every data file, sorted by path. A bucket with no rows
    has no file worth naming."""
    out = []
    for p in read_table.partitions:
        for seq, path in enumerate(p.bucket_paths):
            if not path:
                continue
            chosen = p.candidates[seq][0] if p.candidates and p.candidates[seq] else None
            if chosen is None or chosen.files is None:
                raise ValueError(f"{read_table.table}/{p.value} bucket {seq}: the catalog has no file list for its "
                                 f"replica {path} (recorded before 0.2); 'colocate verify' records it")
            for name, size in chosen.files:
                if str(name).endswith(".parquet"):
                    out.append(WantedFile(p.value, path, iceberg_uri(f"{path.rstrip('/')}/{name}"), int(size)))
    return sorted(out, key=lambda f: f.path)


def digest(files: Iterable[WantedFile], schema_version: int) -> str:
    """A fingerprint of what a publication names: equal digests, nothing to publish. What doctor
    compares to see a lagging table without asking the Iceberg catalog."""
    return digest_of(partition_digests(files), schema_version)


def digest_of(partitions: dict[str, str], schema_version: int) -> str:
    """:func:`digest` from the partitions' digests: a commit that changed one partition updates
    the table's digest from the recorded others without reading them again."""
    h = hashlib.sha256(f"schema {schema_version}\n".encode())
    for p, d in sorted(partitions.items()):
        h.update(f"{p}\t{d}\n".encode())
    return h.hexdigest()


def partition_digests(files: Iterable[WantedFile]) -> dict[str, str]:
    """partition -> a digest of the files named there: which partitions a publication must compare."""
    by: dict[str, hashlib._Hash] = {}
    for f in sorted(files, key=lambda f: f.path):
        by.setdefault(f.partition, hashlib.sha256()).update(f"{f.path}\t{f.size}\n".encode())
    return {p: h.hexdigest() for p, h in sorted(by.items())}


def changed_partitions(now: dict[str, str], before: dict[str, str] | None) -> set[str] | None:
    """The partitions whose files differ from the last recorded publication (None: compare all)."""
    if before is None:
        return None
    return {p for p in set(now) | set(before) if now.get(p) != before.get(p)}


def replica_dirs(files: Iterable[WantedFile]) -> list[str]:
    return sorted({f.replica_dir for f in files})

"""Copies between two backends of one S3 API, done by the store: no byte passes through us.

A repair of a lost S3 backend copies thousands of replica files from the surviving backends. On a
local disk the bytes go through this process (hashed as they pass); on S3 the server can copy an
object itself (``CopyObject``, or ``UploadPartCopy`` part by part above
:data:`MULTIPART_COPY_BYTES`), so streaming them through Python or Spark would only add a round
trip over the network per byte. What the copy must still prove is that the destination holds the
catalog's bytes:

- where the store keeps a full-object SHA-256 of the copy (``ChecksumSHA256``: AWS S3 computes
  one when asked, and keeps the one an upload carried), it is compared with the catalog's checksum
  and no byte is read;
- else the copy is read back once and hashed (a source overwritten behind our back must not be
  spread by a repair, and its ETag, the MD5 the store computed, is comparable to nothing the
  catalog holds). SeaweedFS keeps no SHA-256 for objects written without one, as Spark's are, so
  on it a clone reads each copied byte once, and writes none.

Sizes must agree, and an object copied in one piece must keep the source's ETag.

The address and key of the store come from where the AWS SDKs, pyarrow and hadoop-aws all look:
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, or the
instance's role on AWS; an Airflow connection puts them there (``spark/object_stores.py``).
"""

from __future__ import annotations

import base64
import os
from functools import lru_cache
from urllib.parse import unquote, urlsplit

from airflow_colocate.core.errors import ColocateError

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
# S3 copies one object in one request up to 5 GiB; above that only part by part.
MULTIPART_COPY_BYTES = int(os.environ.get("COLOCATE_S3_MULTIPART_COPY_BYTES", 5 * 1024 ** 3))
MULTIPART_PART_BYTES = 512 * 1024 ** 2


def is_s3(uri: str) -> bool:
    return urlsplit(str(uri)).scheme in S3_SCHEMES


def bucket_key(uri: str) -> tuple[str, str]:
    parts = urlsplit(str(uri))
    return parts.netloc, unquote(parts.path).lstrip("/")


@lru_cache(maxsize=1)
def _client():
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return None
    return boto3.client("s3", config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                            max_pool_connections=32))


def has_client() -> bool:
    return _client() is not None


def _sha256_hex(head: dict) -> str | None:
    value = head.get("ChecksumSHA256")
    if not value or "-" in value:  # "<base64>-<parts>": a checksum of part checksums
        return None
    return base64.b64decode(value).hex()


def _single(head: dict) -> bool:
    """An object uploaded in one piece: its ETag is the MD5 of its bytes, comparable across copies."""
    return "-" not in (head.get("ETag") or "-")


def _copy(client, sb: str, sk: str, db: str, dk: str, size: int) -> None:
    if size <= MULTIPART_COPY_BYTES:
        client.copy_object(Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk}, MetadataDirective="COPY")
        return
    upload = client.create_multipart_upload(Bucket=db, Key=dk)["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, size, MULTIPART_PART_BYTES), start=1):
            end = min(start + MULTIPART_PART_BYTES, size) - 1
            got = client.upload_part_copy(Bucket=db, Key=dk, UploadId=upload, PartNumber=number,
                                          CopySource={"Bucket": sb, "Key": sk}, CopySourceRange=f"bytes={start}-{end}")
            parts.append({"PartNumber": number, "ETag": got["CopyPartResult"]["ETag"]})
        client.complete_multipart_upload(Bucket=db, Key=dk, UploadId=upload, MultipartUpload={"Parts": parts})
    except BaseException:
        client.abort_multipart_upload(Bucket=db, Key=dk, UploadId=upload)
        raise


def server_copy(src_uri: str, dst_uri: str, expect_sha256: str | None, read_back) -> tuple[int, str]:
    """Copy ``src`` to ``dst`` inside the store and prove the copy: (bytes, sha256 hex).

    ``read_back(uri) -> sha256 hex`` hashes an object whose checksum the store cannot give. A copy
    that fails its check is deleted and raises, naming both ends and both checksums."""
    client = _client()
    if client is None:
        raise ColocateError(f"copying {src_uri} to {dst_uri} needs boto3 for the store's server-side copy: "
                            f"pip install 'airflow-colocate[s3]' where the control plane and the Spark jobs run")
    sb, sk = bucket_key(src_uri)
    db, dk = bucket_key(dst_uri)
    try:
        head = client.head_object(Bucket=sb, Key=sk, ChecksumMode="ENABLED")
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise FileNotFoundError(src_uri) from None
        raise
    size = head["ContentLength"]
    _copy(client, sb, sk, db, dk, size)
    got = client.head_object(Bucket=db, Key=dk, ChecksumMode="ENABLED")
    problem = None
    digest = _sha256_hex(got)
    if got["ContentLength"] != size:
        problem = f"the copy holds {got['ContentLength']} bytes, the source {size}"
    elif _single(head) and _single(got) and got.get("ETag") != head.get("ETag"):
        problem = f"the copy's ETag {got.get('ETag')} is not the source's {head.get('ETag')}"
    elif digest is None:
        digest = read_back(dst_uri)
    if problem is None and expect_sha256 is not None and digest != expect_sha256:
        problem = f"expected sha256 {expect_sha256}, the copy has {digest}"
    if problem is not None:
        client.delete_object(Bucket=db, Key=dk)
        raise ColocateError(f"server-side copy of {src_uri} to {dst_uri} failed its check: {problem}; "
                            f"the copy was deleted")
    return size, digest

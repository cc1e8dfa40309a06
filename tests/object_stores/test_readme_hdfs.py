"""The README's "Backends on HDFS" set-up, run as written against the MiniDFSCluster of the tests:
the NameNode's address is the cluster's in place of the README's ``namenode:8020``, the folders
the README says must exist are made first (as ``hdfs dfs -mkdir -p`` would), and every
``colocate`` line runs as it stands."""

from __future__ import annotations

import json
import shlex

from readme_blocks import readme_block

from airflow_colocate.cli import main
from airflow_colocate.storage import identity


def test_the_readme_hdfs_setup_runs_as_written(hdfs_server, tmp_path, monkeypatch, capsys):
    from pyarrow.fs import FileSelector

    lines = readme_block("### Backends on HDFS")
    commands = [shlex.split(line.replace("hdfs://namenode:8020", hdfs_server.uri)) for line in lines]
    assert commands and all(c[0] == "colocate" for c in commands), lines
    roots = [c[3] for c in commands if c[1:3] == ["backend", "add"]]
    assert len(roots) == 2 and all(r.startswith(hdfs_server.uri + "/") for r in roots)
    from airflow_colocate.storage.fs import _arrow

    for root in roots:  # what the README's comment asks of the operator
        filesystem, path = _arrow(root)
        filesystem.create_dir(path, recursive=True)
    monkeypatch.setenv("COLOCATE_CATALOG_URL", f"sqlite:///{tmp_path / 'catalog.db'}")
    assert main(["init"]) == 0
    for argv in commands:
        assert main(argv[1:]) == 0, (argv, capsys.readouterr())
    capsys.readouterr()
    assert main(["backend", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(b["Root"] for b in listed) == sorted(roots) and {b["State"] for b in listed} == {"alive"}
    for b in listed:  # each folder holds its backend's identity marker, read without the CLI
        assert identity.read_marker(b["Root"])["backend_id"] == b["BackendId"]
        filesystem, path = _arrow(b["Root"])
        assert filesystem.get_file_info(FileSelector(path))
    assert main(["show", "groups", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)
    assert [(g["GroupName"], g["BucketsNum"], g["ReplicationNum"]) for g in groups] == [("1_g_events", 8, 1)]  # full name: dbId_groupName

"""One rule and one vocabulary decide whether a group's joins shuffle, and why: a reason's wording
changed in ``model/reasons.py`` alone shows on the page, in the CLI, in the read planner's reasons
and the join explain built from them, and still maps to its metric tag."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_colocate.catalog import Catalog
from airflow_colocate.cli import main
from airflow_colocate.core.contract import JoinExplain
from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.read import read_plans
from airflow_colocate.model.reasons import Fallback
from airflow_colocate.plugins.page import render_page
from airflow_colocate.planner.explain import explain_text
from colocate_testing import add_local_backends
from plugin_testing import commit_fake_write

WORDING = "joins of this group wait for its repair"


@pytest.fixture
def lake(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    cat = Catalog(url, actor="pytest")
    cat.init()
    add_local_backends(cat, tmp_path / "backends", n=3)
    for t in ("orders", "items"):
        cat.tables.create(t, [("k", "bigint"), ("dt", "date")], ["k"], bucket_num=6, replication_num=2,
                          partition_cols=["dt"], colocate_with="g")
        commit_fake_write(cat, t, "2026-11-01")
    cat.backends.set_state("be2", "down", reason="disk pulled")  # the map names it: joins shuffle
    yield cat
    cat.dispose()


def test_a_reason_worded_once_reads_the_same_everywhere(lake, monkeypatch, capsys):
    monkeypatch.setattr(Fallback.NOT_STABLE, "sentence", WORDING)
    expected = f"{WORDING}: its bucket map names backend(s) be2, which are not alive"

    outlook = lake.groups.outlook("g", relocate_delay=timedelta(minutes=30))
    assert outlook.joins_shuffle and outlook.joins_shuffle_reason == expected

    assert main(["group", "show", "g"]) == 0
    assert expected in capsys.readouterr().out

    assert expected in render_page(lake, None, delay=timedelta(minutes=30))

    reads = read_plans(lake, {"orders": None, "items": None})
    assert set(reads.reasons.values()) == {expected} and reads.group is None
    explain = explain_text([JoinExplain("SortMergeJoin", ["orders"], ["items"], 1, 1, False, reads.reasons["orders"])])
    assert f"colocate: false, reason: {expected}" in explain

    assert metrics.reason_tag(reads.reasons["orders"]) == "group_not_stable"


def test_every_reason_has_its_own_sentence_and_tag():
    assert len({k.sentence for k in Fallback}) == len({k.tag for k in Fallback}) == len(Fallback)
    for kind in Fallback:
        assert Fallback.of(kind.because("some detail")) is kind
    assert Fallback.of("something else") is None and Fallback.of(None) is None

"""``group split`` (issue 45, point 2) against the balance loop and where users look: refused while
a balance job changes the group, with nothing changed, and allowed once it has finished; the CLI
refuses a bad factor in one line; ``group show --json``, the API's group detail and the metrics
name the map's count, the next writes' count and the partitions written at each."""

from __future__ import annotations

import json

import pytest
from balance_lake import Killed, kill_at

from airflow_colocate.cli import main
from airflow_colocate.core.errors import Conflict
from airflow_colocate.plugins import prometheus
from airflow_colocate.plugins.presenters import group_detail

DAYS = ["2026-11-01", "2026-11-02"]


def test_split_waits_for_a_running_balance_job(lake):
    lake.create("orders", buckets=4)
    for d, day in enumerate(DAYS):
        lake.write("orders", day, range(d * 1000, d * 1000 + 200))
    lake.add_backend("be4")
    with pytest.raises(Killed):
        lake.run(on_step=kill_at("cloned"))
    cat = lake.catalog
    (job,) = [j for j in cat.jobs.list(states=["running"]) if j.kind == "balance"]
    before, events = cat.groups.get("g"), len(cat.events(limit=1000))
    with pytest.raises(Conflict, match=rf"^cannot split group \S+_g: balance job {job.id} \(balance\) is changing it; "
                                       r"split it once the job has finished"):
        cat.groups.split("g", 2)
    assert cat.groups.get("g") == before and len(cat.events(limit=1000)) == events
    lake.run()  # resumes and finishes the job
    g = cat.groups.get("g", )
    assert cat.groups.split("g", 2).layout == 8 and cat.groups.split("g", 3).layout == 24
    assert [e.detail["new_layout"] for e in cat.events(limit=10) if e.kind == "group.split"] == [24, 8]
    assert g.bucket_num == 4 and len(cat.groups.get("g").bucket_map) == 4  # the map keeps its 4 entries


def test_split_in_the_cli_group_show_api_and_metrics(lake, monkeypatch, capsys):
    lake.create("orders", buckets=4)
    lake.write("orders", DAYS[0], range(200))
    monkeypatch.setenv("COLOCATE_CATALOG_URL", lake.catalog.url)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    for factor, words in (("1", "invalid split factor 1 for group 1_g: expected an integer of at least 2 (e.g. 2 "
                                "turns its 4 buckets into 8)"),
                          ("20000", "4 buckets x 20000 = 80000 exceeds the maximum bucket count 65536; give a factor "
                                    "of at most 16384")):
        code, out, err = run("group", "split", "g", "--factor", factor)
        assert code != 0 and words in err and len(err.strip().splitlines()) == 1, err
    code, out, _ = run("group", "split", "g", "--factor", "2")
    assert code == 0 and "new versions written at 8 buckets (4 in the map)" in out
    code, out, _ = run("group", "show", "g", "--json")
    shown = json.loads(out)
    assert (shown["bucket_num"], shown["layout_buckets"], shown["layouts"]) == (4, 8, {"4": 1}), shown
    code, out, _ = run("group", "show", "g")
    assert "4 in the map, new versions at 8 (split); partitions: 1 at 4" in out
    g = lake.catalog.groups.get("g")
    detail = group_detail(lake.catalog, g)
    assert detail["layout_buckets"] == 8 and detail["layouts"] == {"4": 1}
    text = prometheus.render(lake.catalog.metrics.read())
    assert 'colocate_group_layout_buckets{group="1_g"} 8' in text
    assert 'colocate_group_layout_partitions{buckets="4",group="1_g"} 1' in text or \
        'colocate_group_layout_partitions{group="1_g",buckets="4"} 1' in text, text

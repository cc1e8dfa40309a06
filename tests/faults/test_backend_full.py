"""ENOSPC on a backend: its root is a small tmpfs, filled up before a write's placement, a repair's
clone, and the work dir's plan and report files. Each operation fails with one line naming the
backend (or the work dir) and the full disk; every committed partition keeps exactly its rows; the
failed operation leaves nothing visible; once space is freed the same operation succeeds."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from balance_lake import Clock, Lake, assert_whole, rows
from injection import fill, small_tmpfs

from airflow_colocate.catalog import Catalog
from airflow_colocate.core.contract import Source, WriteReport
from airflow_colocate.core.errors import ColocateError, StorageFull
from airflow_colocate.jobs.full_disk import work_dir_full
from airflow_colocate.jobs.write import finish_write, prepare_write, write_in_session
from airflow_colocate.spark import entry
from airflow_colocate.storage.plan_files import load_report, save_plan

DAY, DAY2 = "2026-11-01", "2026-11-02"


def source(path, keys) -> Source:
    path.mkdir(parents=True, exist_ok=True)
    keys = list(keys)
    pq.write_table(pa.table({"id": pa.array(keys, pa.int64()), "v": pa.array([f"v{k}" for k in keys])}),
                   path / "part-0.parquet")
    return Source(format="parquet", path=str(path))


@pytest.fixture
def full_lake(tmp_path):
    """be1, be2 on the ordinary disk, be3 on a 2 MiB tmpfs; orders (4 buckets, 2 replicas) written once."""
    with small_tmpfs(tmp_path / "backends" / "be3", size="2m") as be3:
        clock = Clock()
        catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}", actor="pytest", clock=clock)
        catalog.init()
        lake = Lake(catalog, clock, tmp_path)
        for name in ("be1", "be2", "be3"):
            lake.add_backend(name)
        lake.create("orders")
        lake.write("orders", DAY, range(100))
        lake.disk = be3
        yield lake
        catalog.dispose()


def one_line(exc: BaseException) -> str:
    line = str(exc)
    assert "\n" not in line, line
    return line


@pytest.mark.spark
def test_write_onto_a_full_backend(full_lake, spark, tmp_path):
    lake, catalog = full_lake, full_lake.catalog
    before = rows(catalog, "orders")
    filler = fill(lake.disk)
    with pytest.raises(ColocateError) as failed:
        write_in_session(spark, catalog, "orders", DAY, source(tmp_path / "src", range(2000)), work_dir=lake.work)
    line = one_line(failed.value)
    be3 = (lake.root / "backends" / "be3").as_uri()
    assert line.startswith(f"backend be3 ({be3}) is full: placing the buckets of default.orders failed: "
                           f"no space left on device under {be3}"), line
    assert line.endswith("the write of default.orders 2026-11-01 was aborted and nothing of it is visible: "
                         "free space on be3 (or decommission it), then run it again")
    assert rows(catalog, "orders") == before
    assert catalog.partitions.list("orders")[0].visible_version == 1

    filler.unlink()
    write_in_session(spark, catalog, "orders", DAY, source(tmp_path / "src", range(2000)), work_dir=lake.work)
    assert [r[0] for r in rows(catalog, "orders")[DAY]] == list(range(2000))


def test_repair_clone_onto_a_full_backend(full_lake):
    lake, catalog = full_lake, full_lake.catalog
    lake.write("orders", DAY2, range(3000))
    before = rows(catalog, "orders")
    catalog.backends.decommission("be1")  # its buckets are cloned to be2 and be3
    filler = fill(lake.disk)
    outcome = lake.run()
    (job,) = outcome["jobs"]
    assert job.state == "running" and job.notes[-1] == "not switched yet: the next run continues"
    (line,) = [n for n in job.notes if n.startswith("clones to backend be3 failed")]
    assert "no space left on device under " + (lake.root / "backends" / "be3").as_uri() in line
    assert line.endswith("free space on be3 (or decommission it), then run balance again") and "\n" not in line
    assert rows(catalog, "orders") == before
    health = catalog.health.check_group("g")  # the sources stay verified: a full target is not their fault
    assert not health.stable and not [r for r in health.reasons if "bad" in r.problem], health.reasons

    filler.unlink()
    lake.run()
    assert_whole(catalog)
    assert rows(catalog, "orders") == before


@pytest.mark.spark
def test_plan_and_report_files_in_a_full_work_dir(full_lake, spark, tmp_path, capsys):
    """The work dir (plans and reports) on a tmpfs of its own: a plan that cannot be saved stops the
    write before Spark; a report that cannot be saved (nor its ``.error`` line) is told by the
    work dir's free space, as the operator says it; the write is aborted and nothing is visible."""
    catalog = full_lake.catalog
    before = rows(catalog, "orders")
    with small_tmpfs(tmp_path / "work", size="1m") as work:
        src = source(tmp_path / "src", range(300))
        ticket, plan = prepare_write(catalog, "orders", DAY, src, work_dir=work)
        plan_uri = plan.report_uri.replace("report.json", "plan.json")
        filler = fill(work)
        with pytest.raises(StorageFull) as failed:
            save_plan(plan, plan_uri)
        line = one_line(failed.value)
        assert line.startswith(f"no space left on device under {plan_uri.rsplit('/', 1)[0]}: writing plan.json failed "
                               "(No space left on device); nothing was written there: free space on that disk"), line
        filler.unlink()
        save_plan(plan, plan_uri)

        filler = fill(work)  # the job runs, then cannot write its report nor the reason
        capsys.readouterr()
        assert entry.main(["--plan", plan_uri, "--kind", "write"]) == 1
        assert "could not write" in capsys.readouterr().err
        line = one_line(work_dir_full(plan.report_uri))
        assert line.startswith(f"the work dir {plan.report_uri.rsplit('/', 1)[0]} has no space left on its disk: "
                               f"the Spark job could not write its report {plan.report_uri}"), line
        catalog.writes.abort(ticket.job_id, line)  # what the operator's failure does
        assert rows(catalog, "orders") == before

        filler.unlink()  # the next run after space is freed commits
        assert work_dir_full(plan.report_uri) is None
        ticket, plan = prepare_write(catalog, "orders", DAY, src, work_dir=work)
        plan_uri = save_plan(plan, plan.report_uri.replace("report.json", "plan.json"))
        assert entry.main(["--plan", plan_uri, "--kind", "write"]) == 0
        finish_write(catalog, ticket, load_report(WriteReport, plan.report_uri))
    assert [r[0] for r in rows(catalog, "orders")[DAY]] == list(range(300))

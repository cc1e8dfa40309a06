"""``ColocateJoinOperator``: a join over catalog tables, bucket by bucket when the group allows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_colocate.core.contract import JoinReport
from airflow_colocate.core.errors import InvalidArgument
from airflow_colocate.jobs import metrics
from airflow_colocate.jobs.iceberg import check_iceberg_args, ensure_published
from airflow_colocate.jobs.join import fail_join, finish_join, prepare_join
from airflow_colocate.operators.base import ColocateSparkOperator, backend_names
from airflow_colocate.operators.links import ColocationLink
from airflow_colocate.operators.log_summary import Phases, join_lines
from airflow_colocate.operators.spark_ui import SparkHistoryLink
from airflow_colocate.operators.write import table_asset
from airflow_colocate.planner.join import structured_sql


class ColocateJoinOperator(ColocateSparkOperator):
    """Run a Spark SQL ``query`` over catalog ``tables`` (``{"orders": ["{{ ds }}"], ...}``), or a
    structured join (``join_tables`` + ``on`` + ``how`` + ``columns`` for ``partitions``), with the
    result going to ``output_table`` (a catalog table, maybe in the same group: the next join on
    it is colocated too) or ``output_path`` (parquet). The explain (``colocate: true`` or
    ``colocate: false, reason: …`` per join) and the report go to the log and XCom.

    :param require_colocate: fail, before any output is committed, when a join between tables of
        one group would shuffle.
    :param disable_colocate_join: fall back to a shuffle join for this run only.
    :param hash_budget: memory (bytes or ``"512m"``) one task may give one bucket's hash-join build
        side; a table whose every bucket fits is joined by a hash join inside each bucket, no sort.
        Default: ``spark.colocate.join.hashBudget`` or (executor memory - 300 MiB) x
        spark.memory.fraction x 0.5 / executor cores; ``0``: always sort-merge.
    :param executor_hosts: the hosts that run Spark executors (a list or ``"node1,node2"``): each
        bucket reads a replica on one of them when it has one, so its task runs where its files are.
    :param iceberg: publishes ``output_table`` as an Iceberg table, as the write operator's does.
    :param join_policy: ``"readable"`` keeps this run's join bucketed while the group is unstable,
        as long as every bucket has a verified replica on an alive backend (``"stable"``: only while
        the group is stable); None follows the group's policy (``colocate group set-join-policy``).
    """

    job_kind = "join"
    report_type = JoinReport
    template_fields: Sequence[str] = (
        *ColocateSparkOperator.template_fields,
        "query", "tables", "partitions", "output_table", "output_partition", "output_path", "join_policy",
        "iceberg_warehouse",
    )
    template_fields_renderers = {"query": "sql", "tables": "json"}
    ui_color = "#c9e4c5"
    operator_extra_links = (ColocationLink(), SparkHistoryLink())

    def __init__(self, *, query: str | None = None, tables: dict[str, list[str] | None] | None = None,
                 join_tables: Sequence[str] | None = None, on: Sequence[Sequence[Sequence[str]]] | None = None,
                 how: str = "inner", columns: Sequence[str] = (), partitions: list[str] | None = None,
                 output_table: str | None = None, output_partition: str = "all", output_mode: str = "overwrite",
                 output_path: str | None = None, require_colocate: bool = False, disable_colocate_join: bool = False,
                 hash_budget: int | str | None = None, executor_hosts: Sequence[str] | str | None = None,
                 join_policy: str | None = None, iceberg: bool | None = None, iceberg_warehouse: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("name", f"colocate-join-{kwargs.get('task_id', 'join')}")
        if output_table:  # the output table is an Asset, updated like a write's table
            kwargs.setdefault("outlets", [table_asset(output_table)])
        super().__init__(**kwargs)
        self.query = query
        self.tables = tables or {}
        self.join_tables = list(join_tables or [])
        self.on = on or []
        self.how = how
        self.columns = list(columns)
        self.partitions = partitions
        self.output_table = output_table
        self.output_partition = output_partition
        self.output_mode = output_mode
        self.output_path = output_path
        self.require_colocate = require_colocate
        self.disable_colocate_join = disable_colocate_join
        self.hash_budget = hash_budget
        self.join_policy = join_policy
        check_iceberg_args(iceberg, iceberg_warehouse, table=output_table or None, table_arg="output_table")
        self.iceberg, self.iceberg_warehouse = iceberg, iceberg_warehouse
        if isinstance(executor_hosts, str):
            executor_hosts = [h.strip() for h in executor_hosts.split(",") if h.strip()]
        self.executor_hosts = None if executor_hosts is None else list(executor_hosts)

    def _query(self, catalog) -> tuple[str, dict[str, list[str] | None]]:
        if bool(self.query) == bool(self.join_tables):
            raise InvalidArgument("give either query (+ tables) or a structured join (join_tables + on + columns)")
        if self.query:
            if not self.tables:
                raise InvalidArgument("query needs tables: the catalog tables it reads, e.g. {'orders': ['2026-11-01']}")
            return self.query, dict(self.tables)
        views = [catalog.tables.get(t) for t in self.join_tables]
        return structured_sql(views, self.on, self.how, self.columns), {t: self.partitions for t in self.join_tables}

    def execute(self, context) -> dict:
        phases = Phases()
        with phases("plan"):
            catalog = self.catalog
            query, tables = self._query(catalog)
            plan, ticket = prepare_join(catalog, query, tables, require_colocate=self.require_colocate,
                                        disable_colocate_join=self.disable_colocate_join, output_table=self.output_table,
                                        output_partition=self.output_partition, output_mode=self.output_mode,
                                        output_path=self.output_path, work_dir=self.work_dir, job_name=self.task_id,
                                        hash_budget=self.hash_budget, executor_hosts=self.executor_hosts,
                                        join_policy=self.join_policy or None)
            if self.output_table:  # the output's commit publishes it
                ensure_published(catalog, self.output_table, self.iceberg, warehouse=self.iceberg_warehouse)
        for t in plan.tables:
            why = plan.reasons.get(t.name)
            self.log.info("colocate: %s registered %s", t.name, "bucketed (colocated)" if not why else f"plain: {why}")
        with phases("spark job"):  # a failure aborts the output's write and records replicas found bad
            report = self.run_job(context, plan, on_failure=lambda exc: fail_join(catalog, ticket, plan, exc))
        with phases("commit"):
            summary = finish_join(catalog, ticket, report)
        metrics.join_finished(summary)
        summary["group"] = next((g for g in plan.groups.values() if g), None)  # for the Colocation link
        summary["elapsed"] = {name: round(seconds, 2) for name, seconds in phases.seconds.items()}
        summary["spark_ui"] = self.spark_ui()
        # Spark's raw plan (attribute ids and all) under its own key: the return value stays readable
        physical_plan = summary.pop("physical_plan", report.physical_plan)
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key="physical_plan", value=physical_plan)
        if self.output_table and summary.get("output"):
            self._asset_event(context, summary["output"])
        self._finished = (summary, list(tables))
        self.log_summary([*join_lines(summary, backend_names(catalog)),
                          *([f"Spark UI: {summary['spark_ui']}"] if summary["spark_ui"] else []), phases.line()])
        return summary

    def get_openlineage_facets_on_complete(self, task_instance):
        """OpenLineage (when Airflow's provider is installed): the catalog tables read in, the
        output table (rows, bytes) or path (rows) out (operators/lineage.py)."""
        from airflow_colocate.operators.lineage import join_lineage

        summary, tables = getattr(self, "_finished", (None, []))
        return join_lineage(summary, tables=tables, output_path=self.output_path)

    def _asset_event(self, context, output: dict) -> None:
        """The output table's Asset event carries the partition, version and rows, as a write's does."""
        outlet_events = context.get("outlet_events") if hasattr(context, "get") else None
        if outlet_events is None:
            return
        try:
            outlet_events[table_asset(self.output_table)].extra = {
                "partition": output["partition"], "version": output["version"], "rows": output["rows"]}
        except Exception as exc:  # an asset event is a convenience, never a reason to fail a committed join
            self.log.warning("colocate: could not attach asset event extra: %s", exc)

"""ColocateJoinOperator(executor_hosts=...) (issue 17): the hosts that run executors, as a list or a
comma-separated string (a template or a Variable renders to one), reach the read planner as a list."""

from __future__ import annotations

from airflow_colocate.operators.join import ColocateJoinOperator


def test_executor_hosts_as_list_or_comma_separated_string():
    op = ColocateJoinOperator(task_id="j1", query="SELECT 1", tables={"t": None}, executor_hosts="node1, node2,")
    assert op.executor_hosts == ["node1", "node2"]
    op = ColocateJoinOperator(task_id="j2", query="SELECT 1", tables={"t": None}, executor_hosts=("node3",))
    assert op.executor_hosts == ["node3"]
    assert ColocateJoinOperator(task_id="j3", query="SELECT 1", tables={"t": None}).executor_hosts is None

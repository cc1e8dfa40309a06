"""What Airflow learns from the package: provider info through its entry point (operators, hooks,
the `colocate` connection type with its form, the extra link, asset URIs), and the link's target."""

from __future__ import annotations

import pytest

from airflow_colocate.operators.links import ColocationLink, group_of, page_url


@pytest.fixture(scope="module")
def providers():
    from airflow.providers_manager import ProvidersManager

    return ProvidersManager()


def test_airflow_finds_the_provider_through_its_entry_point(providers):
    assert "airflow-colocate" in providers.providers
    info = providers.providers["airflow-colocate"].data
    assert info["name"] == "Colocate" and info["connection-types"][0]["connection-type"] == "colocate"
    modules = {m for entry in info["operators"] for m in entry["python-modules"]}
    assert modules == operator_modules(), "the provider info lists exactly the modules that define an operator"


def operator_modules() -> set[str]:
    """Every module of ``airflow_colocate.operators`` that defines an operator class of its own."""
    import importlib
    import pkgutil

    from airflow.sdk import BaseOperator

    import airflow_colocate.operators as package

    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == "base":  # ColocateSparkOperator: the operators' shared base, not one a DAG uses
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if any(isinstance(v, type) and issubclass(v, BaseOperator) and v.__module__ == module.__name__
               for v in vars(module).values()):
            found.add(module.__name__)
    assert found >= {"airflow_colocate.operators.write", "airflow_colocate.operators.verify"}, found
    return found


def test_provider_info_is_valid_and_declares_the_authorization_setting(providers):
    """Airflow validates provider info against its schema; the one setting shows in `airflow config`."""
    import json
    from pathlib import Path

    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = providers.providers["airflow-colocate"].data
    jsonschema.validate(info, schema)
    option = dict(providers.provider_configs)["airflow-colocate"]["colocate"]
    assert option["options"]["authorization"]["default"] == "airflow"


def test_connection_type_and_its_form(providers):
    hook = providers.hooks["colocate"]
    assert hook is not None and hook.hook_class_name == "airflow_colocate.hooks.catalog.ColocateCatalogHook"
    assert hook.connection_type == "colocate" and hook.hook_name == "Colocate catalog"
    form = providers.field_behaviours["colocate"]
    assert form["relabeling"]["host"] == "Catalog host (PostgreSQL)"
    assert "embedded SQLite" in form["placeholders"]["host"]
    fields = {name.rsplit("__", 1)[-1]: w for name, w in providers.connection_form_widgets.items()
              if w.package_name == "airflow-colocate"}
    assert set(fields) == {"catalog_url", "work_dir"}
    # the URL holds the catalog's password: the form and Airflow's API treat it as a secret
    assert "Catalog URL" in str(fields["catalog_url"].field) and fields["catalog_url"].is_sensitive
    assert not fields["work_dir"].is_sensitive


def test_the_form_fields_are_what_the_hook_reads(monkeypatch, tmp_path):
    """A connection saved from the form (extra holds catalog_url and work_dir) reaches the catalog."""
    import json

    from airflow_colocate.catalog import Catalog
    from airflow_colocate.hooks.catalog import ColocateCatalogHook

    url = f"sqlite:///{tmp_path / 'from-form.db'}"
    Catalog(url).init()
    monkeypatch.setenv("AIRFLOW_CONN_COLOCATE_FORM", json.dumps(
        {"conn_type": "colocate", "extra": {"catalog_url": url, "work_dir": str(tmp_path / "runs")}}))
    hook = ColocateCatalogHook("colocate_form")
    assert hook.catalog_url() == url and hook.work_dir() == str(tmp_path / "runs")
    assert hook.get_conn().backends.list() == []


def test_extra_link_is_registered_and_on_every_spark_operator(providers):
    assert "airflow_colocate.operators.links.ColocationLink" in providers.extra_links_class_names
    from airflow_colocate.operators.balance import ColocateBalanceOperator
    from airflow_colocate.operators.join import ColocateJoinOperator
    from airflow_colocate.operators.write import ColocateWriteOperator

    from airflow_colocate.operators.spark_ui import SparkHistoryLink

    assert "airflow_colocate.operators.spark_ui.SparkHistoryLink" in providers.extra_links_class_names
    for op in (ColocateWriteOperator, ColocateJoinOperator):
        assert [type(link) for link in op.operator_extra_links] == [ColocationLink, SparkHistoryLink], op.__name__
    assert [type(link) for link in ColocateBalanceOperator.operator_extra_links] == [ColocationLink]


def test_spark_history_link_from_the_environment_or_the_spark_conf():
    """Issue 16 (9): the "Spark UI" button opens the history server when one is configured."""
    from airflow_colocate.operators.spark_ui import history_url

    assert history_url({}, env={}) is None  # nothing configured: no link, no log line
    assert history_url({"spark.yarn.historyServer.address": "rm.example.com:18080"}, env={}) == "http://rm.example.com:18080/"
    assert history_url({"spark.colocate.historyUrl": "https://shs.example.com/"}, "application_17_0042", env={}) == \
        "https://shs.example.com/history/application_17_0042/jobs/"
    assert history_url({"spark.colocate.historyUrl": "https://a/"}, env={"COLOCATE_SPARK_HISTORY_URL": "http://b:18080"}) \
        == "http://b:18080/"  # the worker's environment wins


def test_the_link_opens_the_group_the_task_worked_on():
    assert group_of({"table": "default.orders", "group": "1.1"}) == "1.1"
    assert group_of({"groups": [{"group": "1_g_tpch", "stable": True}]}) == "1_g_tpch"
    assert group_of({"dry_run": True, "plans": [{"group": "1_a"}, {"group": "1_b"}]}) is None  # two: the overview
    assert group_of(None) is None and group_of("text") is None
    # inside Airflow's UI: /plugin/colocation, then the page's own path, which the UI's iframe loads
    assert page_url("1.1") == "/plugin/colocation/api/colocate/ui?group=1.1"
    assert page_url("1_my group") == "/plugin/colocation/api/colocate/ui?group=1_my%20group"
    assert page_url() == "/plugin/colocation/api/colocate/ui"


def test_the_link_keeps_a_base_url_sub_path(monkeypatch):
    """Behind a proxy at /airflow the UI lives under it and so does the page the iframe loads."""
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/airflow/")
    assert page_url("1.1") == "https://airflow.example.com/airflow/plugin/colocation/airflow/api/colocate/ui?group=1.1"

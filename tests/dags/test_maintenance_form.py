"""The maintenance DAG's trigger form (issue 16, item 1): with only ``action`` chosen it must be
submittable and valid, as Airflow's UI decides it, and a run with that conf must work.

Airflow's trigger form greys out "Trigger" while a field it considers required is empty; its rule
(``ui/src/components/FlexibleForm``, in the built UI as ``isRequired``) is: a param is required when
its schema has a ``type`` and that type is not a list holding ``"null"``. The form then sends every
field, empty ones as ``null``, and the API server validates the conf against the DAG's params
(``ParamsDict.validate``). Both are checked here on the DAG as the UI receives it (serialized)."""

from __future__ import annotations

import json

import pytest

from daily_pipeline import DAGS

ACTIONS = ("probe", "repair", "balance", "decommission", "verify", "retention")


def required_by_the_form(schema: dict) -> bool:
    """The trigger form's rule (Airflow 3.3 UI): typed and not nullable."""
    kind = schema.get("type")
    return bool(kind) and not (isinstance(kind, list) and "null" in kind)


@pytest.fixture(scope="module")
def served_params():
    """The DAG's params as the API server hands them to the trigger form: through serialization."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.dags["colocate_maintenance"]
    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params


def test_only_action_is_needed_to_submit_the_form(served_params):
    form = {name: served_params.get_param(name).dump() for name in served_params}
    blocking = [name for name, p in form.items()
                if required_by_the_form(p["schema"]) and p["value"] in (None, "")]
    assert blocking == [], f"the trigger form would wait for {blocking}"
    for name in ("group", "table", "backend"):
        assert form[name]["value"] is None and "null" in form[name]["schema"]["type"], form[name]
    assert json.dumps(form)  # what the UI receives is plain JSON


@pytest.mark.parametrize("action", ACTIONS)
def test_the_conf_the_form_sends_with_only_action_chosen_is_valid(served_params, action):
    # the form sends every field: the chosen action, the defaults, and null for the empty ones;
    # the API server merges it into the DAG's params and validates (SerializedDAG.create_dagrun)
    conf = {name: served_params.get_param(name).value for name in served_params}
    conf["action"] = action
    resolved = served_params.deep_merge(conf).validate()
    assert resolved["action"] == action and resolved["group"] is None and resolved["backend"] is None
    assert served_params.deep_merge({"action": action}).validate()["table"] is None  # or just the action


def test_the_form_still_refuses_what_is_wrong(served_params):
    """Nullable is not anything: a number for a group or an unknown action is refused."""
    from airflow.exceptions import ParamValidationError

    for bad in ({"action": "explode"}, {"action": "repair", "group": 7}):
        with pytest.raises(ParamValidationError):
            served_params.deep_merge(bad).validate()


def test_templates_render_an_empty_group_as_no_group(served_params):
    """``{{ params.group or None }}`` under render_template_as_native_obj: None, not the text
    "None", reaches the operators (which would otherwise look up a group called None)."""
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS)).dags["colocate_maintenance"]
    env = dag.get_template_env()
    for value, expected in ((None, None), ("", None), ("1_g_orders", "1_g_orders")):
        rendered = env.from_string("{{ params.group or None }}").render(params={"group": value})
        assert rendered == expected, (value, rendered)


def test_dry_run_and_relocate_now_are_optional(served_params):
    """Issue 30: the form marks neither as required; unticked, they are false."""
    for name in ("dry_run", "relocate_now"):
        p = served_params.get_param(name).dump()
        assert not required_by_the_form(p["schema"]) and p["value"] is False, p
    assert served_params.deep_merge({"action": "repair", "dry_run": None}).validate()["dry_run"] is None


def test_a_dry_run_probe_reports_what_it_would_record_and_records_nothing(tmp_path, monkeypatch):
    """The probe task with dry_run: a backend whose disk is gone would be down; the catalog keeps
    every state, heartbeat and event as it was."""
    import shutil

    from airflow.dag_processing.dagbag import DagBag

    from airflow_colocate.catalog import Catalog

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("COLOCATE_CATALOG_URL", url)
    cat = Catalog(url, actor="pytest")
    cat.init()
    for name in ("be1", "be2"):
        (tmp_path / name).mkdir()
        cat.backends.add((tmp_path / name).as_uri(), name=name)
    shutil.rmtree(tmp_path / "be2")
    before = ([(b.state, b.last_heartbeat) for b in cat.backends.list()], len(cat.events(limit=1000)))
    probe = DagBag(dag_folder=str(DAGS)).dags["colocate_maintenance"].get_task("probe").python_callable
    got = {r["backend"]: r for r in probe(params={"dry_run": True})}
    assert got["be1"]["reachable"] and got["be1"]["would_be"] == "alive"
    assert not got["be2"]["reachable"] and got["be2"]["would_be"] == "down" and "missing" in got["be2"]["error"], got["be2"]
    assert ([(b.state, b.last_heartbeat) for b in cat.backends.list()], len(cat.events(limit=1000))) == before
    cat.dispose()

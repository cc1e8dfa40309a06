"""Old import paths of 0.1 keep working for one release, with a warning that names the new path."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from airflow_colocate._moved import MOVED

# A name users may import from each old path, and where it lives now.
USED = {
    "airflow_colocate.errors": "ColocateError",
    "airflow_colocate.naming": "check_name",
    "airflow_colocate.sqltypes": "parse_columns",
    "airflow_colocate.plans": "WritePlan",
    "airflow_colocate.planning": "write_plan",
    "airflow_colocate.join_planner": "predict_join",
    "airflow_colocate.balance_planner": "plan_balance",
    "airflow_colocate.balancer": "session_runner",
    "airflow_colocate.health": "probe_backends",
    "airflow_colocate.read": "register",
    "airflow_colocate.catalog.stability": "GroupHealth",
    "airflow_colocate.plugins.api": "CatalogSource",
}


def test_every_moved_module_has_a_case():
    assert set(USED) == set(MOVED)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_forwards_with_a_deprecation_warning(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
        value = getattr(module, USED[old])
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old][0] in str(w.message) for w in caught)
    homes = [importlib.import_module(new) for new in MOVED[old]]
    assert any(getattr(home, USED[old], None) is value for home in homes)
    with pytest.raises(AttributeError, match="no longer exists"):
        getattr(module, "no_such_name")


def test_old_jobs_names_forward():
    import airflow_colocate.jobs as jobs
    from airflow_colocate.jobs.write import write_in_session

    with pytest.warns(DeprecationWarning, match="airflow_colocate.jobs.write.write_in_session"):
        assert jobs.write_in_session is write_in_session

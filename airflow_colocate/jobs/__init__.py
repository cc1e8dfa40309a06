"""Side effects around the Spark jobs: plan in the catalog, run (spark-submit, in a session, or in
process), check the report, commit. One module per kind of work."""

from __future__ import annotations

import importlib
import warnings

# Names the single ``airflow_colocate/jobs.py`` of 0.1 exported, now in write.py and join.py.
_OLD = {"prepare_write": "write", "finish_write": "write", "write_in_session": "write",
        "prepare_join": "join", "finish_join": "join", "join_in_session": "join"}


def __getattr__(name: str):
    if name in _OLD:
        new = f"airflow_colocate.jobs.{_OLD[name]}"
        warnings.warn(f"airflow_colocate.jobs.{name} has moved to {new}.{name}; the old path goes away in 0.3",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Old import paths of modules that moved in 0.2, kept working for one release with a warning.

Users' DAGs and notebooks may import ``airflow_colocate.read`` or ``airflow_colocate.errors``; a
finder on ``sys.meta_path`` answers those names with a module that forwards every attribute to its
new home (or homes, for a module that was split) and warns once where to import it from now.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED: dict[str, tuple[str, ...]] = {
    "airflow_colocate.errors": ("airflow_colocate.core.errors",),
    "airflow_colocate.naming": ("airflow_colocate.core.naming",),
    "airflow_colocate.sqltypes": ("airflow_colocate.core.sqltypes",),
    "airflow_colocate.plans": ("airflow_colocate.core.contract",),
    "airflow_colocate.planning": ("airflow_colocate.planner.write", "airflow_colocate.planner.reads"),
    "airflow_colocate.join_planner": ("airflow_colocate.planner.join", "airflow_colocate.planner.reads"),
    "airflow_colocate.balance_planner": ("airflow_colocate.planner.balance",),
    "airflow_colocate.balancer": ("airflow_colocate.jobs.balance", "airflow_colocate.jobs.runners"),
    "airflow_colocate.health": ("airflow_colocate.jobs.health", "airflow_colocate.storage.probe"),
    "airflow_colocate.read": ("airflow_colocate.jobs.read",),
    "airflow_colocate.catalog.stability": ("airflow_colocate.catalog.views",),
    "airflow_colocate.plugins.api": ("airflow_colocate.plugins.app", "airflow_colocate.plugins.presenters",
                                     "airflow_colocate.plugins.schemas"),
}
REMOVED_IN = "0.3"


def forwarding_getattr(old: str, targets: tuple[str, ...]):
    def __getattr__(name: str):
        for target in targets:
            module = importlib.import_module(target)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"{old}.{name} no longer exists; look in {', '.join(targets)}")

    return __getattr__


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        targets = MOVED[module.__name__]
        warnings.warn(f"{module.__name__} has moved to {' and '.join(targets)}; the old path goes away in "
                      f"airflow-colocate {REMOVED_IN}", DeprecationWarning, stacklevel=2)
        module.__getattr__ = forwarding_getattr(module.__name__, targets)


def install() -> None:
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())

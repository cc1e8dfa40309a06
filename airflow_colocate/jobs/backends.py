"""Adding a backend is a catalog change and a storage check: the root must exist and take a write
before the catalog lists it as alive, so a typo or an unmounted disk is refused at once instead of
becoming an empty backend that the balancer fills."""

from __future__ import annotations

from airflow_colocate.catalog.checks import normalize_root
from airflow_colocate.catalog.views import BackendView
from airflow_colocate.storage import identity


def add_backend(catalog, root_uri: str, *, name: str | None = None, host: str | None = None,
                capacity_bytes: int | None = None) -> BackendView:
    root = normalize_root(root_uri)
    identity.check_root_usable(root)
    return catalog.add_backend(root, name=name, host=host, capacity_bytes=capacity_bytes)

"""What every route of the admin API asks for first: the catalog, opened for the request's
authenticated user (reads need the read permission, changes the change permission, the metrics
the scrape token or a reader; see :mod:`.auth`). The app keeps one :class:`~.app.CatalogSource`
in ``app.state.catalogs``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool

from airflow_colocate.catalog import Catalog
from airflow_colocate.plugins import auth


def reader_catalog(request: Request, user: auth.Reader) -> Catalog:
    return request.app.state.catalogs.catalog(auth.actor(user))


def admin_catalog(request: Request, user: auth.Admin) -> Catalog:
    return request.app.state.catalogs.catalog(auth.actor(user))


async def metrics_catalog(request: Request) -> Catalog:
    """The scrape token (``[colocate] metrics_token``, which does not expire), else a reading user."""
    if auth.is_metrics_token(request.headers.get("authorization")):
        actor = auth.SCRAPER
    else:
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

        user = await get_user(request, None, await bearer_scheme(request))
        auth.check(user, auth.READ)
        actor = auth.actor(user)
    return await run_in_threadpool(request.app.state.catalogs.catalog, actor)


ReadCatalog = Annotated[Catalog, Depends(reader_catalog)]
MetricsCatalog = Annotated[Catalog, Depends(metrics_catalog)]
AdminCatalog = Annotated[Catalog, Depends(admin_catalog)]

__all__ = ["AdminCatalog", "MetricsCatalog", "ReadCatalog"]

"""The admin HTTP API, a FastAPI app that the plugin mounts at ``/api/colocate`` in Airflow's API
server, and the route of the Colocation page.

Reads need an authenticated Airflow user, changes an admin (see :mod:`.auth`). Every change is one
catalog transaction whose event row names the Airflow user (``airflow:<name>``). The seeds' URLs
are kept: ``GET /api/colocate``, ``POST /api/colocate/group_stable|group_unstable?db_id=&group_id=``
and ``POST /api/colocate/bucketseq?db_id=&group_id=`` with the map as the body.

The routes are one router per resource (:mod:`.routes_groups`, :mod:`.routes_lake`,
:mod:`.routes_pages`), their dependencies in :mod:`.deps`, the error answers in :mod:`.errors`;
this module builds the app and holds the catalog source it shares.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine

from airflow_colocate import __version__
from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import make_engine
from airflow_colocate.core.errors import ColocateError
from airflow_colocate.plugins import errors
from airflow_colocate.plugins.guard import RequestGuard
from airflow_colocate.plugins.routes_groups import router as groups_router
from airflow_colocate.plugins.routes_lake import router as lake_router
from airflow_colocate.plugins.routes_pages import router as pages_router

STATIC_DIR = Path(__file__).parent / "static"
log = logging.getLogger(__name__)


class CatalogUnavailable(ColocateError):
    """The catalog could not be opened (unreachable, refused the login): 503, no URL shown."""


# ---------------------------------------------------------------------- catalog per request


class CatalogSource:
    """One engine per app, opened on first use: the URL given, else the one the ``colocate_default``
    connection, ``COLOCATE_CATALOG_URL`` or the embedded default names (see the catalog hook)."""

    def __init__(self, url: str | None = None):
        self._url = url
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def catalog(self, actor: str) -> Catalog:
        with self._lock:
            if self._engine is None:
                url = self._url
                if url is None:
                    from airflow_colocate.hooks.catalog import ColocateCatalogHook

                    url = ColocateCatalogHook().catalog_url()
                engine = make_engine(url)
                try:
                    Catalog(url, engine=engine, actor=actor).check_schema()
                except ColocateError:
                    engine.dispose()
                    raise
                except Exception as exc:  # the driver's message names host, port, user or file
                    engine.dispose()
                    log.error("colocation catalog unavailable: %s", exc)
                    raise CatalogUnavailable("colocation catalog unreachable") from exc
                self._url, self._engine = url, engine
        return Catalog(self._url, engine=self._engine, actor=actor)

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None


def create_app(catalog_url: str | None = None) -> FastAPI:
    app = FastAPI(
        title="airflow-colocate admin API",
        version=__version__,
        description="Colocation groups: the index, groups, backends and balance jobs; mark a group stable or "
                    "unstable; force a bucket sequence. Authenticate as in Airflow's API (`POST /auth/token`, then "
                    "`Authorization: Bearer <token>`, or the UI's cookie); changes need an admin.",
        docs_url=None, redoc_url=None,  # their pages load scripts from a CDN: /docs is routes_pages' own
    )
    app.state.catalogs = CatalogSource(catalog_url)
    app.add_middleware(RequestGuard)
    errors.install(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="colocate_static")
    for router in (groups_router, lake_router, pages_router):
        app.include_router(router)
    return app

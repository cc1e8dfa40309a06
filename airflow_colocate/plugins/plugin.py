"""The Airflow 3 plugin (entry point ``airflow.plugins``): the admin API mounted at
``/api/colocate`` in Airflow's API server, and the Colocation page in the UI's navigation.

The catalog is the one the ``colocate_default`` connection names, else ``COLOCATE_CATALOG_URL``,
else the embedded SQLite catalog (as for the operators); it is opened on the first request.
"""

from __future__ import annotations

import threading

from airflow.plugins_manager import AirflowPlugin

from airflow_colocate.core.web import PREFIX, VIEW_ROUTE


class ColocateApp:
    """The admin API's ASGI app, built on its first request.

    Every Airflow process loads plugins (the scheduler, the dag processor, each task), but only
    the API server serves this app; building it lazily keeps the API server's modules out of the
    others. ``fastapi`` is the FastAPI app itself, ``state`` its state.
    """

    def __init__(self, catalog_url: str | None = None):
        self._catalog_url = catalog_url
        self._app = None
        self._lock = threading.Lock()

    @property
    def fastapi(self):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    from airflow_colocate.plugins.app import create_app

                    self._app = create_app(self._catalog_url)
        return self._app

    @property
    def state(self):
        return self.fastapi.state

    async def __call__(self, scope, receive, send):
        await self.fastapi(scope, receive, send)


app = ColocateApp()


class IndexPathMiddleware:
    """Serve the seeds' index URL ``/api/colocate`` (no slash) from the mounted app.

    Airflow mounts a plugin app at a prefix, so the app answers ``/api/colocate/`` but the bare
    prefix would fall through to Airflow's ``/api/{path}`` "not found" route. This rewrites that
    one path and nothing else.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path = scope.get("path", "")
            root = scope.get("root_path", "") or ""
            route = path[len(root):] if root and path.startswith(root) else path
            if route == PREFIX:
                scope = dict(scope, path=path + "/", raw_path=(path + "/").encode())
        await self.app(scope, receive, send)


class ColocatePlugin(AirflowPlugin):
    name = "colocate"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "airflow-colocate admin API"}]
    fastapi_root_middlewares = [{"middleware": IndexPathMiddleware, "args": [], "kwargs": {},
                                 "name": "airflow-colocate index path"}]
    external_views = [{
        "name": "Colocation",
        "href": f"{PREFIX}/ui",
        "destination": "nav",
        "url_route": VIEW_ROUTE,
        "icon": f"{PREFIX}/static/colocation-icon.svg",
        "nav_top_level": True,
    }]

"""The pages the admin API serves: the API reference (the OpenAPI document as plain HTML, no
CDN), the guide (the README) and the Colocation page itself."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse

from airflow_colocate.plugins import auth
from airflow_colocate.plugins.page import render_page

router = APIRouter()


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    """The API reference, rendered here from the OpenAPI document (no CDN: works offline)."""
    from airflow_colocate.plugins.apidoc import render

    return HTMLResponse(render(request.app.openapi(), str(request.scope.get("root_path", ""))))


@router.get("/guide", response_class=HTMLResponse, include_in_schema=False)
def guide() -> HTMLResponse:
    """The README (the provider's Documentation link on Airflow's Providers page)."""
    from airflow_colocate.plugins.guide import render

    return HTMLResponse(render())


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
async def page(request: Request, group: Annotated[str | None, Query(max_length=200)] = None,
               events_before: Annotated[int | None, Query(ge=1)] = None,
               table: Annotated[str | None, Query(max_length=200)] = None,
               backend: Annotated[str | None, Query(max_length=200)] = None,
               job: Annotated[int | None, Query(ge=1)] = None) -> Any:
    """The Colocation page (an external view in Airflow's navigation). Without a session it
    sends the browser to Airflow's login, which comes back here."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    try:
        user = await get_user(request, None, await bearer_scheme(request))
    except HTTPException as exc:
        if exc.status_code != status.HTTP_401_UNAUTHORIZED:
            raise
        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)),
                                status_code=status.HTTP_303_SEE_OTHER)
    auth.check(user, auth.READ)
    source, actor = request.app.state.catalogs, auth.actor(user)
    html = await run_in_threadpool(lambda: render_page(source.catalog(actor), group,
                                                       base=str(request.scope.get("root_path", "")),
                                                       user=user.get_name(), events_before=events_before,
                                                       table=table, backend=backend, job=job))
    return HTMLResponse(html)


__all__ = ["router"]

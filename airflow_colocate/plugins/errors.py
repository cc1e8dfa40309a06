"""How the admin API answers an error: a catalog error's status (404, 409, 422, 503 without the
catalog's URL), a validation error without the body echoed back, and a refusal that never depends
on the body (FastAPI parses a JSON body before the auth dependencies run, so these handlers
authenticate and authorize first: 401, 403)."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_colocate.core.errors import (
    AlreadyExists,
    ColocateError,
    Conflict,
    InvalidArgument,
    NotFound,
    PlacementError,
    SchemaMismatch,
)
from airflow_colocate.plugins import auth

log = logging.getLogger(__name__)
MAX_ECHO_CHARS = 64
"""A validation error shows the offending value only if it is a scalar; a string longer than this
is cut. A refused 12 MB bucket map must not come back as a 12 MB error."""
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S*", re.I)


def status_of(exc: ColocateError) -> int:
    if isinstance(exc, NotFound):
        return status.HTTP_404_NOT_FOUND
    if isinstance(exc, (InvalidArgument, PlacementError, SchemaMismatch)):
        return status.HTTP_422_UNPROCESSABLE_CONTENT
    if isinstance(exc, (Conflict, AlreadyExists)):
        return status.HTTP_409_CONFLICT
    return status.HTTP_503_SERVICE_UNAVAILABLE  # e.g. the catalog was never initialised


def without_input(error: dict) -> dict:
    """One validation error without the whole input: scalars kept (strings cut), containers
    dropped, so the answer stays small and does not echo a body back."""
    error = dict(error)
    value = error.pop("input", None)
    if isinstance(value, (bool, int, float)) or value is None:
        error["input"] = value
    elif isinstance(value, str):
        error["input"] = value if len(value) <= MAX_ECHO_CHARS else value[:MAX_ECHO_CHARS] + "..."
    return error


def public_message(exc: ColocateError, code: int) -> str:
    """What a 503 may say: the reason and the fix, never the catalog's URL (it can name the
    database host, user or file); the API server's log has it."""
    if code != status.HTTP_503_SERVICE_UNAVAILABLE:
        return str(exc)
    log.error("colocation catalog unavailable: %s", exc)
    text = getattr(exc, "public", None) or URL.sub("<catalog>", str(exc))  # a driver's text names hosts
    return text + " (the API server's log names the catalog)"


async def refused(request: Request) -> JSONResponse | None:
    """401 or 403 for this request, or None when its user may make it."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    try:
        user = await get_user(request, None, await bearer_scheme(request))
    except HTTPException as denied:
        return JSONResponse({"detail": denied.detail}, status_code=denied.status_code, headers=denied.headers)
    try:
        auth.check(user, auth.READ if request.method in ("GET", "HEAD") else auth.CHANGE)
    except HTTPException as denied:
        return JSONResponse({"detail": denied.detail}, status_code=denied.status_code)
    return None


async def colocate_error(request: Request, exc: ColocateError) -> JSONResponse:
    code = status_of(exc)
    return JSONResponse(status_code=code, content={"detail": public_message(exc, code)})


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    return await refused(request) or JSONResponse(
        {"detail": jsonable_encoder([without_input(e) for e in exc.errors()])},
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


async def http_error(request: Request, exc: StarletteHTTPException) -> Any:
    if exc.status_code == status.HTTP_400_BAD_REQUEST and exc.detail == "There was an error parsing the body":
        # Bytes that are not UTF-8 JSON: as malformed as invalid JSON, so 422 like it.
        return await refused(request) or JSONResponse(
            {"detail": [{"type": "json_invalid", "loc": ["body"], "input": None,
                         "msg": "the body is not JSON (UTF-8): send the bucket map as a JSON array of arrays"}]},
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ColocateError, colocate_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


__all__ = ["install", "public_message", "status_of"]

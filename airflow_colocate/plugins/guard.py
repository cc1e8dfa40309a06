"""What the admin API refuses before any route, authentication or parsing runs: a body larger
than :data:`~.schemas.MAX_BODY_BYTES` (413), an anonymous change (401), and a change authenticated
only by the browser's cookie without :data:`~airflow_colocate.plugins.CSRF_HEADER` (403).

Why here and not in the routes: FastAPI reads and parses a JSON body before the auth dependencies
run, so a 16 MB anonymous POST used to hold the API server's one worker for seconds before its
401. This middleware answers from the headers alone; a body sent without ``Content-Length``
(chunked) is read only up to the limit. ``SameSite=Lax`` on Airflow's ``_token`` cookie stops
cross-site POSTs from other sites' forms in current browsers, but not from a sibling subdomain or
an older browser; the custom header does.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse

from airflow_colocate.plugins import CSRF_HEADER
from airflow_colocate.plugins.schemas import MAX_BODY_BYTES

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SESSION_COOKIE = "_token"  # Airflow's COOKIE_NAME_JWT_TOKEN, the UI's session


def too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"detail": f"request body larger than {limit} bytes: the largest bucket map "
                   f"(65536 buckets x 16 replicas) fits when sent as compact JSON"},
        status_code=413)


class RequestGuard:
    """ASGI middleware of the admin API app (see the module docstring)."""

    def __init__(self, app, max_body: int = MAX_BODY_BYTES):
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await JSONResponse({"detail": f"Content-Length {length[:32]!r} is not a byte count"},
                                   status_code=400)(scope, receive, send)
                return
            if int(length) > self.max_body:
                await too_large(self.max_body)(scope, receive, send)
                return
        bearer = "authorization" in headers
        cookie = SESSION_COOKIE in cookie_parser(headers.get("cookie", ""))
        if not bearer and not cookie:
            await JSONResponse({"detail": "Not authenticated"}, status_code=401,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        if not bearer and not headers.get(CSRF_HEADER):
            await JSONResponse(
                {"detail": f"Forbidden: a change authenticated by the session cookie needs the header "
                           f"{CSRF_HEADER}: 1 (the Colocation page sends it; API clients send "
                           f"Authorization: Bearer <token>)"},
                status_code=403)(scope, receive, send)
            return
        if length is None:
            body, more = bytearray(), True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    break
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_body:
                    await too_large(self.max_body)(scope, receive, send)
                    return
            replayed = False

            async def replay():
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

"""Who may read and who may change colocation groups: asked of Airflow's own auth manager.

Authentication is Airflow's: :func:`airflow.api_fastapi.core_api.security.get_user` reads the JWT
from ``Authorization: Bearer`` (``POST /auth/token``) or from the UI's ``_token`` cookie, and
answers 401 without one. Authorization is the auth manager's decision, through its public API only,
so FAB, Keycloak or any other manager decides with its own rules and roles. Which question is asked
is the setting ``[colocate] authorization`` (``AIRFLOW__COLOCATE__AUTHORIZATION``):

``airflow`` (the default): questions every auth manager already has answers for, so nothing needs
    registering. Reading is ``is_authorized_view(PLUGINS)`` (FAB: ``can_read`` on ``Plugins``, the
    Viewer role and up); changing is ``is_authorized_pool(PUT)`` (FAB: ``can_edit`` on ``Pools``,
    the Op and Admin roles): rebalancing the lake is operations work, like sizing a pool.
``colocation``: the custom resource ``Colocation`` (``is_authorized_custom_view``, ``GET`` to read,
    ``PUT`` to change), for managers that define it (a Keycloak resource, a custom manager).
    FAB grants only permissions that exist, and nothing creates ``can_read``/``can_edit`` on
    ``Colocation``, so with FAB this refuses everyone until an admin adds them. Airflow's
    SimpleAuthManager lets every role through custom views (it treats them as read-only pages):
    there a change also needs the ``admin`` role.

An unknown value refuses every request with a message naming the setting: a typo must not open
the API.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, status

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.base_auth_manager import BaseAuthManager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import GetUserDep

RESOURCE_NAME = "Colocation"
READ = "GET"
CHANGE = "PUT"
SETTING = "AIRFLOW__COLOCATE__AUTHORIZATION"
AIRFLOW_RESOURCES = "airflow"
COLOCATION_RESOURCE = "colocation"
MODES = (AIRFLOW_RESOURCES, COLOCATION_RESOURCE)


class BadAuthorizationSetting(Exception):
    pass


def mode() -> str:
    """The configured question (read at every request: Airflow's config reads the environment)."""
    from airflow.configuration import conf

    value = (conf.get("colocate", "authorization", fallback=AIRFLOW_RESOURCES) or "").strip().lower()
    if value not in MODES:
        raise BadAuthorizationSetting(
            f"the colocate API refuses every request: [colocate] authorization ({SETTING}) is {value!r}; "
            f"set it to {AIRFLOW_RESOURCES!r} (read = Plugins view, change = edit Pools; works with every auth "
            f"manager) or {COLOCATION_RESOURCE!r} (the custom resource 'Colocation')")
    return value


def _is_simple(manager: BaseAuthManager) -> bool:
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    return isinstance(manager, SimpleAuthManager)


def is_authorized(user: BaseUser, method: str) -> bool:
    manager = get_auth_manager()
    if mode() == AIRFLOW_RESOURCES:
        if method == READ:
            return manager.is_authorized_view(access_view=AccessView.PLUGINS, user=user)
        return manager.is_authorized_pool(method=CHANGE, user=user)
    if not manager.is_authorized_custom_view(method=method, resource_name=RESOURCE_NAME, user=user):
        return False
    if method != READ and _is_simple(manager):
        return str(getattr(user, "role", "") or "").upper() == "ADMIN"
    return True


def actor(user: BaseUser) -> str:
    """How the catalog's event log names an Airflow user."""
    return f"airflow:{user.get_name()}"[:128]


def forbidden(user: BaseUser, method: str) -> str:
    what = "read" if method == READ else "change"
    if mode() == AIRFLOW_RESOURCES:
        needs = ("the Plugins view (FAB: can_read on Plugins)" if method == READ
                 else "edit on Pools (FAB: can_edit on Pools, the Op and Admin roles)")
    else:
        needs = f"{method} on '{RESOURCE_NAME}'" + ("; changes need the Admin role" if method != READ and _is_simple(
            get_auth_manager()) else "")
    return (f"Forbidden: user {user.get_name()!r} may not {what} colocation groups (Airflow auth manager: "
            f"{needs}; {SETTING} chooses the question)")


def check(user: BaseUser, method: str) -> None:
    """Raise the HTTP error for a refused request (403), or for a bad setting (500)."""
    try:
        allowed = is_authorized(user, method)
        detail = None if allowed else forbidden(user, method)
    except BadAuthorizationSetting as exc:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, str(exc)) from None
    if detail is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail)


METRICS_TOKEN_SETTING = "AIRFLOW__COLOCATE__METRICS_TOKEN"
MIN_METRICS_TOKEN = 32
SCRAPER = "metrics-scraper"


def metrics_token() -> str | None:
    """``[colocate] metrics_token``: the scrape credential that does not expire, or None when unset."""
    from airflow.configuration import conf

    value = (conf.get("colocate", "metrics_token", fallback="") or "").strip()
    if value and len(value) < MIN_METRICS_TOKEN:
        raise BadAuthorizationSetting(
            f"[colocate] metrics_token ({METRICS_TOKEN_SETTING}) is shorter than {MIN_METRICS_TOKEN} characters: "
            f"set a longer random one (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return value or None


def is_metrics_token(authorization: str | None) -> bool:
    """Whether an ``Authorization`` header carries the configured scrape token (constant time)."""
    scheme, _, given = (authorization or "").partition(" ")
    try:
        token = metrics_token()
    except BadAuthorizationSetting as exc:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, str(exc)) from None
    if token is None or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def _requires(method: str):
    def dependency(user: GetUserDep) -> BaseUser:
        check(user, method)
        return user

    return dependency


Reader = Annotated[BaseUser, Depends(_requires(READ))]
Admin = Annotated[BaseUser, Depends(_requires(CHANGE))]

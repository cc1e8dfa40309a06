"""Who may read and who may change colocation groups: asked of Airflow's own auth manager.

Authentication is Airflow's: :func:`airflow.api_fastapi.core_api.security.get_user` reads the JWT
from ``Authorization: Bearer`` (``POST /auth/token``) or from the UI's ``_token`` cookie, and
answers 401 without one. Authorization is the auth manager's decision on the custom resource
``Colocation`` (:meth:`BaseAuthManager.is_authorized_custom_view`): ``GET`` to read, ``PUT`` to
change. With the FAB auth manager that is the permission ``can_read`` / ``can_edit`` on
``Colocation``, given to the Admin role.

The one exception is Airflow's SimpleAuthManager, whose ``is_authorized_custom_view`` ignores the
method and lets every role through (it treats custom views as read-only pages). For a change we ask
it with its own role rule instead, the one it applies to its own resources, with ADMIN as the least
role allowed: viewers, users and ops read, only admins change.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, status

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import GetUserDep

RESOURCE_NAME = "Colocation"
READ = "GET"
CHANGE = "PUT"


def is_authorized(user: BaseUser, method: str) -> bool:
    manager = get_auth_manager()
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import (
        SimpleAuthManager,
        SimpleAuthManagerRole,
    )

    if method != READ and isinstance(manager, SimpleAuthManager):
        return bool(SimpleAuthManager._is_authorized(method=method, allow_role=SimpleAuthManagerRole.ADMIN,
                                                     allow_get_role=SimpleAuthManagerRole.VIEWER, user=user))
    return bool(manager.is_authorized_custom_view(method=method, resource_name=RESOURCE_NAME, user=user))


def actor(user: BaseUser) -> str:
    """How the catalog's event log names an Airflow user."""
    return f"airflow:{user.get_name()}"[:128]


def forbidden(user: BaseUser, method: str) -> str:
    what = "read" if method == READ else "change"
    return (f"Forbidden: user {user.get_name()!r} may not {what} colocation groups (Airflow auth manager: {method} "
            f"on '{RESOURCE_NAME}'{'; changes need the Admin role' if method != READ else ''})")


def _requires(method: str):
    def check(user: GetUserDep) -> BaseUser:
        if not is_authorized(user, method):
            raise HTTPException(status.HTTP_403_FORBIDDEN, forbidden(user, method))
        return user

    return check


Reader = Annotated[BaseUser, Depends(_requires(READ))]
Admin = Annotated[BaseUser, Depends(_requires(CHANGE))]

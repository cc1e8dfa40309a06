"""Who may read and who may change colocation groups: asked of Airflow's own auth manager.

Authentication is Airflow's: :func:`airflow.api_fastapi.core_api.security.get_user` reads the JWT
from ``Authorization: Bearer`` (``POST /auth/token``) or from the UI's ``_token`` cookie, and
answers 401 without one. Authorization is the auth manager's decision on the custom resource
``Colocation`` (:meth:`BaseAuthManager.is_authorized_custom_view`): ``GET`` to read, ``PUT`` to
change. With the FAB auth manager that is the permission ``can_read`` / ``can_edit`` on
``Colocation``, given to the Admin role.

Only the auth manager's public API is used (``get_auth_manager().is_authorized_custom_view``), so
FAB, Keycloak or any other manager decides with its own rules. The one addition is for Airflow's
SimpleAuthManager, whose ``is_authorized_custom_view`` ignores the method and lets every role
through (it treats custom views as read-only pages): a change there also needs the user's public
``role`` to be ADMIN, so viewers, users and ops read and only admins change.
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
    if not manager.is_authorized_custom_view(method=method, resource_name=RESOURCE_NAME, user=user):
        return False
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    if method != READ and isinstance(manager, SimpleAuthManager):
        return str(getattr(user, "role", "") or "").upper() == "ADMIN"
    return True


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

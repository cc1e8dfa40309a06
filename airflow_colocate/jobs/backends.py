"""Adding a backend is a catalog change and a storage check: the root must exist and take a write
before the catalog lists it as alive, so a typo or an unmounted disk is refused at once instead of
becoming an empty backend that the balancer fills. The backend's identity marker is written at its
root then, and rewritten only by an explicit re-initialisation; it is also what lets a backend move
to another root (``set-root``): the files there are this backend's only if its marker is."""

from __future__ import annotations

from airflow_colocate.catalog.checks import normalize_root
from airflow_colocate.model.views import BackendView
from airflow_colocate.core import validate
from airflow_colocate.core.errors import ColocateError, Conflict, InvalidArgument
from airflow_colocate.storage import fs, identity


def add_backend(catalog, root_uri: str, *, name: str | None = None, host: str | None = None,
                capacity_bytes: int | None = None) -> BackendView:
    """A refused add leaves the root as it was: the probe leaves no file behind, the catalog's
    checks (name, host, a root inside another's) run before anything is written under the root,
    and a marker that cannot be completed is taken back with the folder this call made for it."""
    root = normalize_root(root_uri)
    identity.check_root_usable(root)
    token = identity.new_token()
    b = catalog.backends.add(root, name=name, host=host, capacity_bytes=capacity_bytes, marker_token=token)
    had_marker, had_folder = identity.read_marker(root) is not None, fs.exists(identity.marker_folder(root))
    try:
        identity.write_marker(root, backend_id=b.id, name=b.name, catalog_id=catalog.backends.catalog_uid(), token=token)
    except BaseException:
        if not had_marker:
            identity.remove_marker(root, folder_too=not had_folder)
        catalog.backends.remove(b.id)  # nothing may list a backend whose disk cannot carry its identity
        raise
    return b


def reinit_backend(catalog, ref: int | str, *, reason: str, keep_replicas: bool = False) -> tuple[BackendView, int]:
    """Write a new identity marker on a backend's root and record it. For a replaced disk the
    replicas it held are lost (marked bad, re-cloned by the next balance); ``keep_replicas`` is for
    a disk that is intact but has no marker yet (a backend added before 0.2).

    Every check runs before the marker is touched (the reason, the backend, its state, the root),
    and a catalog change that fails puts the marker that was there back, so a refused re-init
    leaves the disk as it was."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument("a re-initialisation needs a reason (e.g. 'disk sdb replaced'): it is kept in the event log")
    reason = validate.reason(reason, required=True)
    b = catalog.backends.get(ref)
    if b.state == "decommissioned":
        raise Conflict(f"backend {b.name} is decommissioned: add the disk as a new backend instead")
    identity.check_root_usable(b.root_uri)
    try:
        before: str | None = fs.read_text(identity.marker_uri(b.root_uri))
    except FileNotFoundError:
        before = None
    had_folder = fs.exists(identity.marker_folder(b.root_uri))
    token = identity.new_token()
    identity.write_marker(b.root_uri, backend_id=b.id, name=b.name, catalog_id=catalog.backends.catalog_uid(), token=token)
    try:
        return catalog.backends.reinit(b.id, token, reason=reason, lost=not keep_replicas)
    except BaseException:
        if before is None:
            identity.remove_marker(b.root_uri, folder_too=not had_folder)
        else:
            fs.write_text_atomic(identity.marker_uri(b.root_uri), before)
        raise


def set_backend_root(catalog, ref: int | str, root_uri: str, *, reason: str | None = None):
    """Move a backend to another root that already holds its files (a disk remounted elsewhere, a
    copied demo home). The identity marker there must be this backend's, with the token the
    catalog recorded: anything else (no marker, another backend's, another catalog's, an older
    token) is refused in one line naming both roots and what was found, and nothing changes.
    Returns the catalog's :class:`~airflow_colocate.model.views.RootChange`."""
    root = normalize_root(root_uri)
    b = catalog.backends.get(ref)
    if root == b.root_uri:
        return catalog.backends.set_root(b.id, root, reason=reason)  # already there: nothing changes
    token = catalog.backends.markers().get(b.id)
    if not token:
        raise ColocateError(f"backend {b.name} has no identity marker recorded (added before 0.2), so {root} cannot be "
                            f"checked to hold its disk: run 'colocate backend reinit {b.name} --keep-replicas' at "
                            f"{b.root_uri} first")
    problem = identity.marker_problem(root, backend_id=b.id, catalog_id=catalog.backends.catalog_uid(), token=token)
    if problem:
        raise ColocateError(f"backend {b.name}'s root stays {b.root_uri}: the new root {root} is not its disk: {problem}; "
                            f"copy or mount {b.name}'s disk there (with its {identity.MARKER}) first")
    return catalog.backends.set_root(b.id, root, reason=reason, marker_token=token)


STATE_CHANGES = ("down", "alive", "decommission", "cancel-decommission")


def change_state(catalog, ref: int | str, change: str, *, reason: str | None = None) -> tuple[BackendView, bool]:
    """An admin's change of a backend's state (mark down or up, start or cancel a drain), and every
    group's stability recomputed at once, so the next join or balance planned sees it; whether
    anything changed (marking a backend what it already is changes nothing)."""
    if change not in STATE_CHANGES:
        raise InvalidArgument(f"unknown backend state change {change!r}: one of {', '.join(STATE_CHANGES)}")
    if change == "decommission":
        b, changed = catalog.backends.decommission(ref), True
    elif change == "cancel-decommission":
        b, changed = catalog.backends.cancel_decommission(ref), True
    else:
        b, changed = catalog.backends.mark(ref, change, reason=reason)
    if changed:
        from airflow_colocate.jobs.iceberg import follow_all

        catalog.health.check_groups()
        follow_all(catalog)  # Iceberg tables name the replicas reads prefer now: none on a backend marked down
    return b, changed


"""The "Colocation" button on a task of ours in the Airflow UI: it opens the Colocation page on the
group the task wrote, joined or repaired, inside Airflow's UI (its navigation stays around it), so
the bucket map and the reasons are one click away from the task log."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from airflow.sdk import BaseOperatorLink

from airflow_colocate.core.web import PREFIX, VIEW_ROUTE


def page_url(group: str | None = None) -> str:
    """The Colocation page inside Airflow's UI, on ``group``: ``/plugin/colocation`` followed by
    the page's own path. Airflow's UI shows its external view in an iframe and, for a nav view,
    loads the path after ``/plugin/<route>`` into it (query included), so the link keeps Airflow's
    navigation around the page instead of leaving the UI. Relative to the API server unless
    ``[api] base_url`` says where it is (a sub-path there is part of the page's own path too)."""
    from airflow.configuration import conf

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    sub = urlsplit(base).path.rstrip("/") if "://" in base else base
    return (f"{base}/plugin/{VIEW_ROUTE}{sub}{PREFIX}/ui"
            + (f"?group={quote(group, safe='')}" if group else ""))


def group_of(result) -> str | None:
    """The group a task's XCom result names: a write's or join's ``group``, or the one group a
    balance run touched."""
    if not isinstance(result, dict):
        return None
    if result.get("group"):
        return str(result["group"])
    groups = {g.get("group") for g in result.get("groups", []) if isinstance(g, dict)}
    groups |= {p.get("group") for p in result.get("plans", []) if isinstance(p, dict)}
    groups.discard(None)
    return groups.pop() if len(groups) == 1 else None


class ColocationLink(BaseOperatorLink):
    name = "Colocation"

    def get_link(self, operator, *, ti_key) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        try:  # runs in the task runner as the task ends: its result is already in XCom
            result = XCom.get_value(ti_key=ti_key, key="return_value")
        except Exception:  # no result yet (running, failed): the page still helps
            result = None
        return page_url(group_of(result))


__all__ = ["ColocationLink", "group_of", "page_url"]

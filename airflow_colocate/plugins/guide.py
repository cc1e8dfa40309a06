"""The user guide (the package's README) as an HTML page of the admin API, at ``/api/colocate/guide``.

Airflow's Providers page links a provider's ``Documentation`` project URL. A provider without a
public site of its own still has its README in every installation (it is the package's long
description), and every deployment serves this plugin; so the guide is served from there, and the
project URL names it (``pyproject.toml``). No catalog and no login: it is the package's own text.
"""

from __future__ import annotations

import html
from functools import lru_cache
from importlib import metadata
from urllib.parse import urlsplit

DIST = "airflow-colocate"


@lru_cache(maxsize=1)
def readme() -> str:
    """The README as installed (the distribution's long description)."""
    try:
        meta = metadata.metadata(DIST)
        # the body of the metadata file; importlib_metadata (which Airflow may put in the place of
        # importlib.metadata) moves it into a Description header
        text = meta.get("Description") or meta.get_payload()  # type: ignore[attr-defined]
    except metadata.PackageNotFoundError:
        text = None
    return text or f"# {DIST}\n\nThe README is not in this installation's package metadata."


def _slug(title: str) -> str:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    keep = "".join(c for c in title.strip().lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


@lru_cache(maxsize=1)
def render() -> str:
    """The README as one HTML page, headings anchored as on a code host (``#airflow-provider``);
    links to the repository's other files name their path instead."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")

    def heading_open(renderer, tokens, idx, options, env):
        title = tokens[idx + 1].content if idx + 1 < len(tokens) else ""
        tokens[idx].attrSet("id", _slug(title))
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("heading_open", heading_open)

    # The README links docs/*.md and ARCHITECTURE.md relative to the repository. Those files are not
    # in the installed package, so served from here such a link would be dead: it names the path.
    def link_open(renderer, tokens, idx, options, env):
        href = tokens[idx].attrGet("href") or ""
        relative = not href.startswith(("#", "/")) and not urlsplit(href).scheme
        env.setdefault("links", []).append(href.split("#", 1)[0] if relative else None)
        return "" if relative else renderer.renderToken(tokens, idx, options, env)

    def link_close(renderer, tokens, idx, options, env):
        path = env["links"].pop()
        if path is None:
            return renderer.renderToken(tokens, idx, options, env)
        if tokens[idx - 1].content == path and tokens[idx - 2].type == "link_open":  # [docs/x.md](docs/x.md)
            return " (in the source repository)"
        return f" (<code>{html.escape(path)}</code> in the source repository)"

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("link_close", link_close)
    body = md.render(readme())
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
            f"<title>{html.escape(DIST)} guide</title><style>"
            ":root{color-scheme:light dark}body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;"
            "padding:0 1rem}pre,code{font-size:13px}pre{overflow:auto;padding:.6rem;border:1px solid #8884}"
            "table{border-collapse:collapse}td,th{border:1px solid #8886;padding:.2rem .5rem}"
            f"</style></head><body>{body}</body></html>")


__all__ = ["readme", "render"]

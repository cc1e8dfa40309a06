"""The API reference at ``/api/colocate/docs``: the OpenAPI document rendered as one plain HTML
page by the package itself. FastAPI's Swagger page loads its scripts and styles from a CDN, so on a
machine without internet (most Airflow deployments) it showed a blank page; this one needs nothing
but the server. The machine-readable document stays at ``/api/colocate/openapi.json``."""

from __future__ import annotations

import html
import json

METHODS = ("get", "post", "put", "patch", "delete")
STYLE = (":root{color-scheme:light dark}body{font:15px/1.5 system-ui,sans-serif;max-width:64rem;margin:2rem auto;"
         "padding:0 1rem}code,pre{font-size:13px}table{border-collapse:collapse}td,th{border:1px solid #8886;"
         "padding:.2rem .5rem;text-align:left;vertical-align:top}h3{margin-bottom:.2rem}.m{font-weight:bold}")


def _params(op: dict) -> str:
    rows = []
    for p in op.get("parameters", []):
        schema = p.get("schema", {})
        kind = schema.get("type") or " | ".join(s.get("type", "?") for s in schema.get("anyOf", []))
        rows.append(f"<tr><td><code>{html.escape(p['name'])}</code></td><td>{html.escape(p.get('in', ''))}</td>"
                    f"<td>{html.escape(kind)}</td><td>{'yes' if p.get('required') else ''}</td>"
                    f"<td>{html.escape(p.get('description') or schema.get('description') or '')}</td></tr>")
    if not rows:
        return ""
    return ("<table><tr><th>parameter</th><th>in</th><th>type</th><th>required</th><th>meaning</th></tr>"
            + "".join(rows) + "</table>")


def _body(op: dict) -> str:
    content = op.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if not schema:
        return ""
    ref = schema.get("$ref", "")
    name = ref.rsplit("/", 1)[-1] if ref else json.dumps(schema)[:200]
    return f"<p>Body (JSON): <a href='#schema-{html.escape(name)}'><code>{html.escape(name)}</code></a></p>"


def _operation(base: str, path: str, method: str, op: dict) -> str:
    codes = ", ".join(sorted(op.get("responses", {})))
    return (f"<h3 id='{method}-{html.escape(path)}'><span class=m>{method.upper()}</span> "
            f"<code>{html.escape(base + path)}</code></h3><p>{html.escape(op.get('summary', ''))}</p>"
            f"{_params(op)}{_body(op)}<p>Answers: {html.escape(codes)}</p>")


def render(doc: dict, base: str) -> str:
    """The whole reference: every operation, then every schema as its JSON Schema."""
    ops = [_operation(base, path, method, op) for path, item in doc.get("paths", {}).items()
           for method, op in item.items() if method in METHODS]
    schemas = "".join(f"<h3 id='schema-{html.escape(name)}'><code>{html.escape(name)}</code></h3>"
                      f"<pre>{html.escape(json.dumps(s, indent=1))}</pre>"
                      for name, s in sorted(doc.get("components", {}).get("schemas", {}).items()))
    info = doc.get("info", {})
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
            f"<title>{html.escape(info.get('title', 'API'))}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(info.get('title', ''))} {html.escape(info.get('version', ''))}</h1>"
            f"<p>{html.escape(info.get('description', ''))}</p>"
            f"<p>The OpenAPI document: <a href='{html.escape(base)}/openapi.json'><code>{html.escape(base)}/openapi.json</code></a>"
            f" · the guide: <a href='{html.escape(base)}/guide'><code>{html.escape(base)}/guide</code></a></p>"
            f"<h2>Operations</h2>{''.join(ops)}<h2>Schemas</h2>{schemas}</body></html>")


__all__ = ["render"]

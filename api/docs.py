"""GET /docs: the OpenAPI document as one browsable HTML page.

Rendered here, on the server, from the document itself (api/openapi.py), so the page says
exactly what /openapi.json says. Self-contained: no script, font or stylesheet is fetched
from anywhere (the fleets that run zkqueue are often air-gapped, and a CDN is no place for
an API's docs to depend on), and it reads without JavaScript.
"""

from __future__ import annotations

import json
from html import escape

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
main{max-width:60rem;margin:0 auto;padding:1rem 1.5rem 4rem}
nav{font-size:14px}nav a{text-decoration:none}
h1{margin:.5rem 0}h2{margin-top:2.5rem;border-bottom:1px solid #ccc}
section.op{background:#fff;border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.method{display:inline-block;min-width:4.5em;font-weight:600;font-family:monospace;text-transform:uppercase}
.get{color:#0a6}.post{color:#06c}.delete{color:#c33}.path{font-family:monospace;font-weight:600}
table{border-collapse:collapse;margin:.3rem 0 .8rem}td,th{border:1px solid #ddd;padding:.2rem .5rem;
text-align:left;vertical-align:top}th{background:#f0f0f0}code{font-size:13px}
.key{font-size:12px;color:#666}
"""


def _type(s: dict) -> str:
    """A schema in a few words of HTML: its type, with links to named schemas."""
    if "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[-1]
        return f'<a href="#schema-{escape(name)}">{escape(name)}</a>'
    if "anyOf" in s:
        return " or ".join(_type(x) for x in s["anyOf"])
    if "enum" in s:
        return "one of " + ", ".join(f"<code>{escape(json.dumps(v))}</code>" for v in s["enum"])
    t = s.get("type", "any")
    if t == "object" and s.get("properties"):     # an object described inline: its own fields
        return f"object{_fields(s)}"
    if t == "array":
        return f"array of {_type(s.get('items', {}))}"
    if t == "object" and isinstance(s.get("additionalProperties"), dict):
        return f"object of {_type(s['additionalProperties'])}"
    words = escape(t if isinstance(t, str) else " or ".join(t))
    for k in ("format", "pattern", "minimum", "minItems"):
        if k in s:
            words += f" <code>{escape(k)}: {escape(str(s[k]))}</code>"
    return words


def _fields(s: dict) -> str:
    """An object schema's properties as a table (or its type, for anything else)."""
    props = s.get("properties")
    if not props:
        return f"<p>{_type(s)}</p>"
    required = set(s.get("required", ()))
    rows = "".join(
        f"<tr><td><code>{escape(name)}</code>{' *' if name in required else ''}</td><td>{_type(p)}</td>"
        f"<td>{escape(p.get('description', ''))}"
        f"{' (default <code>' + escape(json.dumps(p['default'])) + '</code>)' if 'default' in p else ''}</td></tr>"
        for name, p in props.items())
    return f"<table><tr><th>field (* required)</th><th>type</th><th>about</th></tr>{rows}</table>"


def _operation(path: str, method: str, op: dict) -> str:
    anchor = f"{method}-{path}"
    out = [f'<section class="op" id="{escape(anchor)}"><h3><span class="method {method}">{method}</span> '
           f'<span class="path">{escape(path)}</span></h3><p>{escape(op.get("summary", ""))}</p>']
    if op.get("description"):
        out.append(f"<p>{escape(op['description'])}</p>")
    out.append('<p class="key">no API key needed</p>' if op.get("security") == []
               else '<p class="key">API key: <code>Authorization: Bearer zkq_...</code></p>')
    if op.get("parameters"):
        rows = "".join(f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p['in'])}</td>"
                       f"<td>{'yes' if p.get('required') else 'no'}</td><td>{_type(p['schema'])}</td>"
                       f"<td>{escape(p['schema'].get('description', ''))}</td></tr>" for p in op["parameters"])
        out.append(f"<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>required</th><th>type</th>"
                   f"<th>about</th></tr>{rows}</table>")
    for media_type, body in op.get("requestBody", {}).get("content", {}).items():
        out.append(f"<h4>Request body: <code>{escape(media_type)}</code></h4>{_type(body['schema'])}")
    rows = "".join(
        f"<tr><td>{escape(status)}</td><td>{escape(r.get('description', ''))}</td><td>"
        + ", ".join(f"<code>{escape(mt)}</code> {_type(c['schema'])}" for mt, c in r.get("content", {}).items())
        + "</td></tr>" for status, r in sorted(op.get("responses", {}).items()))
    out.append(f"<h4>Responses</h4><table><tr><th>status</th><th>what</th><th>body</th></tr>{rows}</table>")
    out.append("</section>")
    return "".join(out)


def page(doc: dict) -> bytes:
    """The HTML page of an OpenAPI document: every operation, then every named schema."""
    info = doc.get("info", {})
    ops = [(path, method, op) for path, item in doc.get("paths", {}).items() for method, op in item.items()]
    nav = "".join(f'<li><a href="#{escape(f"{m}-{p}")}"><span class="method {m}">{m}</span> {escape(p)}</a></li>'
                  for p, m, _ in ops)
    schemas = "".join(f'<section class="op" id="schema-{escape(name)}"><h3>{escape(name)}</h3>'
                      f"<p>{escape(s.get('description', ''))}</p>{_fields(s)}</section>"
                      for name, s in doc.get("components", {}).get("schemas", {}).items())
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(info.get("title", ""))} '
            f'HTTP API</title><meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<style>{STYLE}</style></head><body><main><h1>{escape(info.get('title', ''))} HTTP API "
            f"<small>v{escape(str(info.get('version', '')))}</small></h1><p>{escape(info.get('description', ''))}</p>"
            f'<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> '
            f"(OpenAPI {escape(doc.get('openapi', ''))}).</p><nav><ul>{nav}</ul></nav>"
            f"<h2>Endpoints</h2>{''.join(_operation(p, m, op) for p, m, op in ops)}"
            f"<h2>Schemas</h2>{schemas}</main></body></html>")
    return html.encode()

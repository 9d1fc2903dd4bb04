"""The OpenAPI 3.1 document served at /openapi.json, generated from the routes' declarations.

Nothing here is written per route: every path, method, parameter, header, body and response
comes from api/routes.py's ENDPOINTS (api/endpoint.py), and every schema from the pydantic
models and annotated types they name (api/models.py), so the document says what the
handlers check and serve. tests/test_api_contract.py checks the document against the routes
the running server mounts, and its error codes against errors.CODES.
"""

from __future__ import annotations

import json
from functools import lru_cache

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from . import models
from .endpoint import Endpoint
from .errors import CODES
from .routes import ENDPOINTS

REF = "#/components/schemas/{model}"
# Errors any route that takes a key may answer with, whatever it does.
KEYED_ERRORS = ("unauthorized", "unavailable", "timeout", "internal")


def _is_model(t) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _schemas(endpoints) -> tuple[dict, dict]:
    """(components' schemas: every model named anywhere and what they reference, {model: its
    reference})."""
    named = {models.Error}
    for e in endpoints:
        named |= {t for t in (*e.body.values(), *(o.schema for o in e.responses)) if _is_model(t)}
    refs, top = models_json_schema([(m, "validation") for m in sorted(named, key=lambda m: m.__name__)],
                                   ref_template=REF)
    return top.get("$defs", {}), {m: refs[(m, "validation")] for m in named}


def _schema(t, refs: dict) -> dict:
    """A model's reference, or an annotated type's own schema (inline)."""
    if _is_model(t):
        return refs[t]
    return TypeAdapter(t).json_schema(ref_template=REF)


def _content(schema: dict, media_type: str, description: str) -> dict:
    return {"description": description, "content": {media_type: {"schema": schema}}}


def _errors(e: Endpoint, refs: dict) -> dict:
    """Responses for the error codes an operation can answer with, grouped by status."""
    out: dict[str, dict] = {}
    codes = e.errors if e.public else ("unauthorized", *e.errors, *KEYED_ERRORS[1:])
    for code in codes:
        status = str(CODES[code])
        entry = out.setdefault(status, _content(refs[models.Error], "application/json", ""))
        entry["description"] = ", ".join(filter(None, [entry["description"], code]))
    return out


def _operation(e: Endpoint, refs: dict) -> dict:
    op: dict = {"operationId": e.handler.__name__, "summary": e.summary}
    if e.description:
        op["description"] = e.description
    if e.public:
        op["security"] = []
    params = [{"name": name, "in": "path", "required": True, "schema": _schema(models.PATH_PARAMS[name], refs)}
              for name in e.path_params]
    params += [{"name": h.name, "in": "header", "required": h.required, "schema": _schema(h.schema, refs)}
               for h in e.headers]
    if params:
        op["parameters"] = params
    if e.body:
        op["requestBody"] = {"required": True, "content": {mt: {"schema": _schema(m, refs)}
                                                           for mt, m in e.body.items()}}
    op["responses"] = {str(o.status): _content(_schema(o.schema, refs), o.media_type, o.description)
                       for o in e.responses}
    op["responses"].update(_errors(e, refs))
    return op


def build(endpoints=ENDPOINTS) -> dict:
    """The OpenAPI document of `endpoints`.

    Raises:
        KeyError: a path names a parameter api/models.py's PATH_PARAMS does not declare.
    """
    schemas, refs = _schemas(endpoints)
    paths: dict[str, dict] = {}
    for e in endpoints:
        paths.setdefault(e.path, {})[e.method.lower()] = _operation(e, refs)
    schemas = _referenced(schemas, paths)
    return {
        "openapi": "3.1.0",
        "info": {"title": "zkqueue", "version": "1",
                 "description": "Groth16 proofs (snarkjs-compatible) from a distributed proving queue. Every "
                                "endpoint but " + " and ".join(e.path for e in endpoints if e.public)
                                + " takes an API key: `Authorization: Bearer zkq_...` "
                                "(`zkqueue api-keys create NAME`). "
                                "Errors are {\"error\": {\"code\", \"message\", \"detail\"}}. "
                                "A browsable page of this document: /docs."},
        "components": {"schemas": schemas, "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}}},
        "security": [{"apiKey": []}],
        "paths": paths,
    }


def _referenced(schemas: dict, paths: dict) -> dict:
    """The schemas `paths` reference, directly or through other schemas (pydantic also lists
    those a model inlines, such as Error's body)."""
    def refs(obj) -> set[str]:
        text = json.dumps(obj)
        return {name for name in schemas if f'"{REF.format(model=name)}"' in text}
    used, todo = set(), refs(paths)
    while todo:
        name = todo.pop()
        used.add(name)
        todo |= refs(schemas[name]) - used
    return {name: schema for name, schema in schemas.items() if name in used}


@lru_cache(maxsize=1)
def document() -> dict:
    """The API's document (built once per process)."""
    return build()


@lru_cache(maxsize=1)
def document_bytes() -> bytes:
    """The document as served (encoded once per process)."""
    return json.dumps(document(), separators=(",", ":")).encode()

"""One route of the API, declared once: what Starlette mounts and what the OpenAPI document
says about it.

api/routes.py lists every route as an Endpoint (ENDPOINTS) and mounts exactly those;
api/openapi.py writes the document from the same list, so a route cannot be served
undocumented, nor documented and not served (tests/test_api_contract.py checks the running
server both ways).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from starlette.routing import Route

JSON = "application/json"
MULTIPART = "multipart/form-data"


@dataclass(frozen=True)
class Out:
    """One response: its status, what its body holds (a model or an annotated type) and
    its media type."""

    status: int
    schema: Any
    description: str
    media_type: str = JSON


@dataclass(frozen=True)
class Header:
    """A request header an endpoint reads."""

    name: str
    schema: Any
    required: bool = False


@dataclass(frozen=True)
class Endpoint:
    """A route: method, path template ("/v1/jobs/{job_id}"), the handler, and its contract.

    `body` maps each accepted media type to the model of the request body; `responses` are
    its successful answers; `errors` the error codes (api/errors.py) it answers with beyond
    those every keyed route may (unauthorized, unavailable, timeout, internal). A `public`
    endpoint needs no API key and answers only the errors it names.
    """

    method: str
    path: str
    handler: Callable
    summary: str
    responses: tuple[Out, ...]
    description: str = ""
    body: dict[str, type] = field(default_factory=dict)
    headers: tuple[Header, ...] = ()
    errors: tuple[str, ...] = ()
    public: bool = False

    @property
    def path_params(self) -> tuple[str, ...]:
        """The names of the path template's parameters, in order."""
        return tuple(re.findall(r"\{([a-z_]+)\}", self.path))

    def route(self) -> Route:
        return Route(self.path, self.handler, methods=[self.method])

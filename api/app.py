"""Assembles the ASGI app: the routes, the error handlers, the OpenAPI document and its
docs page, the request metrics, and one ApiState per process.

`create_app(settings, proc)` is what `zkqueue serve` runs under uvicorn and what the tests
start on a free port.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from starlette.applications import Starlette

from zkqueue.config import ProcessSettings, Settings

from . import docs, errors, metrics, openapi, routes
from .state import ApiState


def create_app(settings: Settings, proc: ProcessSettings) -> metrics.RequestMetrics:
    """The API as an ASGI app (`uvicorn.run(create_app(...))`)."""

    @asynccontextmanager
    async def lifespan(app):
        app.state.api = ApiState(settings, proc)
        try:
            yield
        finally:
            await app.state.api.close()

    app = Starlette(routes=[*routes.ROUTES, *routes.PAGES], exception_handlers=errors.handlers(), lifespan=lifespan)
    # Made once per process from the routes' declarations; served as bytes.
    app.state.openapi = openapi.document_bytes()
    app.state.docs_page = docs.page(openapi.document())
    return metrics.RequestMetrics(app)

"""`zkqueue serve`: the API under uvicorn, in this process."""

from __future__ import annotations

import logging
import sys

from zkqueue.config import ProcessSettings, Settings

log = logging.getLogger("zkqueue.api")


def serve(settings: Settings, proc: ProcessSettings) -> None:
    """Serves the API on proc.api_host:proc.api_port until interrupted (and its metrics on
    proc.api_metrics_port when set)."""
    import uvicorn

    from . import metrics
    from .app import create_app

    logging.basicConfig(level=proc.loglevel, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if proc.api_metrics_port:
        metrics.serve(proc.api_metrics_port, proc.api_host)
    print(f"zkqueue serve: http://{proc.api_host}:{proc.api_port} (docs at /docs, OpenAPI at /openapi.json)"
          + (f", metrics on :{proc.api_metrics_port}/metrics" if proc.api_metrics_port else ""), file=sys.stderr)
    # One process per instance: run more instances (behind a load balancer) to scale, as
    # they share nothing but Redis and the store. Keep-alive idles end after 75 s, longer
    # than the usual load balancer's 60 s, so the balancer closes first and never reuses a
    # connection the server is closing.
    uvicorn.run(create_app(settings, proc), host=proc.api_host, port=proc.api_port, log_level=proc.loglevel.lower(),
                timeout_keep_alive=75, access_log=False, server_header=False)

"""Prometheus metrics of the API: requests by route and status, and their latency.

    zkqueue_api_requests_total{method,route,status}            requests answered
    zkqueue_api_request_seconds{method,route}                  time to the response's start
    zkqueue_api_upload_bytes_total{route}                      request bodies received
    zkqueue_api_open_streams                                   event streams open now

`route` is the route's template ("/v1/jobs/{job_id}"), never the path itself, so the
number of series stays fixed whatever ids clients send ("unmatched" for unknown paths).
They are served on their own port (ZKQUEUE_API_METRICS_PORT), not on the API's: every
API endpoint but /healthz and /openapi.json takes a key, and a scraper should not need one.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()
REQUESTS = Counter("zkqueue_api_requests_total", "HTTP requests answered by the API",
                   ["method", "route", "status"], registry=REGISTRY)
LATENCY = Histogram("zkqueue_api_request_seconds", "Seconds from a request's arrival to its response's start",
                    ["method", "route"], registry=REGISTRY,
                    buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
UPLOADED = Counter("zkqueue_api_upload_bytes_total", "Request body bytes received", ["route"], registry=REGISTRY)
STREAMS = Gauge("zkqueue_api_open_streams", "Event streams open now", registry=REGISTRY)


class RequestMetrics:
    """ASGI middleware counting every HTTP request by its route template and status."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500           # a response that never started: the app failed
        received = 0
        streaming = scope["path"].endswith("/events")

        async def counting_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            return message

        async def observing_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                LATENCY.labels(scope["method"], _route(scope)).observe(time.perf_counter() - start)
            await send(message)

        if streaming:
            STREAMS.inc()
        try:
            await self.app(scope, counting_receive, observing_send)
        finally:
            if streaming:
                STREAMS.dec()
            route = _route(scope)
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            if received:
                UPLOADED.labels(route).inc(received)


def _route(scope) -> str:
    route = scope.get("route")
    return getattr(route, "path", None) or "unmatched"


def serve(port: int, addr: str) -> None:
    """Serves the metrics on http://addr:port/metrics from a background thread."""
    from prometheus_client import start_http_server
    start_http_server(port, addr=addr, registry=REGISTRY)

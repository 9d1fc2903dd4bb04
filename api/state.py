"""What every request of one server process shares: its connections and the plumbing of a
request (running blocking work off the event loop, authenticating, reading a JSON body).

The process holds no state of its own beyond connections and caches (the witness
calculators it compiled): jobs, keys, circuits and files are in Redis and the artifact
store, so any number of instances can serve the same clients. api/app.py makes one
ApiState per process; the handlers (api/routes.py) hand each function only what it uses.
"""

from __future__ import annotations

import functools
import json

import anyio
import redis.asyncio
from starlette.requests import Request

from zkqueue.config import ProcessSettings, Settings
from zkqueue.coordinator.cells import Cells
from zkqueue.coordinator.client import Client

from .auth import ApiKey, KeyStore
from .errors import ApiError
from .uploads import body_chunks


class ApiState:
    """What every request of one server process shares. Blocking work (every Client call,
    Redis through redis-py, the store) runs in worker threads through `blocking`."""

    def __init__(self, settings: Settings, proc: ProcessSettings):
        self.settings, self.proc = settings, proc
        # ZKQUEUE_REDIS_URL's Redis holds the API's own records (keys, quotas, circuits);
        # jobs live there too, or, with ZKQUEUE_CELLS, each in its cell (coordinator/cells.py).
        self.client = Client(settings=settings)
        self.jobs: Client | Cells = Cells.from_settings(settings) if settings.cells else self.client
        self.r = self.client.r
        self.store = self.client.store
        self.keys = KeyStore(self.r)
        # The event streams wait on Redis pub/sub without holding a thread each: one
        # connection pool per Redis that holds jobs (aredis_for).
        self._aredis: dict[str, redis.asyncio.Redis] = {}
        for c in self.jobs.clients.values() if isinstance(self.jobs, Cells) else [self.client]:
            c.scheduler.sender          # made now, not by two request threads at once
            self.aredis_for(c)

    def aredis_for(self, client: Client) -> redis.asyncio.Redis:
        """The asyncio Redis of `client`'s Redis (a job's cell), for its notify channel."""
        url = client.settings.redis_url
        if url not in self._aredis:
            self._aredis[url] = redis.asyncio.Redis.from_url(url, socket_connect_timeout=10)
        return self._aredis[url]

    async def close(self) -> None:
        for aredis in self._aredis.values():
            await aredis.aclose()
        if isinstance(self.jobs, Cells):
            self.jobs.close()
        self.client.close()

    async def blocking(self, fn, *args, timeout_s: float | None = -1.0):
        """fn(*args) in a worker thread, within the request timeout (`timeout_s`: -1 the
        configured one, None none).

        Raises:
            ApiError: timeout (the thread is left to finish; its result is dropped).
        """
        limit = self.proc.api_request_timeout_s if timeout_s == -1.0 else timeout_s
        call = functools.partial(fn, *args)
        if limit is None:
            return await anyio.to_thread.run_sync(call)
        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except TimeoutError:
            raise ApiError("timeout", f"the request took longer than {limit:g} s") from None

    def authenticate_blocking(self, authorization: str | None) -> ApiKey:
        """The live key of an `Authorization: Bearer <token>` header.

        Raises:
            ApiError: unauthorized.
        """
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError("unauthorized", "send an API key: Authorization: Bearer <token>",
                           headers={"WWW-Authenticate": "Bearer"})
        key = self.keys.authenticate(token.strip())
        if key is None:
            raise ApiError("unauthorized", "unknown or revoked API key",
                           headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return key

    async def authenticate(self, request: Request) -> ApiKey:
        return await self.blocking(self.authenticate_blocking, request.headers.get("authorization"))

    async def call(self, request: Request, fn):
        """Authenticates and runs fn(key), both in one worker thread."""
        authorization = request.headers.get("authorization")
        return await self.blocking(lambda: fn(self.authenticate_blocking(authorization)))

    def upload_limit(self, key: ApiKey) -> int:
        """The largest body `key` may upload: the server's limit, or the key's own if lower."""
        limit = self.proc.api_max_upload_bytes
        return min(limit, key.max_upload_bytes) if key.max_upload_bytes else limit

    async def read_json(self, request: Request):
        """The request's JSON body, read within the JSON size limit and the idle timeout.

        Raises:
            ApiError: unsupported_media_type, payload_too_large, upload_timeout, invalid_json.
        """
        body = bytearray()
        async for chunk in body_chunks(request, self.proc.api_max_json_bytes, self.proc.api_upload_idle_timeout_s):
            body.extend(chunk)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError("invalid_json", f"the body is not JSON: {exc}") from None


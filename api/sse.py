"""GET /v1/jobs/{id}/events: a job's progress as Server-Sent Events, until it is over.

Events (each `data:` is one JSON object, `id:` counts up from 1):

    status     first, the whole job as GET /v1/jobs/{id} shows it
    partition  a partition whose state, phase, attempts, worker or proof changed (its view)
    job        the job's state changed: {"job_id", "state", "error"}
    end        last, the whole job once it is over; then the server closes the stream
    lost       instead of end: the job's record vanished from Redis mid-stream (Redis lost
               its data, or the record expired): {"job_id", "message"}; submit it again

A client that reconnects gets a fresh `status` first, so it needs no replay. The stream
subscribes to the job's notify channel (every state change is PUBLISHed there) before
reading the first status, so no change falls in between, and re-reads at least every
POLL_S as well, since a message published while Redis was unreachable is lost. A comment
line goes out every ZKQUEUE_API_SSE_KEEPALIVE_S so that proxies keep an idle stream open.
"""

from __future__ import annotations

import json
import time

import anyio
import redis.asyncio
from starlette.responses import StreamingResponse

from zkqueue.coordinator import keys
from zkqueue.coordinator.client import Client, Job
from zkqueue.coordinator.errors import JobNotFound

from . import views

POLL_S = 2.0
PARTITION_FIELDS = ("state", "phase", "attempts", "synth_attempts", "worker", "proof", "errors")


def _event(seq: int, name: str, data: dict) -> bytes:
    return f"id: {seq}\nevent: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def response(client: Client, aredis: redis.asyncio.Redis, blocking, keepalive_s: float,
             job_id: str) -> StreamingResponse:
    """The event stream of a job whose owner the caller has checked: read through `client`
    in worker threads (`blocking`, ApiState.blocking), woken by the job's notify channel on
    `aredis`, with a keepalive comment every `keepalive_s` of silence."""
    return StreamingResponse(_stream(client, aredis, blocking, keepalive_s, job_id), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _snapshot(client: Client, job_id: str) -> dict:
    job = Job(client, job_id)
    st = job.status()
    return views.job_view(st, views.owner_of(st), views.verified_results(job, st))


async def _stream(client: Client, aredis: redis.asyncio.Redis, blocking, keepalive_s: float, job_id: str):
    pubsub = aredis.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(keys.notify(job_id))
        view = await blocking(_snapshot, client, job_id)
        seq = 1
        yield _event(seq, "status", view)
        sent = read = time.monotonic()
        while not view["over"]:
            changed = False
            with anyio.move_on_after(min(POLL_S, keepalive_s)):
                changed = await pubsub.get_message(timeout=None) is not None
            now = time.monotonic()
            if changed or now - read >= POLL_S:
                try:
                    new = await blocking(_snapshot, client, job_id)
                except JobNotFound:
                    seq += 1
                    yield _event(seq, "lost", {"job_id": job_id, "message": "the job's record is gone from Redis "
                                               "(Redis lost its data, or it expired): submit it again"})
                    return
                read = now
                for name, data in _changes(view, new):
                    seq += 1
                    yield _event(seq, name, data)
                    sent = now
                view = new
            if now - sent >= keepalive_s:
                yield b": keepalive\n\n"
                sent = now
        seq += 1
        yield _event(seq, "end", view)
    finally:
        with anyio.CancelScope(shield=True):
            await pubsub.aclose()


def _changes(old: dict, new: dict):
    """(event, data) for what differs between two views of one job."""
    before = {p["index"]: p for p in old["partitions"]}
    for p in new["partitions"]:
        q = before.get(p["index"])
        if q is None or any(p[f] != q[f] for f in PARTITION_FIELDS):
            yield "partition", p
    if new["state"] != old["state"]:
        yield "job", {"job_id": new["job_id"], "state": new["state"], "error": new["error"]}

"""Handing a slot to another worker: when this one is excluded from it, quarantined, or
made an invalid proof of it."""

from __future__ import annotations

import json
import logging
import time

from zkqueue.coordinator import keys

from . import context

log = logging.getLogger("zkqueue.task")

QUARANTINE_POLL_S = 2.0


def no_healthy_worker_reason(ctx: context.Context, job_id: str, slot) -> str:
    """Why a slot has nowhere to go: the builds whose proofs failed and those quarantined.
    It never blames the witness: no second build has checked it."""
    r = ctx.scheduler.r
    builds, excluded = (v.decode() if v else "" for v in r.hmget(keys.slot(job_id, slot), "invalid_builds",
                                                                 "excluded"))
    quarantined = []
    for raw in r.hvals(keys.quarantine()):
        fp = json.loads(raw).get("fingerprint") or {}
        quarantined.append(f"build {fp.get('build', '?')} ({fp.get('backend')} on {fp.get('host')})")
    parts = ["no healthy worker is left to prove it"]
    if builds:
        parts.append(f"its proofs from build {', '.join(builds.split())} (workers {', '.join(excluded.split())}) "
                     "failed verification, as a faulty build or device makes them")
    if quarantined:
        parts.append(f"quarantined: {'; '.join(quarantined)}")
    parts.append("the witness is not blamed: no second build has checked it")
    return "; ".join(parts)


def pass_on(ctx: context.Context, job_id: str, slot, token: int, *, states: str, event: str, why: str) -> str:
    """Hands the slot to another eligible worker (this one is excluded or quarantined).
    With none alive, it goes back on the shared queue, and after orphan_timeout_s of that
    the job fails, naming the builds at fault."""
    excluded = set((ctx.scheduler.r.hget(keys.slot(job_id, slot), "excluded") or b"").decode().split())
    route = ctx.scheduler.pick_route(excluded | {ctx.worker_id})   # "": no eligible worker is alive
    if not route:
        time.sleep(1.0)   # nobody else to take it yet: do not spin the message through the queue
    out = ctx.scheduler.requeue(job_id, slot, token=token, states=states, event=event,
                                reason=why if route else no_healthy_worker_reason(ctx, job_id, slot),
                                route_to=route, counts_as_attempt=False, orphaned=not route)
    return f"passed on ({out.kind}): {why}"


def wait_while_quarantined(ctx: context.Context) -> None:
    """Holds this worker's only pool slot while its build is quarantined, so it takes no more
    messages; returns when an operator clears it (or well before Celery's time limit)."""
    fp = ctx.fingerprint["id"]
    deadline = time.monotonic() + min(600.0, ctx.settings.task_time_limit_s / 2)
    log.error("worker %s: build %s (fingerprint %s) is quarantined; taking no work until "
              "`zkqueue quarantine clear %s`", ctx.worker_id, ctx.fingerprint.get("build"), fp, fp)
    while time.monotonic() < deadline and ctx.scheduler.r.hexists(keys.quarantine(), fp):
        time.sleep(QUARANTINE_POLL_S)



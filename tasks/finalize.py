"""finalize(job, token): verify every partition proof (batched) before the job is done: those
no other worker verified as they were recorded (tasks/checks.py), so that the time from the
last proof to the result does not grow with the job's size.

An invalid proof is never returned: its partition is re-enqueued on another worker (that
worker's own queue) and the producing worker's fingerprint is recorded on the job.
"""

from __future__ import annotations

import logging
import os
import time

from zkqueue.coordinator.broker import TASK_FINALIZE
from zkqueue.coordinator.keys import FINALIZE_SLOT
from zkqueue.coordinator.replies import Claimed
from zkqueue.workers.lease import LeaseKeeper

from . import checks, context
from .app import app
from .handoff import retry_after, turn_away

log = logging.getLogger("zkqueue.finalize")


def _check_all(ctx: context.Context, job_id: str, zkey_sha: str) -> tuple[list[dict], float]:
    """Checks every recorded proof (the partitions that failed alone have none) that no worker
    other than its producer verified already (tasks/checks.py): (the invalid ones, seconds
    spent verifying)."""
    todo, total = ctx.scheduler.to_verify(job_id)
    t0 = time.perf_counter()
    items = [(i, item.result, item.witness) for i, item in sorted(todo.items())]
    bad, _ = checks.verify_results(ctx, zkey_sha, items) if items else ([], [])
    log.info("job %s: %d proofs verified as they were recorded, %d here", job_id, total - len(items), len(items))
    return bad, time.perf_counter() - t0


def run_finalize(job_id: str, token: int) -> str:
    """The body of finalize; returns what happened."""
    ctx = context.get()
    s = ctx.scheduler
    claim = s.claim(job_id, FINALIZE_SLOT, token, ctx.worker_id, os.getpid(), fingerprint_id=ctx.fingerprint["id"])
    if claim.kind in ("excluded", "quarantined"):
        return turn_away(ctx, job_id, FINALIZE_SLOT, token, claim)
    if not isinstance(claim, Claimed):
        log.info("job %s finalize token %d: skipped (%s)", job_id, token, claim.kind)
        return claim.kind
    zkey_sha = s.job_files(job_id).zkey
    try:
        with LeaseKeeper(lambda: s.refresh(job_id, FINALIZE_SLOT, token, ctx.worker_id),
                         ctx.settings.lease_refresh_s, stop_grace_s=ctx.settings.stop_grace_s):
            bad, verify_s = _check_all(ctx, job_id, zkey_sha)
    except Exception as exc:
        return retry_after(ctx, job_id, FINALIZE_SLOT, token, exc, attempt=claim.attempt)
    if not bad:
        return "done" if s.finish(job_id, token, verify_s) else "stale"
    for item in bad:
        item["route_to"] = s.pick_route(s.excluded(job_id, item["index"]) | {item["worker"]})
        log.warning("job %s partition %d: %s (worker %s); re-proving on %s", job_id, item["index"],
                    item["reason"], item["worker"], item["route_to"] or "the shared queue")
    return f"reprove {s.reprove(job_id, token, bad).kind}"


@app.task(name=TASK_FINALIZE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def finalize(job_id: str, token: int = 1) -> str:
    """Verifies every partition of `job_id` and completes it, or re-proves the invalid ones."""
    return run_finalize(job_id, int(token))

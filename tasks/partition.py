"""prove_partition(job, index, token): claim, prove under a lease, record once."""

from __future__ import annotations

import logging
import os
import time

from coordinator import keys
from coordinator.broker import TASK_PROVE
from coordinator.errors import ArtifactCorrupt
from coordinator.keys import FINALIZE_SLOT
from groth16.errors import BackendUnavailable, InputError
from workers import metrics
from workers.lease import LeaseKeeper

from . import context
from .app import app

log = logging.getLogger("zkqueue.task")


def bounce(ctx: context.Context, job_id: str, slot, token: int, excluded: str) -> None:
    """This worker produced an invalid proof for the slot: pass it on to another worker."""
    others = set(excluded.split()) | {ctx.worker_id}
    route = ctx.scheduler.pick_route(others)
    if not route:
        time.sleep(1.0)   # no other worker alive yet: do not spin on the queue
    ctx.scheduler.requeue(job_id, slot, token=token, states="queued sending", event="bounced",
                          reason=f"no worker other than {' '.join(sorted(others))} (which produced an "
                                 f"invalid proof) came to re-prove it", route_to=route,
                          counts_as_attempt=False)


def run_partition(job_id: str, index: int, token: int) -> str:
    """The body of prove_partition; returns what happened (for logs and tests)."""
    ctx = context.get()
    b = ctx.scheduler.barrier
    claim = b.claim(job_id, index, token, ctx.worker_id, os.getpid())
    if claim.kind == "excluded":
        bounce(ctx, job_id, index, token, claim.detail[0])
        return "bounced"
    if claim.kind != "ok":
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind,
                 " ".join(claim.detail))
        return claim.kind
    attempt = int(claim.detail[0])
    started_at = time.time()
    zkey_sha = ctx.scheduler.r.hget(keys.job(job_id), "zkey").decode()
    witness_sha, enqueued_at = (v.decode() for v in ctx.scheduler.r.hmget(
        keys.slot(job_id, index), "witness", "enqueued_at"))
    try:
        with LeaseKeeper(lambda: b.refresh(job_id, index, token, ctx.worker_id),
                         ctx.settings.lease_refresh_s) as lease:
            witness_path = ctx.store.local_path(witness_sha)
            proved = ctx.prover.prove(zkey_sha, lambda: ctx.store.local_path(zkey_sha), witness_path,
                                      attempt=attempt, stop=lease.stop)
        if proved is None:
            return f"stopped ({lease.reason})"
    except (InputError, ArtifactCorrupt) as exc:
        # The same input fails the same way everywhere: fail the job now, name the partition.
        log.warning("job %s partition %d: bad input: %s", job_id, index, exc)
        metrics.failed("input_error")
        if b.fail_input(job_id, index, f"partition {index}: {exc}"):
            ctx.scheduler.expire_job(job_id)
        return "input_error"
    except Exception as exc:
        log.exception("job %s partition %d attempt %d failed", job_id, index, attempt)
        metrics.failed(type(exc).__name__)
        # This device cannot run the backend at all: let another worker have it.
        exclude = ctx.worker_id if isinstance(exc, BackendUnavailable) else ""
        ctx.scheduler.requeue(job_id, index, token=token, states="running", event="retry",
                              reason=f"{type(exc).__name__}: {exc} (worker {ctx.worker_id})", exclude=exclude,
                              route_to=ctx.scheduler.pick_route({exclude}) if exclude else "")
        return "retry"
    timings = dict(proved.timings_s, queued_s=started_at - float(enqueued_at))
    payload = {"proof": proved.proof, "public": proved.public, "fingerprint": ctx.fingerprint,
               "timings_s": timings, "worker": ctx.worker_id, "attempt": attempt}
    out = b.record(job_id, index, ctx.worker_id, payload)
    if out.kind == "finalize":
        ctx.scheduler.send(job_id, FINALIZE_SLOT, int(out.detail[0]))
    return out.kind


@app.task(name=TASK_PROVE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prove_partition(job_id: str, index: int, token: int = 1) -> str:
    """Proves partition `index` of `job_id` if `token` is still its current one."""
    return run_partition(job_id, int(index), int(token))

"""prove_partition(job, index, token): claim, prove under a lease, record once.

What an attempt can end in, and what the queue does:
  * a verified proof                -> recorded (HSETNX); the last one elects finalize
  * bad input                       -> the job fails now, naming the partition
  * the proof fails its own check   -> a suspected bad build or device: this worker is
                                       excluded from the slot, another re-proves it; two
                                       builds that agree fail the job as an unsatisfied witness
  * anything else                   -> tasks/outcomes.py: retried here or elsewhere
"""

from __future__ import annotations

import logging
import os

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_PROVE
from zkqueue.workers import metrics
from zkqueue.workers.lease import LeaseKeeper
from zkqueue.workers.proving import SelfCheckFailed

from . import context
from .app import app
from .handoff import pass_on, retry_after, turn_away

log = logging.getLogger("zkqueue.task")


def run_partition(job_id: str, index: int, token: int) -> str:
    """The body of prove_partition; returns what happened (for logs, tests and Flower)."""
    ctx = context.get()
    s = ctx.scheduler
    zkey_sha = (s.r.hget(keys.job(job_id), "zkey") or b"").decode()
    claim = s.claim(job_id, index, token, ctx.worker_id, os.getpid(), fingerprint_id=ctx.fingerprint["id"],
                    run_s=ctx.run_s(zkey_sha) if zkey_sha else None)
    if claim.kind in ("excluded", "quarantined"):
        return turn_away(ctx, job_id, index, token, claim)
    if claim.kind != "ok":
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind,
                 " ".join(claim.detail))
        return claim.kind
    attempt, started_at = int(claim.detail[0]), float(claim.detail[1])   # Redis's clock, as enqueued_at
    witness_sha, enqueued_at = (v.decode() for v in s.r.hmget(keys.slot(job_id, index), "witness", "enqueued_at"))
    try:
        with LeaseKeeper(lambda: s.refresh(job_id, index, token, ctx.worker_id), ctx.settings.lease_refresh_s,
                         stop_grace_s=ctx.settings.stop_grace_s) as lease:
            witness_path = ctx.store.local_path(witness_sha)
            proved = ctx.prover.prove(zkey_sha, lambda: ctx.store.local_path(zkey_sha), witness_path,
                                      attempt=attempt, stop=lease.stop)
        if proved is None:
            return f"stopped ({lease.reason})"
    except SelfCheckFailed as exc:
        log.error("job %s partition %d: %s (worker %s, build %s)", job_id, index, exc, ctx.worker_id,
                  ctx.fingerprint.get("build"))
        metrics.failed("self_check")
        out = s.suspect(job_id, index, token, ctx.worker_id, ctx.fingerprint, str(exc))
        if out.kind != "retry":
            return f"invalid proof: {out.kind}"
        return pass_on(ctx, job_id, index, token, states="running", event="retry",
                       why=f"the proof from worker {ctx.worker_id} (build {ctx.fingerprint.get('build')}) "
                           "failed verification")
    except Exception as exc:
        return retry_after(ctx, job_id, index, token, exc, attempt=attempt)
    timings = dict(proved.timings_s, queued_s=started_at - float(enqueued_at))
    payload = {"proof": proved.proof, "public": proved.public, "fingerprint": ctx.fingerprint,
               "timings_s": timings, "worker": ctx.worker_id, "attempt": attempt}
    return s.record(job_id, index, token, ctx.worker_id, payload, fingerprint_id=ctx.fingerprint["id"],
                    runtime_field=f"{zkey_sha}|{ctx.device_class}", prove_s=proved.timings_s["prove_s"],
                    key_load_s=proved.timings_s["key_load_s"]).kind


@app.task(name=TASK_PROVE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prove_partition(job_id: str, index: int, token: int = 1) -> str:
    """Proves partition `index` of `job_id` if `token` is still its current one."""
    return run_partition(job_id, int(index), int(token))

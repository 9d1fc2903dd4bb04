"""prove_partition(job, index, token): claim, prove under a lease, record once.

What an attempt can end in, and what the queue does:
  * a verified proof                -> recorded (HSETNX); the last one elects finalize
  * bad input (InputError)          -> the job fails now, naming the partition
  * the proof fails its own check   -> a suspected bad build or device: this worker is
                                       excluded from the slot, another re-proves it; two
                                       builds that agree fail the job as an unsatisfied witness
  * the device cannot run at all    -> excluded from the slot, re-proved elsewhere
  * anything else (a bug)           -> logged with its traceback, the attempt is retried
"""

from __future__ import annotations

import logging
import os

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_PROVE
from zkqueue.coordinator.errors import ArtifactCorrupt
from zkqueue.coordinator.keys import FINALIZE_SLOT
from zkqueue.groth16.errors import BackendUnavailable, InputError
from zkqueue.workers import metrics
from zkqueue.workers.lease import LeaseKeeper
from zkqueue.workers.proving import SelfCheckFailed

from . import context
from .app import app
from .handoff import pass_on, wait_while_quarantined

log = logging.getLogger("zkqueue.task")

def run_partition(job_id: str, index: int, token: int) -> str:
    """The body of prove_partition; returns what happened (for logs, tests and Flower)."""
    ctx = context.get()
    s, b = ctx.scheduler, ctx.scheduler.barrier
    zkey_sha = (s.r.hget(keys.job(job_id), "zkey") or b"").decode()
    claim = b.claim(job_id, index, token, ctx.worker_id, os.getpid(), fingerprint_id=ctx.fingerprint["id"],
                    run_s=ctx.run_s(zkey_sha) if zkey_sha else None)
    if claim.kind == "excluded":
        return pass_on(ctx, job_id, index, token, states="queued sending running", event="bounced",
                       why=f"worker {ctx.worker_id} is excluded from this partition")
    if claim.kind == "quarantined":
        out = pass_on(ctx, job_id, index, token, states="queued sending running", event="bounced",
                      why=f"worker {ctx.worker_id} is quarantined (fingerprint {claim.detail[0]})")
        wait_while_quarantined(ctx)
        return f"QUARANTINED {claim.detail[0]}: {out}"
    if claim.kind != "ok":
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind,
                 " ".join(claim.detail))
        return claim.kind
    attempt, started_at = int(claim.detail[0]), float(claim.detail[1])   # Redis's clock, as enqueued_at
    witness_sha, enqueued_at = (v.decode() for v in s.r.hmget(keys.slot(job_id, index), "witness", "enqueued_at"))
    try:
        with LeaseKeeper(lambda: b.refresh(job_id, index, token, ctx.worker_id), ctx.settings.lease_refresh_s,
                         stop_grace_s=ctx.settings.stop_grace_s) as lease:
            witness_path = ctx.store.local_path(witness_sha)
            proved = ctx.prover.prove(zkey_sha, lambda: ctx.store.local_path(zkey_sha), witness_path,
                                      attempt=attempt, stop=lease.stop)
        if proved is None:
            return f"stopped ({lease.reason})"
    except (InputError, ArtifactCorrupt) as exc:
        # The same input fails the same way everywhere: fail the job now, name the partition.
        log.warning("job %s partition %d: bad input: %s", job_id, index, exc)
        metrics.failed("input_error")
        b.fail_input(job_id, index, token, ctx.worker_id, f"partition {index}: {exc}")
        return "input_error"
    except SelfCheckFailed as exc:
        log.error("job %s partition %d: %s (worker %s, build %s)", job_id, index, exc, ctx.worker_id,
                  ctx.fingerprint.get("build"))
        metrics.failed("self_check")
        out = b.suspect(job_id, index, token, ctx.worker_id, ctx.fingerprint, str(exc))
        if out.kind != "retry":
            return f"invalid proof: {out.kind}"
        return pass_on(ctx, job_id, index, token, states="running", event="retry",
                       why=f"the proof from worker {ctx.worker_id} (build {ctx.fingerprint.get('build')}) "
                           "failed verification")
    except Exception as exc:
        log.exception("job %s partition %d attempt %d failed", job_id, index, attempt)
        metrics.failed(type(exc).__name__)
        # This device cannot run the backend at all: let another worker have it.
        exclude = ctx.worker_id if isinstance(exc, BackendUnavailable) else ""
        s.requeue(job_id, index, token=token, states="running", event="retry",
                  reason=f"{type(exc).__name__}: {exc} (worker {ctx.worker_id})", exclude=exclude,
                  route_to=s.pick_route({exclude}) if exclude else "")
        return "retry"
    timings = dict(proved.timings_s, queued_s=started_at - float(enqueued_at))
    payload = {"proof": proved.proof, "public": proved.public, "fingerprint": ctx.fingerprint,
               "timings_s": timings, "worker": ctx.worker_id, "attempt": attempt}
    out = b.record(job_id, index, token, ctx.worker_id, payload, fingerprint_id=ctx.fingerprint["id"],
                   runtime_field=f"{zkey_sha}|{ctx.device_class}", prove_s=proved.timings_s["prove_s"],
                   key_load_s=proved.timings_s["key_load_s"])
    if out.kind == "finalize":
        s.send(job_id, FINALIZE_SLOT, int(out.detail[0]))
    return out.kind


@app.task(name=TASK_PROVE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prove_partition(job_id: str, index: int, token: int = 1) -> str:
    """Proves partition `index` of `job_id` if `token` is still its current one."""
    return run_partition(job_id, int(index), int(token))

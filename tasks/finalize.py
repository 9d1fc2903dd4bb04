"""finalize(job, token): verify every partition proof (batched) before the job is done.

An invalid proof is never returned: its partition is re-enqueued on another worker (that
worker's own queue) and the producing worker's fingerprint is recorded on the job.
"""

from __future__ import annotations

import json
import logging
import os
import time

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_FINALIZE
from zkqueue.coordinator.keys import FINALIZE_SLOT
from zkqueue.coordinator.proofs import proof_from_json
from zkqueue.groth16.errors import Groth16Error, InputError
from zkqueue.workers.lease import LeaseKeeper

from . import context
from .app import app
from .handoff import pass_on, wait_while_quarantined

log = logging.getLogger("zkqueue.finalize")


def _check_all(ctx: context.Context, job_id: str, n: int, zkey_sha: str) -> tuple[list[dict], float]:
    """(the invalid partitions, seconds spent verifying)."""
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats.wtns import read_wtns

    r = ctx.scheduler.r
    results = {k.decode(): json.loads(v) for k, v in r.hgetall(keys.results(job_id)).items()}
    witness_shas = [r.hget(keys.slot(job_id, i), "witness").decode() for i in range(n)]
    key, _ = ctx.prover.key(zkey_sha, lambda: ctx.store.local_path(zkey_sha))
    t0 = time.perf_counter()
    bad, checked, proofs, publics = [], [], [], []
    for i in range(n):
        res = results.get(str(i))
        if res is None:      # cannot happen once the barrier elected us; be safe, not sorry
            bad.append({"index": i, "worker": "", "fingerprint": {}, "reason": "no result recorded"})
            continue
        # The public signals must be the witness's own, not whatever the worker reported.
        expected = [str(s) for s in read_wtns(ctx.store.local_path(witness_shas[i])).public_signals(key.n_public)]
        try:
            proof = proof_from_json(res["proof"])
            if proof.curve is not key.curve:
                raise ValueError(f"a proof on {proof.curve.name}, the key is on {key.curve.name}")
            if res["public"] != expected:
                raise ValueError("public signals differ from the witness's")
        except (ValueError, KeyError, TypeError, Groth16Error) as exc:
            # One worker's bad result is that worker's fault: re-prove it, never fail the job.
            bad.append({"index": i, "worker": res["worker"], "fingerprint": res["fingerprint"],
                        "reason": f"malformed result: {exc}"})
            continue
        checked.append((i, res))
        proofs.append(proof)
        publics.append([int(s) for s in expected])
    if proofs:
        for (i, res), ok in zip(checked, verifier.verify_batch(key.verification_key, proofs, publics)):
            if not ok:
                bad.append({"index": i, "worker": res["worker"], "fingerprint": res["fingerprint"],
                            "reason": "proof does not verify"})
    return sorted(bad, key=lambda b: b["index"]), time.perf_counter() - t0


def run_finalize(job_id: str, token: int) -> str:
    """The body of finalize; returns what happened."""
    ctx = context.get()
    s, b = ctx.scheduler, ctx.scheduler.barrier
    claim = b.claim(job_id, FINALIZE_SLOT, token, ctx.worker_id, os.getpid(), fingerprint_id=ctx.fingerprint["id"])
    if claim.kind in ("excluded", "quarantined"):
        out = pass_on(ctx, job_id, FINALIZE_SLOT, token, states="queued sending running", event="bounced",
                      why=f"worker {ctx.worker_id} is {claim.kind}")
        if claim.kind == "quarantined":
            wait_while_quarantined(ctx)
        return out
    if claim.kind != "ok":
        log.info("job %s finalize token %d: skipped (%s)", job_id, token, claim.kind)
        return claim.kind
    n = int(s.r.hget(keys.job(job_id), "n"))
    zkey_sha = s.r.hget(keys.job(job_id), "zkey").decode()
    try:
        with LeaseKeeper(lambda: b.refresh(job_id, FINALIZE_SLOT, token, ctx.worker_id),
                         ctx.settings.lease_refresh_s, stop_grace_s=ctx.settings.stop_grace_s):
            bad, verify_s = _check_all(ctx, job_id, n, zkey_sha)
    except InputError as exc:
        b.fail_input(job_id, FINALIZE_SLOT, token, ctx.worker_id, f"finalize: {exc}")
        return "input_error"
    except Exception as exc:
        log.exception("job %s: finalize failed", job_id)
        s.requeue(job_id, FINALIZE_SLOT, token=token, states="running", event="retry",
                  reason=f"{type(exc).__name__}: {exc} (worker {ctx.worker_id})")
        return "retry"
    if not bad:
        return "done" if b.finish(job_id, token, n, verify_s) else "stale"
    for item in bad:
        excluded = (s.r.hget(keys.slot(job_id, item["index"]), "excluded") or b"").decode().split()
        item["route_to"] = s.pick_route(set(excluded) | {item["worker"]})
        log.warning("job %s partition %d: %s (worker %s); re-proving on %s", job_id, item["index"],
                    item["reason"], item["worker"], item["route_to"] or "the shared queue")
    out = b.reprove(job_id, token, bad)
    if out.kind == "send":
        pairs = list(zip(out.detail[0::2], out.detail[1::2]))
        routes = {str(item["index"]): item["route_to"] for item in bad}
        for idx, tok in pairs:
            s.send(job_id, int(idx), int(tok), route_to=routes[idx])
    return f"reprove {out.kind}"


@app.task(name=TASK_FINALIZE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def finalize(job_id: str, token: int = 1) -> str:
    """Verifies every partition of `job_id` and completes it, or re-proves the invalid ones."""
    return run_finalize(job_id, int(token))

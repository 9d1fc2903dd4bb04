"""synthesize(job, index, token): compute one partition's witness from its input JSON and the
job's circuit .wasm, store it (content addressed) and enqueue the partition at once.

What an attempt can end in, and what the queue does:
  * a witness                        -> stored; the partition goes to `sending` and its
                                        prove message is sent now, so proving starts while
                                        later witnesses are still being computed
  * the input does not fit the circuit (InputError: an unknown signal, a wrong count, a
    value outside the field, a failed assert, a corrupt file)
                                     -> the job fails now, naming the input file; no retry
  * anything else                    -> tasks/outcomes.py: logged with its traceback, another
                                        attempt up to the attempt cap (the reaper does the
                                        same for a worker that died mid-attempt)
The witness is a slot of its own ("s{index}", coordinator/keys.py) with the same
transitions as a partition; only its hand-off to the partition (witness_ready) is its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_SYNTH
from zkqueue.coordinator.replies import Claimed
from zkqueue.workers import metrics
from zkqueue.workers.lease import LeaseKeeper

from . import context
from .app import app
from .handoff import retry_after

log = logging.getLogger("zkqueue.task")

# One compiled circuit per wasm sha256 in this process: compiling (or mapping the compiled
# module from the disk cache) is paid once, not per witness.
_calculators: dict[str, object] = {}
_calc_lock = threading.Lock()
_MAX_CALCULATORS = 8


def calculator(ctx: context.Context, wasm_sha: str, wasm_name: str):
    """This process's WitnessCalculator for the circuit `wasm_sha` (from the artifact store).

    Raises:
        FormatError, UnsupportedError: not a circom 2 witness calculator.
        ArtifactMissing, ArtifactCorrupt: the store does not hold it intact.
    """
    with _calc_lock:
        calc = _calculators.get(wasm_sha)
    if calc is not None:
        return calc
    from zkqueue.groth16.witness import WitnessCalculator
    calc = WitnessCalculator(ctx.store.local_path(wasm_sha).read_bytes(), name=wasm_name)
    with _calc_lock:
        if len(_calculators) >= _MAX_CALCULATORS:
            _calculators.pop(next(iter(_calculators)))
        _calculators[wasm_sha] = calc
    return calc


def run_synthesis(job_id: str, index: int, token: int) -> str:
    """The body of synthesize; returns what happened (for logs, tests and Flower)."""
    from zkqueue.groth16.witness import parse_inputs

    ctx = context.get()
    s, slot = ctx.scheduler, keys.synth_slot(index)
    claim = s.claim(job_id, slot, token, ctx.worker_id, os.getpid(), run_s=ctx.settings.partition_timeout_s)
    if not isinstance(claim, Claimed):
        log.info("job %s synthesis %d token %d: skipped (%s %s)", job_id, index, token, claim.kind, claim.why)
        return claim.kind
    attempt = claim.attempt
    job, witness = s.job_files(job_id), s.slot_record(job_id, slot)
    wasm_sha, wasm_name, input_sha, input_name = job.wasm, job.wasm_name, witness.input, witness.input_name
    try:
        with LeaseKeeper(lambda: s.refresh(job_id, slot, token, ctx.worker_id), ctx.settings.lease_refresh_s,
                         stop_grace_s=ctx.settings.stop_grace_s) as lease:
            calc = calculator(ctx, wasm_sha, wasm_name)
            inputs = parse_inputs(ctx.store.local_path(input_sha).read_bytes(), source=input_name)
            t0 = time.perf_counter()
            wtns = calc.calculate(inputs, source=input_name)
            synth_s = time.perf_counter() - t0
            witness_sha = ctx.store.put_bytes(wtns)
        if lease.stop.is_set():
            return f"stopped ({lease.reason})"
    except Exception as exc:
        return retry_after(ctx, job_id, slot, token, exc, attempt=attempt)
    metrics.synthesized(calc.curve.name if calc.curve else "other", calc.n_witness, synth_s)
    out = s.witness_ready(job_id, index, token, ctx.worker_id, witness_sha, synth_s)
    return "synthesized" if out.kind == "send" else out.kind


@app.task(name=TASK_SYNTH, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def synthesize(job_id: str, index: int, token: int = 1) -> str:
    """Computes partition `index`'s witness of `job_id` if `token` is still its synthesis token."""
    return run_synthesis(job_id, int(index), int(token))

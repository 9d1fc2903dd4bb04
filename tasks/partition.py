"""prove_partition(job, index, token): claim, prove under a lease, record once.

What an attempt can end in, and what the queue does:
  * a verified proof                -> recorded (HSETNX); the last one elects finalize
  * bad input                       -> the job fails now, naming the partition
  * the proof fails its own check   -> with the job's .r1cs: the witness is checked against
                                       the constraints; one broken fails the partition as bad
                                       input, naming it. Otherwise a suspected bad build or
                                       device: this worker is excluded from the slot, another
                                       re-proves it; the witness is judged unsatisfying on good
                                       evidence only (coordinator/lua/suspect.lua)
  * anything else                   -> tasks/outcomes.py: retried here or elsewhere
"""

from __future__ import annotations

import logging
import os

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_PROVE, TASK_PROVE_BATCH
from zkqueue.coordinator.replies import Claimed, Recorded, SlotRecord
from zkqueue.workers import metrics
from zkqueue.workers.lease import LeaseKeeper
from zkqueue.workers.proving import SelfCheckFailed

from . import checks, context
from .affinity import hand_to_holder, holding_published
from .app import app
from .batch import run_batch
from .handoff import leave_died_of_memory, leave_too_big, pass_on, retry_after, turn_away

log = logging.getLogger("zkqueue.task")


def run_partition(job_id: str, index: int, token: int) -> str:
    """The body of prove_partition; returns what happened (for logs, tests and Flower)."""
    ctx = context.get()
    s = ctx.scheduler
    zkey_sha = s.job_files(job_id).zkey
    handed = hand_to_holder(ctx, job_id, index, token, zkey_sha) if zkey_sha else None
    if handed:
        return handed
    refused = _admit(ctx, job_id, index, token, zkey_sha) if zkey_sha else None
    if refused:
        return refused
    with holding_published(ctx, zkey_sha):
        return _prove(ctx, job_id, index, token, zkey_sha)


def _prove(ctx: context.Context, job_id: str, index: int, token: int, zkey_sha: str) -> str:
    """Claims the partition (alone or in a batch of its key's), proves and records it."""
    s = ctx.scheduler
    limit = _batch_limit(ctx, zkey_sha) if zkey_sha else 1
    if limit > 1:
        return run_batch(ctx, job_id, index, token, zkey_sha, limit, after_failed_self_check=after_failed_self_check)
    claim = s.claim(job_id, index, token, ctx.worker_id, os.getpid(), fingerprint_id=ctx.fingerprint["id"],
                    run_s=ctx.run_s(zkey_sha) if zkey_sha else None)
    if claim.kind in ("excluded", "quarantined"):
        return turn_away(ctx, job_id, index, token, claim)
    if not isinstance(claim, Claimed):
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind, claim.why)
        return claim.kind
    attempt, started_at = claim.attempt, claim.started_at     # Redis's clock, as enqueued_at
    slot = claim.slot       # read by the claim itself
    witness_sha = slot.witness
    try:
        with LeaseKeeper(lambda: s.refresh(job_id, index, token, ctx.worker_id), ctx.settings.lease_refresh_s,
                         stop_grace_s=ctx.settings.stop_grace_s) as lease:
            witness_path = ctx.store.local_path(witness_sha)
            proved = ctx.prover.prove(zkey_sha, lambda: ctx.store.local_path(zkey_sha), witness_path,
                                      attempt=attempt, stop=lease.stop)
        if proved is None:
            return f"stopped ({lease.reason})"
    except SelfCheckFailed as exc:
        return after_failed_self_check(ctx, job_id, index, token, slot, exc)
    except Exception as exc:
        return retry_after(ctx, job_id, index, token, exc, attempt=attempt)
    timings = dict(proved.timings_s, queued_s=started_at - slot.enqueued_at)
    payload = {"proof": proved.proof, "public": proved.public, "fingerprint": ctx.fingerprint,
               "timings_s": timings, "worker": ctx.worker_id, "attempt": attempt}
    marks = checks.take_marks(ctx, job_id)
    recorded = s.record(job_id, index, token, ctx.worker_id, payload, fingerprint=ctx.fingerprint,
                        runtime_field=ctx.runtime_field(zkey_sha, proved.timings_s["key_load_s"]),
                        prove_s=proved.timings_s["prove_s"],
                        key_load_s=proved.timings_s["key_load_s"], checked=marks, take=checks.to_take(marks),
                        claim=claim)
    if isinstance(recorded, Recorded):
        checks.check_others(ctx, job_id, zkey_sha, recorded.to_check)
    return recorded.kind


def run_partitions(job_id: str, index: int, count: int, token: int) -> str:
    """The body of prove_batch: partitions index .. index + count - 1, sent in one message
    under `token`, claimed in one transition and proved as a batch, whatever this worker's own
    batch size (the client sends batches only for keys small enough to batch)."""
    ctx = context.get()
    zkey_sha = ctx.scheduler.job_files(job_id).zkey
    if zkey_sha:
        refused = _admit(ctx, job_id, index, token, zkey_sha)
        if refused:
            # Too big for this worker: each partition goes on as the first did.
            for i in range(index + 1, index + count):
                _admit(ctx, job_id, i, token, zkey_sha)
            return refused
    return run_batch(ctx, job_id, index, token, zkey_sha, count, after_failed_self_check=after_failed_self_check,
                     count=count)


def _batch_limit(ctx: context.Context, zkey_sha: str) -> int:
    """How many partitions of this key to claim at once here (workers/batching.py): 1 on a
    CPU worker not told otherwise, without reading the key.

    Memory admission (_admit) has run before: the key fits this worker."""
    from zkqueue.workers.batching import batch_limit
    backend, requested = ctx.identity.backend, ctx.identity.batch
    if backend != "cuda" and (requested or 1) <= 1:
        return 1
    try:
        shape = ctx.prover.shape(zkey_sha, lambda: ctx.store.local_path(zkey_sha))
    except Exception as exc:  # noqa: BLE001 - the claim alone path reports it, under a lease
        log.info("key %s: no batch (%s)", zkey_sha, exc)
        return 1
    return batch_limit(shape, backend=backend, requested=requested, device_free_bytes=ctx.prover.device_free_bytes())


def _admit(ctx: context.Context, job_id: str, index: int, token: int, zkey_sha: str) -> str | None:
    """Memory admission, before any claim: None when this worker has room for a partition of
    this key (or its shape was never recorded) and never died of memory proving it, else what
    happened when it left the partition for a bigger worker (no attempt spent;
    tasks/handoff.leave_too_big, leave_died_of_memory)."""
    from zkqueue.workers.admission import judge
    from zkqueue.workers.key_needs import needs_by_backend
    shape = ctx.key_shape(zkey_sha)
    threads = ctx.identity.threads or os.cpu_count() or 1
    if ctx.key_too_big(zkey_sha):
        log.warning("job %s partition %d: this worker died of memory proving its key; leaving it for another",
                    job_id, index)
        return leave_died_of_memory(ctx, job_id, index, token,
                                    needs_by_backend(shape, threads=threads) if shape is not None else None)
    if shape is None:
        return None
    verdict = judge(shape, ctx.identity.backend, threads=threads, held_key_bytes=ctx.prover.cache.used_bytes,
                    holds_it=ctx.prover.has_key(zkey_sha), device_free_bytes=_device_free(ctx))
    if verdict.fits:
        return None
    log.warning("job %s partition %d: %s; leaving it for a bigger worker", job_id, index, verdict.words())
    return leave_too_big(ctx, job_id, index, token, verdict, needs_by_backend(shape, threads=threads))


def _device_free(ctx: context.Context) -> int | None:
    """A GPU worker's free device memory: from its CUDA backend once it exists, else from NVML
    (which leaves CUDA alone); None on a CPU worker or without a reading."""
    if ctx.identity.backend != "cuda":
        return None
    free = ctx.prover.device_free_bytes()
    if free is None:
        from zkqueue.workers.memory import device_memory
        reading = device_memory(ctx.identity.device.index)
        free = reading[1] if reading else None
    return free


def after_failed_self_check(ctx: context.Context, job_id: str, index: int, token: int, slot: SlotRecord,
                            exc: SelfCheckFailed) -> str:
    """An attempt's proof failed its own check: with the job's .r1cs, a broken constraint
    fails the partition as bad input; otherwise this worker is suspected (suspect.lua) and
    the partition passed on. Returns what happened."""
    s = ctx.scheduler
    log.error("job %s partition %d: %s (worker %s, build %s)", job_id, index, exc, ctx.worker_id,
              ctx.fingerprint.get("build"))
    metrics.failed("self_check")
    broken = _broken_constraint(ctx, job_id, index, slot)
    if broken:
        s.fail_input(job_id, index, token, ctx.worker_id, f"partition {index}: {broken}")
        return "input_error"
    out = s.suspect(job_id, index, token, ctx.worker_id, ctx.fingerprint, str(exc))
    if out.kind != "retry":
        return f"invalid proof: {out.kind}"
    return pass_on(ctx, job_id, index, token, states="running", event="retry",
                   why=f"the proof from worker {ctx.worker_id} (build {ctx.fingerprint.get('build')}) "
                       "failed verification")


def _broken_constraint(ctx: context.Context, job_id: str, index: int, slot: SlotRecord) -> str:
    """Checks the witness against the job's .r1cs, if it has one: the message naming the
    broken constraint and the file, or "" (no .r1cs, or every constraint holds: then the
    build, not the witness, made the invalid proof). Only called after a failed self-check."""
    from zkqueue.groth16.errors import InputError
    from zkqueue.groth16.formats.r1cs import check_witness

    s = ctx.scheduler
    r1cs_sha = s.job_files(job_id).r1cs
    if not r1cs_sha:
        return ""
    name = slot.witness_name
    if not name:     # computed by a worker from an input file
        name = f"the witness of {s.slot_record(job_id, keys.synth_slot(index)).input_name}"
    try:
        check_witness(ctx.store.local_path(r1cs_sha), ctx.store.local_path(slot.witness), witness_name=name)
    except InputError as exc:
        return str(exc)
    return ""


@app.task(name=TASK_PROVE, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prove_partition(job_id: str, index: int, token: int = 1) -> str:
    """Proves partition `index` of `job_id` if `token` is still its current one."""
    return run_partition(job_id, int(index), int(token))


@app.task(name=TASK_PROVE_BATCH, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def prove_batch(job_id: str, index: int, count: int, token: int = 1) -> str:
    """Proves partitions index .. index + count - 1 of `job_id` that still wait under `token`."""
    return run_partitions(job_id, int(index), int(count), int(token))

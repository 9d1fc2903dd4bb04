"""What a task does with a slot it cannot finish itself: hand it to another worker (this one
is excluded from it, quarantined, or made an invalid proof of it), or retry it after an
error (tasks/outcomes.py says which kind)."""

from __future__ import annotations

import logging
import time

from zkqueue.coordinator import keys
from zkqueue.coordinator.replies import Reply
from zkqueue.coordinator.scheduler import what
from zkqueue.workers import metrics

from . import context, outcomes

log = logging.getLogger("zkqueue.task")

QUARANTINE_POLL_S = 2.0


def no_healthy_worker_reason(ctx: context.Context, job_id: str, slot) -> str:
    """Why a slot has nowhere to go: the builds whose proofs failed and those quarantined, and
    how to tell a bad witness from a bad build. It never blames the witness: no second build
    has checked it."""
    record = ctx.scheduler.slot_record(job_id, slot)
    quarantined = []
    for rec in ctx.scheduler.quarantined().values():
        fp = rec.get("fingerprint") or {}
        quarantined.append(f"build {fp.get('build', '?')} ({fp.get('backend')} on {fp.get('host')})")
    parts = ["no healthy worker is left to prove it"]
    if record.invalid_builds:
        parts.append(f"its proofs from build {', '.join(record.invalid_builds)} (workers "
                     f"{', '.join(record.excluded)}) failed verification, and that build has proved no "
                     "other witness of this key valid")
    if quarantined:
        parts.append(f"quarantined: {'; '.join(quarantined)}")
    parts.append("the witness is not blamed: no second build has checked it. Either the witness or the build "
                 "is at fault: to tell, submit the job again with the circuit's .r1cs (--r1cs), or start a "
                 "worker of another build")
    return "; ".join(parts)


def pass_on(ctx: context.Context, job_id: str, slot, token: int, *, states: str, event: str, why: str,
            parked_reason: str = "", needs: dict | None = None) -> str:
    """Hands the slot to another eligible worker (this one is excluded, quarantined or too
    small: then `needs` says what memory the other must have). With none alive, the slot is
    parked: no message bounces between workers that may not take it, and none holds a worker;
    after orphan_timeout_s of that it fails with `parked_reason` (default: naming the builds)."""
    out = ctx.scheduler.hand_on(job_id, slot, token, leaving=ctx.worker_id, states=states, event=event,
                                reason=why, parked_reason=parked_reason or no_healthy_worker_reason(ctx, job_id, slot),
                                needs=needs)
    return f"passed on ({out.kind}): {why}"


def leave_too_big(ctx: context.Context, job_id: str, slot, token: int, verdict, needs: dict) -> str:
    """This worker has no room for the slot's key (workers/admission.py): hands it, without
    spending an attempt, to a worker whose memory holds it, or parks it saying how much it
    needs and how much the largest worker has."""
    backend = ctx.identity.backend
    memory = [b.get("memory") or {} for b in ctx.scheduler.registry.live()
              if (b.get("fingerprint") or {}).get("backend", "cpu") == backend]
    if verdict.device_short:
        largest = max((m.get("device_total_bytes", 0) for m in memory), default=0) >> 20
        need = needs.get("device", verdict.device_needs_bytes) >> 20
        parked = (f"{what(slot)} needs about {need} MiB of GPU memory, the largest GPU has {largest} MiB: "
                  "no live worker can hold its key")
    else:
        largest = max((m.get("capacity_bytes", 0) for m in memory), default=0) >> 20
        need = needs.get(backend, verdict.needs_bytes) >> 20
        parked = (f"{what(slot)} needs about {need} MiB of memory on a {backend} worker, "
                  f"the largest worker has {largest} MiB: no live worker can hold its key")
    return pass_on(ctx, job_id, slot, token, states="queued sending running", event="bounced",
                   why=f"worker {ctx.worker_id} has no room for {what(slot)}: it {verdict.words()}",
                   parked_reason=parked, needs=needs)


def leave_died_of_memory(ctx: context.Context, job_id: str, slot, token: int, needs: dict | None) -> str:
    """This worker died of memory proving the slot's key (the kernel's OOM killer took its pool
    child: Scheduler.died_of_memory): hands the slot, without spending an attempt, to another
    worker (with `needs`, one whose memory holds the key by the model), or parks it.

    A slot still `running` is left alone: with one pool child per worker, its attempt was the
    one the OOM killer ended (Celery gives the message of a lost child back, and it comes here),
    and the worker's report of that death requeues it with the attempt refunded
    (Scheduler.died_of_memory, within a heartbeat); moved on here first, the attempt would stay
    counted."""
    return pass_on(ctx, job_id, slot, token, states="queued sending", event="bounced",
                   why=f"worker {ctx.worker_id} died of memory proving the key of {what(slot)}",
                   parked_reason=f"{what(slot)}: worker {ctx.worker_id} died of memory proving its key, and no "
                                 "other live worker can take it", needs=needs)


def turn_away(ctx: context.Context, job_id: str, slot, token: int, claim: Reply) -> str:
    """A claim refused because this worker is excluded from the slot or quarantined: passes
    the slot on; a quarantined worker then holds its pool slot until an operator clears it."""
    if claim.kind == "excluded":
        return pass_on(ctx, job_id, slot, token, states="queued sending running", event="bounced",
                       why=f"worker {ctx.worker_id} is excluded from {what(slot)}")
    out = pass_on(ctx, job_id, slot, token, states="queued sending running", event="bounced",
                  why=f"worker {ctx.worker_id} is quarantined (fingerprint {claim.why})")
    wait_while_quarantined(ctx)
    return f"QUARANTINED {claim.why}: {out}"


def retry_after(ctx: context.Context, job_id: str, slot, token: int, exc: Exception, *, attempt: int) -> str:
    """An attempt raised `exc`: fails the job as bad input, or sends the slot again (here or,
    when this worker cannot run it, elsewhere), as tasks/outcomes.py classifies it."""
    s, kind = ctx.scheduler, outcomes.classify(exc)
    if kind == outcomes.INPUT:
        # The same input fails the same way everywhere: fail the job now, name the partition.
        log.warning("job %s %s: bad input: %s", job_id, what(slot), exc)
        metrics.failed("input_error")
        s.fail_input(job_id, slot, token, ctx.worker_id, f"{_label(slot)}: {exc}")
        return "input_error"
    log.exception("job %s %s attempt %d failed", job_id, what(slot), attempt)
    metrics.failed(type(exc).__name__)
    exclude = ctx.worker_id if kind == outcomes.ELSEWHERE else ""
    route = s.pick_route({exclude}) if exclude and keys.slot_kind(str(slot)) != "synth" else ""
    s.requeue(job_id, slot, token, event="retry", reason=f"{type(exc).__name__}: {exc} (worker {ctx.worker_id})",
              exclude=exclude, route_to=route)
    return "retry"


def _label(slot) -> str:
    """"partition 3" for a partition or its witness, "finalize" for finalize."""
    part = keys.partition_of(str(slot))
    return part if part == keys.FINALIZE_SLOT else f"partition {part}"


def wait_while_quarantined(ctx: context.Context) -> None:
    """Holds this worker's only pool slot while its build is quarantined, so it takes no more
    messages; returns when an operator clears it (or well before Celery's time limit)."""
    fp = ctx.fingerprint["id"]
    deadline = time.monotonic() + min(600.0, ctx.settings.task_time_limit_s / 2)
    log.error("worker %s: build %s (fingerprint %s) is quarantined; taking no work until "
              "`zkqueue quarantine clear %s`", ctx.worker_id, ctx.fingerprint.get("build"), fp, fp)
    while time.monotonic() < deadline and ctx.scheduler.is_quarantined(fp):
        time.sleep(QUARANTINE_POLL_S)

"""Witness synthesis slots: sending their messages and recovering them (the reaper's part).

A job submitted as circuit inputs (Client.submit(..., inputs=..., wasm=...)) starts with each
partition in `synth_sending`; a worker consuming the synthesis queue computes its witness
(tasks/synthesize.py), and synth_done turns it into an ordinary `sending` partition. The
transitions are barrier scripts (coordinator/lua/synth_*.lua); this module pairs them with the
messages they call for, as scheduler.py does for partitions.
"""

from __future__ import annotations

import logging

from . import keys
from .broker import unacked_slots, waiting_slots
from .scheduler import Scheduler

log = logging.getLogger("zkqueue.synthesis")

# A synthesis sent again after a lost or failed attempt goes ahead of fresh work (kombu serves 0 first).
RETRY_PRIORITY = 0


def send(s: Scheduler, job_id: str, index: int, token: int, *, priority: int | None = None) -> None:
    """Sends the synthesis message of (index, token) and marks it queued.

    Raises:
        kombu.exceptions.OperationalError, redis.RedisError: the broker is unreachable (the
            slot stays `synth_sending` and the reaper sends it later).
    """
    s.sender.send_synthesis(job_id, index, token, priority=s.priority_of(job_id) if priority is None else priority)
    s.barrier.synth_mark_sent(job_id, index, token)


def requeue(s: Scheduler, job_id: str, index: int, token: int, *, event: str, reason: str,
            require_expired: bool = False):
    """barrier.synth_requeue, then the new message (ahead of fresh work) when it says "send"."""
    out = s.barrier.synth_requeue(job_id, index, token, event=event, reason=reason, require_expired=require_expired)
    if out.kind == "send":
        send(s, job_id, index, int(out.detail[0]), priority=RETRY_PRIORITY)
    return out


def reap(s: Scheduler, job_id: str, index: int, checks: list[tuple[str, int, int]]) -> int:
    """The reaper's action on a due synthesis deadline; queued ones are added to `checks`
    (checked together by check_missing). Returns 1 when it acted."""
    out = s.barrier.synth_reap(job_id, index)
    if out.kind == "resend":
        log.warning("job %s synthesis %d: message not confirmed sent; sending it again", job_id, index)
        send(s, job_id, index, int(out.detail[0]))
        return 1
    if out.kind == "check":
        checks.append((job_id, index, int(out.detail[0])))
    elif out.kind == "lost":
        token, worker, overdue = int(out.detail[0]), out.detail[1], out.detail[2] == "1"
        reason = (f"worker {worker} ran past the deadline of synthesis {index} (hung?)" if overdue
                  else f"worker {worker} stopped renewing its lease on synthesis {index} (killed or hung)")
        res = requeue(s, job_id, index, token, event="lost", reason=reason, require_expired=True)
        if res.kind in ("send", "failed"):
            log.warning("job %s: %s -> %s", job_id, reason, res.kind)
            return 1
    return 0


def adopt(s: Scheduler, job_id: str, index: int, token: int, tag: str) -> bool:
    """Sends again a synthesis message whose consumer died after taking it and before claiming
    it (unacknowledged for orphan_grace_s: the reaper's caller checks that). True when it did."""
    state, current = s.r.hmget(keys.slot(job_id, index), "state", "synth_token")
    if state != b"synth_queued" or current is None or int(current) != token:
        return False         # claimed (its lease covers it now), or a stale copy
    if not s.barrier.synth_resend(job_id, index, token, tag):
        return False
    log.warning("job %s synthesis %d: its message was taken by a worker that died before starting it; "
                "sending it again", job_id, index)
    send(s, job_id, index, token)
    return True


def check_missing(s: Scheduler, checks: list[tuple[str, int, int]]) -> int:
    """Sends again (same token) the queued synthesis messages that are on no queue and
    delivered to no consumer. Returns how many."""
    present = waiting_slots(s.r) | {slot for _, slot in unacked_slots(s.r)}
    unserved = unserved_reason(s.registry.live())
    acted = 0
    for job_id, index, token in checks:
        if (job_id, f"{keys.SYNTH_PREFIX}{index}", token) in present:
            if s.barrier.synth_unserved(job_id, index, token, unserved=bool(unserved), reason=unserved) == "failed":
                log.error("job %s failed: synthesis %d: %s", job_id, index, unserved)
                acted += 1
            continue
        if s.barrier.synth_resend(job_id, index, token):
            log.warning("job %s synthesis %d: its message is gone from the broker; sending it again", job_id, index)
            send(s, job_id, index, token)
            acted += 1
    return acted


def unserved_reason(live: list[dict]) -> str:
    """Why no live worker will take a synthesis message, or "" when one will (or when no worker
    is alive at all: then the job waits for workers, as any job does)."""
    if not live or any(w.get("synthesizes") for w in live):
        return ""
    names = ", ".join(sorted(w["worker"] for w in live))
    return (f"no live worker takes witness synthesis (queue {keys.SYNTH_QUEUE}): the workers alive "
            f"({names}) only prove. Start a CPU worker (`zkqueue worker --cpu 1`), or GPU workers with "
            "--synthesize, or submit witnesses instead of inputs")

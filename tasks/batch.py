"""A batch of partitions of one key: claimed in one transition, proved together, and each
member then recorded, failed or retried alone (tasks/partition.py sends small keys here).

    claim      Scheduler.claim_batch (coordinator/lua/claim_batch.lua): the message's own
               partition (the lead) and up to B - 1 queued partitions of the same job after
               it, each under its own token, attempt and lease
    leases     one keeper thread refreshes every member's own lease (refresh.lua, by its own
               token); a member someone else holds now ("lost") is dropped from the batch;
               the job over (cancelled, failed) or the batch's run deadline passed stops the
               whole batch at the next kernel boundary
    prove      PartitionProver.prove_batch: witnesses read ahead on a reader thread, the
               batch through the device in one pass (CUDA, keys up to 2^16) or in turn
               (a CPU; a larger key's pipeline of two on a GPU)
    record     each member's proof as soon as it is checked (record.lua: token-fenced,
               HSETNX): a kill between two records loses nothing (the unrecorded members'
               leases lapse and the reaper sends them again) and records nothing twice
A bad witness ends only its own member: bad input fails that partition, a proof that fails
its own check goes through suspect.lua as a partition proved alone would.
"""

from __future__ import annotations

import functools
import logging
import os

from zkqueue.coordinator.claims import Member
from zkqueue.coordinator.replies import Reply, SlotRecord
from zkqueue.workers.batching import proves_together
from zkqueue.workers.lease import BatchLeases, LeaseKeeper
from zkqueue.workers.proving import BatchItem, Proved, SelfCheckFailed

from . import context
from .handoff import retry_after, turn_away

log = logging.getLogger("zkqueue.task")


def run_batch(ctx: context.Context, job_id: str, index: int, token: int, zkey_sha: str, limit: int, *,
              after_failed_self_check) -> str:
    """Claims partition `index` (under `token`) and up to `limit` - 1 more of its job, proves
    them together and settles each alone; returns what happened (for logs and tests).
    `after_failed_self_check`: tasks/partition.py's, for a member whose proof fails its check
    (passed in: partition.py imports this module)."""
    s = ctx.scheduler
    claim = s.claim_batch(job_id, index, token, ctx.worker_id, os.getpid(), max_batch=limit,
                          fingerprint_id=ctx.fingerprint["id"], run_s=ctx.run_s(zkey_sha, proofs=limit))
    if claim.kind in ("excluded", "quarantined"):
        return turn_away(ctx, job_id, index, token, Reply(claim.kind, " ".join(claim.detail)))
    if not claim.ok:
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind,
                 " ".join(claim.detail))
        return claim.kind
    members = claim.members
    slots = s.slot_records(job_id, [m.index for m in members])
    log.info("job %s: batch of %d partitions %s", job_id, len(members), [m.index for m in members])
    leases = BatchLeases(lambda index, token: s.refresh(job_id, index, token, ctx.worker_id),
                         [(m.index, m.token) for m in members], what=f"job {job_id}",
                         refresh_all=lambda held: s.refresh_batch(job_id, held, ctx.worker_id))
    items = [BatchItem(witness_path=functools.partial(ctx.store.local_path, slot.witness), attempt=m.attempt)
             for m, slot in zip(members, slots)]
    ended: dict[int, str] = {}
    try:
        with LeaseKeeper(leases.refresh, ctx.settings.lease_refresh_s,
                         stop_grace_s=ctx.settings.stop_grace_s) as keeper:
            together = proves_together(ctx.prover.shape(zkey_sha, lambda: ctx.store.local_path(zkey_sha)))
            for i, outcome in ctx.prover.prove_batch(zkey_sha, lambda: ctx.store.local_path(zkey_sha), items,
                                                     stop=keeper.stop, together=together):
                m = members[i]
                if m.index in leases.lost:
                    ended[i] = "lost"
                    continue
                ended[i] = _settle(ctx, job_id, m, outcome, slots[i], claim.started_at, zkey_sha,
                                   after_failed_self_check)
                leases.ended(m.index)
                if ctx.faults.slow_record_s and len(ended) < len(members):
                    keeper.stop.wait(ctx.faults.slow_record_s)      # test fault: a kill lands between records
                if keeper.stop.is_set():
                    break
            reason = keeper.reason
    except Exception as exc:  # noqa: BLE001 - the whole batch's (the key, the device): each member retried alone
        for i, m in enumerate(members):
            if i not in ended:
                ended[i] = retry_after(ctx, job_id, m.index, m.token, exc, attempt=m.attempt)
        reason = ""
    unended = [m.index for i, m in enumerate(members) if i not in ended]
    if unended:
        # Stopped: the job is over, the batch overdue (the reaper takes its members), or
        # every member lost. Nothing of these members was recorded.
        log.warning("job %s: batch stopped (%s) before partitions %s", job_id, reason or "stopped", unended)
    outcomes = [ended.get(i, f"stopped ({reason})") for i in range(len(members))]
    return f"batch {[m.index for m in members]}: {outcomes}"


def _settle(ctx: context.Context, job_id: str, m: Member, outcome, slot: SlotRecord, started_at: float,
            zkey_sha: str, after_failed_self_check) -> str:
    """Records one member's proof, or ends it as a partition proved alone would end."""
    s = ctx.scheduler
    if isinstance(outcome, SelfCheckFailed):
        return after_failed_self_check(ctx, job_id, m.index, m.token, slot, outcome)
    if isinstance(outcome, BaseException):
        return retry_after(ctx, job_id, m.index, m.token, outcome, attempt=m.attempt)
    assert isinstance(outcome, Proved)
    timings = dict(outcome.timings_s, queued_s=started_at - slot.enqueued_at)
    payload = {"proof": outcome.proof, "public": outcome.public, "fingerprint": ctx.fingerprint,
               "timings_s": timings, "worker": ctx.worker_id, "attempt": m.attempt}
    return s.record(job_id, m.index, m.token, ctx.worker_id, payload, fingerprint=ctx.fingerprint,
                    runtime_field=f"{zkey_sha}|{ctx.device_class}", prove_s=outcome.timings_s["prove_s"],
                    key_load_s=outcome.timings_s["key_load_s"]).kind

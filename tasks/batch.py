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
    record     the members' checked proofs in one transition per group (record_batch.lua:
               each token-fenced, stored once): every proof ready at once (a device pass)
               goes in one call, proofs that come one by one at most half a lease late
               (each call costs Redis about a dozen commands however few it records); a
               kill between two records loses nothing (the unrecorded members' leases
               lapse and the reaper sends them again) and records nothing twice
A prove_batch message (one per B partitions of a submit, coordinator/broker.py) is claimed in
range mode: every one of its partitions still waiting under its token.
A bad witness ends only its own member: bad input fails that partition, a proof that fails
its own check goes through suspect.lua as a partition proved alone would.
"""

from __future__ import annotations

import functools
import logging
import os

from zkqueue.coordinator.claims import Member
from zkqueue.coordinator.replies import Recorded, Reply, SlotRecord
from zkqueue.workers.batching import proves_together
from zkqueue.workers.lease import BatchLeases, LeaseKeeper
from zkqueue.workers.proving import BatchItem, Proved, SelfCheckFailed
from zkqueue.workers.record_group import PendingProofs

from . import checks, context
from .handoff import pass_on, retry_after, turn_away, wait_while_quarantined

log = logging.getLogger("zkqueue.task")


def run_batch(ctx: context.Context, job_id: str, index: int, token: int, zkey_sha: str, limit: int, *,
              after_failed_self_check, count: int = 0) -> str:
    """Claims partition `index` (under `token`) and up to `limit` - 1 more of its job, proves
    them together and settles each alone; returns what happened (for logs and tests).
    `count` > 0 (a prove_batch message): partitions index .. index + count - 1 instead, those
    still waiting under `token`. `after_failed_self_check`: tasks/partition.py's, for a member
    whose proof fails its check (passed in: partition.py imports this module)."""
    s = ctx.scheduler
    claim = s.claim_batch(job_id, index, token, ctx.worker_id, os.getpid(), max_batch=limit,
                          fingerprint_id=ctx.fingerprint["id"], run_s=ctx.run_s(zkey_sha, proofs=limit), count=count)
    if claim.kind == "quarantined" and count:
        # The message stood for every member: each goes to another worker.
        for i in range(index, index + count):
            pass_on(ctx, job_id, i, token, states="queued sending running", event="bounced",
                    why=f"worker {ctx.worker_id} is quarantined (fingerprint {' '.join(claim.detail)})")
        wait_while_quarantined(ctx)
        return f"QUARANTINED {' '.join(claim.detail)}: batch passed on"
    if claim.kind in ("excluded", "quarantined"):
        return turn_away(ctx, job_id, index, token, Reply(claim.kind, " ".join(claim.detail)))
    if not claim.ok:
        log.info("job %s partition %d token %d: skipped (%s %s)", job_id, index, token, claim.kind,
                 " ".join(claim.detail))
        return claim.kind
    members = claim.members
    slots = s.claimed_slots(claim)      # read by the claim itself
    log.info("job %s: batch of %d partitions %s", job_id, len(members), [m.index for m in members])
    # The first lease refresh starts from the claim's own view of the job: it reads no member.
    fence = {"seen": claim.fence[0], "run_until": claim.fence[1]}
    leases = BatchLeases(lambda index, token: s.refresh(job_id, index, token, ctx.worker_id),
                         [(m.index, m.token) for m in members], what=f"job {job_id}",
                         refresh_all=functools.partial(s.refresh_batch, job_id, worker=ctx.worker_id, fence=fence))
    items = [BatchItem(witness_path=functools.partial(ctx.store.local_path, slot.witness), attempt=m.attempt)
             for m, slot in zip(members, slots)]
    ended: dict[int, str] = {}

    def record(items: list[tuple[int, Proved]]) -> dict[int, str]:
        rows = []
        for i, proved in items:
            m = members[i]
            timings = dict(proved.timings_s, queued_s=claim.started_at - slots[i].enqueued_at)
            rows.append((m.index, m.token, {"proof": proved.proof, "public": proved.public,
                                            "fingerprint": ctx.fingerprint, "timings_s": timings,
                                            "worker": ctx.worker_id, "attempt": m.attempt}))
        key_load_s = sum(p.timings_s["key_load_s"] for _, p in items)
        marks = checks.take_marks(ctx, job_id)
        replies = s.record_batch(job_id, rows, ctx.worker_id, fingerprint=ctx.fingerprint,
                                 runtime_field=ctx.runtime_field(zkey_sha, key_load_s),
                                 prove_s=sum(p.timings_s["prove_s"] for _, p in items) / len(items),
                                 key_load_s=key_load_s,
                                 checked=marks, take=checks.to_take(marks, len(items)), claim=claim)
        # Other workers' proofs to verify, handed back with these records (the same for each).
        recorded = [r for r in replies.values() if isinstance(r, Recorded)]
        if recorded:
            checks.check_others(ctx, job_id, zkey_sha, recorded[0].to_check)
        return {i: replies[members[i].index].kind for i, _ in items}

    def recorded(i: int, verdict: str) -> None:
        ended[i] = verdict
        leases.ended(members[i].index)

    pending: PendingProofs[Proved] = PendingProofs(record, recorded)
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
                if isinstance(outcome, Proved):
                    pending.add(i, outcome)
                    # Recorded in groups: all that are ready now (a device pass), fast proofs
                    # that come one by one at most half a lease late (their leases are
                    # refreshed meanwhile; a kill loses that much work), a slow proof at once;
                    # the test fault records one by one, so that a kill lands between records.
                    if (ctx.faults.slow_record_s or len(ended) + len(pending) == len(members)
                            or outcome.timings_s["prove_s"] >= ctx.settings.lease_refresh_s
                            or pending.age_s() >= ctx.settings.lease_ttl_s / 2):
                        pending.flush()
                else:
                    ended[i] = _settle(ctx, job_id, m, outcome, slots[i], after_failed_self_check)
                    leases.ended(m.index)
                if ctx.faults.slow_record_s and len(ended) < len(members):
                    keeper.stop.wait(ctx.faults.slow_record_s)      # test fault: a kill lands between records
                if keeper.stop.is_set():
                    break
            pending.flush()
            reason = keeper.reason
    except Exception as exc:  # noqa: BLE001 - the whole batch's (the key, the device): each member retried alone
        try:
            pending.flush()         # proofs made and checked before the failure are kept
        except Exception:  # noqa: BLE001 - not recorded: their leases lapse and the reaper sends them again
            log.exception("job %s: could not record the batch's proofs", job_id)
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


def _settle(ctx: context.Context, job_id: str, m: Member, outcome, slot: SlotRecord,
            after_failed_self_check) -> str:
    """Ends a member whose proof failed, as a partition proved alone would end (a proved one
    goes through _Pending)."""
    if isinstance(outcome, SelfCheckFailed):
        return after_failed_self_check(ctx, job_id, m.index, m.token, slot, outcome)
    return retry_after(ctx, job_id, m.index, m.token, outcome, attempt=m.attempt)

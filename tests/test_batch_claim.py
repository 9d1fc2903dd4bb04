"""The batch claim (coordinator/lua/claim_batch.lua) on a real Redis, without worker processes:
one transition takes up to B partitions of one job, each with its own token, attempt, lease
and fencing; what it must not take; what the reaper and cancel do to a batch."""

from __future__ import annotations

import json

from queue_support import CHAIN, PARTITIONS, partition_slot_commands, queue, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.claims import BatchClaim, Member
from zkqueue.coordinator.jobs import SlotState
from zkqueue.coordinator.reaper import Reaper

PAYLOAD = json.dumps({"proof": {}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": "w", "attempt": 1})


def _sched(queue, **kw):
    from zkqueue.coordinator.scheduler import Scheduler
    return Scheduler(queue.settings(**kw))


def _record(sched, job_id, index, token, worker):
    """record.lua alone (the façade would also send finalize)."""
    return sched.transitions.run("record", job_id, index, token=token, worker=worker, payload=PAYLOAD, build="b",
                                    field="", prove_s=0.0, key_load_s=0.0, checked=[], take=0,
                                    seen="", attempt=0, witness="", invalid_fps="").kind   # no claim: the slot is read


def test_one_transition_claims_b_partitions_each_with_its_own_token_attempt_and_lease(queue):
    client = queue.client()
    sched = _sched(queue)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS + PARTITIONS[:2])     # 6 partitions
    claim = sched.claim_batch(job.id, 0, 1, "w1", 11, max_batch=3)
    assert isinstance(claim, BatchClaim) and claim.ok
    assert claim.members == (Member(0, 1, 1), Member(1, 1, 1), Member(2, 1, 1))
    st = job.status()
    assert [p.state for p in st.partitions] == [SlotState.RUNNING] * 3 + [SlotState.QUEUED] * 3
    for i in range(3):       # each member has its own lease deadline, and its own 'started' event naming the batch
        assert queue.r.zscore(keys.deadlines(), keys.member(job.id, i)) is not None
        assert [(e["event"], e["batch"], e["worker"]) for e in st.partitions[i].events] == [("started", "0", "w1")]
        assert queue.r.hget(keys.slot(job.id, i), "worker") == b"w1"

    # Each member is fenced alone: a record or refresh under another member's token, or by
    # another worker, changes nothing.
    assert sched.refresh(job.id, 1, 1, "w1") == "ok"
    assert sched.refresh(job.id, 1, 1, "w2") == "lost"
    assert _record(sched, job.id, 1, 2, "w1") == "stale"
    assert _record(sched, job.id, 1, 1, "w1") == "recorded"
    assert _record(sched, job.id, 1, 1, "w1") == "stale"        # a second record of a member: nothing
    # The members' own messages, delivered later, find them busy or proved.
    assert sched.claim(job.id, 2, 1, "w2", 22).kind == "busy"
    assert sched.claim_batch(job.id, 1, 1, "w2", 22, max_batch=4).kind == "done"

    # The next batch starts at its lead and skips what others hold, wrapping around the job.
    second = sched.claim_batch(job.id, 4, 1, "w2", 22, max_batch=6)
    assert [m.index for m in second.members] == [4, 5, 3]
    assert queue.r.hlen(keys.results(job.id)) == 1
    sched.close()


def test_companions_are_only_partitions_this_worker_may_take_now(queue):
    client = queue.client()
    sched = _sched(queue, max_attempts=2)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS + PARTITIONS)          # 8 partitions
    r = queue.r
    r.hset(keys.slot(job.id, 1), "excluded", "w0 w1")       # this worker made a bad proof of it
    r.hset(keys.slot(job.id, 2), "routed_to", "w9")         # sent to another worker's own queue
    r.hset(keys.slot(job.id, 3), "attempts", 2)             # attempts spent: its own message gives it up
    assert sched.claim(job.id, 4, 1, "w7", 7).kind == "ok"  # held by another worker
    r.hset(keys.slot(job.id, 6), "routed_to", "w1")         # routed to this very worker: fine
    claim = sched.claim_batch(job.id, 0, 1, "w1", 1, max_batch=8)
    assert [m.index for m in claim.members] == [0, 5, 6, 7]
    st = job.status()
    for i in (1, 2, 3):
        assert st.partitions[i].state == SlotState.QUEUED and r.hget(keys.slot(job.id, i), "attempts") in (None, b"0", b"2")
    # A lead this worker may not take claims nothing at all.
    assert sched.claim_batch(job.id, 1, 1, "w1", 1, max_batch=8).kind == "excluded"
    assert sched.claim_batch(job.id, 2, 2, "w1", 1, max_batch=8).kind == "stale"
    assert job.status().partitions[2].state == SlotState.QUEUED
    # The scan is bounded: with max_batch 1 only the lead is read and taken.
    job2 = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    assert [m.index for m in sched.claim_batch(job2.id, 2, 1, "w1", 1, max_batch=1).members] == [2]
    sched.close()


def test_a_dead_batch_holders_members_are_each_requeued_and_cancel_reaches_every_member(queue):
    client = queue.client()
    sched = _sched(queue, lease_ttl_s=0.3)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    claim = sched.claim_batch(job.id, 0, 1, "w1", 1, max_batch=3)
    assert _record(sched, job.id, 0, 1, "w1") == "recorded"      # one member recorded, then the holder dies
    reaper = Reaper(sched)
    wait_until(lambda: reaper.tick() >= 1 and all(
        queue.r.hget(keys.slot(job.id, i), "state") == b"queued" for i in (1, 2)), 5,
        "the unrefreshed leases of members 1 and 2 to be reaped")
    st = job.status()
    assert st.partitions[0].state == SlotState.PROVED and len(st.partitions[0].events) == 2
    for i in (1, 2):           # requeued alone, with a new token, one attempt spent
        assert [e["event"] for e in st.partitions[i].events] == ["started", "lost"]
        assert queue.r.hget(keys.slot(job.id, i), "token") == b"2"
        assert _record(sched, job.id, i, 1, "w1") == "stale"      # the dead holder's late record
    assert [m.attempt for m in claim.members] == [1, 1, 1]
    again = sched.claim_batch(job.id, 1, 2, "w2", 2, max_batch=4)
    assert [(m.index, m.token, m.attempt) for m in again.members] == [(1, 2, 2), (2, 2, 2), (3, 1, 1)]
    assert sched.cancel(job.id)
    assert {sched.refresh(job.id, m.index, m.token, "w2") for m in again.members} == {"job_over"}
    assert sched.claim_batch(job.id, 3, 1, "w3", 3, max_batch=2).kind == "job_over"
    sched.close()


def test_a_claim_returns_the_slot_records_a_separate_read_would(queue):
    client = queue.client()
    sched = _sched(queue)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    queue.r.hset(keys.slot(job.id, 1), mapping={"excluded": "wx wy", "invalid_builds": "b1"})
    batch = sched.claim_batch(job.id, 0, 1, "w1", 1, max_batch=2)
    assert [m.index for m in batch.members] == [0, 1]
    assert sched.claimed_slots(batch) == sched.slot_records(job.id, [0, 1])
    assert sched.claimed_slots(batch)[1].excluded == ("wx", "wy")
    assert sched.claimed_slots(batch)[0].witness and sched.claimed_slots(batch)[0].enqueued_at
    alone = sched.claim(job.id, 2, 1, "w1", 1)
    assert alone.slot == sched.slot_record(job.id, 2) and alone.slot.witness
    # Range mode (a prove_batch message): the same records.
    ranged = sched.claim_batch(job.id, 3, 1, "w2", 2, max_batch=4, count=1)
    assert [m.index for m in ranged.members] == [3]
    assert sched.claimed_slots(ranged) == sched.slot_records(job.id, [3])
    sched.close()


def test_a_batch_lease_refresh_reads_no_member_until_one_is_taken_and_then_fences_each(queue):
    client = queue.client()
    sched = _sched(queue, lease_ttl_s=0.5)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    claim = sched.claim_batch(job.id, 0, 1, "w1", 1, max_batch=3)
    held = [(m.index, m.token) for m in claim.members]
    fence: dict = {}
    deadline = lambda i: queue.r.zscore(keys.deadlines(), keys.member(job.id, i))   # noqa: E731
    assert sched.refresh_batch(job.id, held, "w1", fence=fence) == ["ok"] * 3       # the first call reads each member
    assert fence["seen"] == "0" and float(fence["run_until"]) > 0
    before = [deadline(i) for i in range(3)]
    wait_until(lambda: sched.refresh_batch(job.id, held, "w1", fence=fence) == ["ok"] * 3
               and all(deadline(i) > b for i, b in zip(range(3), before)), 5, "the leases to be extended")
    # The holder's own record takes the member off the deadlines; a refresh that still names it
    # (the lease thread raced the record) does not put it back.
    assert _record(sched, job.id, 0, 1, "w1") == "recorded"
    assert sched.refresh_batch(job.id, held, "w1", fence=fence) == ["ok"] * 3
    assert deadline(0) is None and fence["seen"] == "0"
    # Member 1's lease lapses (the holder stalled) and w2 takes it over: the next refresh fences
    # every member again, reports member 1 lost and leaves w2's lease alone.
    held = held[1:]
    redis_now = lambda: sum(x / 10 ** (6 * i) for i, x in enumerate(queue.r.time()))   # noqa: E731
    wait_until(lambda: deadline(1) < redis_now(), 5, "member 1's lease to lapse")
    assert sched.claim(job.id, 1, 1, "w2", 2).kind == "ok"
    w2_deadline = deadline(1)
    assert sched.refresh_batch(job.id, held, "w1", fence=fence) == ["lost", "ok"]
    assert deadline(1) == w2_deadline and fence["seen"] == "1"
    assert sched.refresh_batch(job.id, [held[1]], "w1", fence=fence) == ["ok"]
    assert sched.cancel(job.id)
    assert sched.refresh_batch(job.id, [held[1]], "w1", fence=fence) == ["job_over"]
    sched.close()


def test_a_record_under_its_claim_reads_no_slot_until_one_is_taken_and_then_fences_each(queue):
    """A worker's record gives its claim: while the job's `taken` count is the claim's, the
    slot is still that attempt's and record.lua (record_batch.lua) reads none of it; once a
    slot is taken from its holder, each is read and fenced by its token again."""
    client = queue.client()
    sched = _sched(queue, lease_ttl_s=0.5)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    payload = json.loads(PAYLOAD)
    alone = sched.claim(job.id, 0, 1, "w1", 1)
    batch = sched.claim_batch(job.id, 1, 1, "w1", 1, max_batch=2)
    assert [m.index for m in batch.members] == [1, 2]
    with partition_slot_commands(queue.redis_url, job.id) as commands:
        assert sched.record(job.id, 0, 1, "w1", payload, fingerprint={}, claim=alone).kind == "recorded"
        out = sched.record_batch(job.id, [(1, 1, payload)], "w1", fingerprint={}, claim=batch)
    assert out[1].kind == "recorded"
    assert commands == [("HSET", 0), ("HSET", 1)]           # each marked proved; none read
    # Member 2's lease lapses and w2 takes it over: the batch's late record of it is read and
    # found stale, and w2's attempt stands.
    redis_now = lambda: sum(x / 10 ** (6 * i) for i, x in enumerate(queue.r.time()))   # noqa: E731
    wait_until(lambda: queue.r.zscore(keys.deadlines(), keys.member(job.id, 2)) < redis_now(), 5,
               "member 2's lease to lapse")
    assert sched.claim(job.id, 2, 1, "w2", 2).kind == "ok"
    with partition_slot_commands(queue.redis_url, job.id) as commands:
        assert sched.record_batch(job.id, [(2, 1, payload)], "w1", fingerprint={}, claim=batch)[2].kind == "stale"
    assert commands == [("HMGET", 2)]
    assert queue.r.hmget(keys.slot(job.id, 2), "state", "worker") == [b"running", b"w2"]
    sched.close()


def test_a_late_duplicate_record_does_not_bring_back_a_proof_finalize_dropped(queue):
    """Finalize drops an invalid proof (reprove.lua): that moves the job's `taken` count, so
    its producer's late duplicate record (a reply lost, say), which gives its claim, reads the
    slot and finds it stale rather than storing the proof again."""
    client = queue.client()
    sched = _sched(queue)
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2])
    payload = json.loads(PAYLOAD)
    claims = [sched.claim(job.id, i, 1, "w1", 1) for i in range(2)]
    assert sched.record(job.id, 0, 1, "w1", payload, fingerprint={}, claim=claims[0]).kind == "recorded"
    finalize = sched.record(job.id, 1, 1, "w1", payload, fingerprint={}, claim=claims[1]).finalize_token
    assert sched.claim(job.id, keys.FINALIZE_SLOT, finalize, "w9", 9).kind == "ok"
    sched.reprove(job.id, finalize, [{"index": 0, "worker": "w1", "fingerprint": {}, "reason": "invalid proof",
                                      "route_to": ""}])
    assert sched.record(job.id, 0, 1, "w1", payload, fingerprint={}, claim=claims[0]).kind == "stale"
    assert not queue.r.hexists(keys.results(job.id), "0")
    sched.close()


def test_b_comes_from_the_key_the_backend_and_the_device_memory():
    from zkqueue.workers.batching import GPU_DEFAULT_BATCH, PIPELINE_DEPTH, KeyShape, batch_limit
    small, big = KeyShape(12, 5000), KeyShape(20, 1 << 20)
    assert batch_limit(None, backend="cuda", requested=None) == 1                 # not known yet: alone
    assert batch_limit(small, backend="cuda", requested=None) == GPU_DEFAULT_BATCH
    assert batch_limit(small, backend="cuda", requested=1) == 1
    assert batch_limit(small, backend="cpu", requested=None) == 1                 # a CPU batches when told
    assert batch_limit(small, backend="cpu", requested=8) == 8
    assert batch_limit(big, backend="cuda", requested=None) == PIPELINE_DEPTH     # pipelined, not batched
    assert batch_limit(big, backend="cpu", requested=8) == 1
    # The device's free memory caps a GPU batch: 24 words per row + the witness, 32 bytes each, half the memory.
    per_proof = 32 * (24 * 4096 + 5000)
    assert batch_limit(small, backend="cuda", requested=64, device_free_bytes=10 * per_proof) == 5
    assert batch_limit(small, backend="cuda", requested=64, device_free_bytes=per_proof) == 1

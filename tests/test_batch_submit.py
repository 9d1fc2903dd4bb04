"""A submit in batches (ZKQUEUE_SUBMIT_BATCH): one broker message per B partitions of a small
key, claimed in one transition (claim_batch.lua's range mode), recorded in one transition per
group (record_batch.lua), and everything the queue guarantees for a partition sent alone: its
own token and fencing, the reaper's check that its message still exists, valid proofs."""

from __future__ import annotations

import json

from queue_support import CHAIN, PARTITIONS, assert_snarkjs_accepts, queue, slot_events, wait_until  # noqa: F401

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_PROVE, TASK_PROVE_BATCH, decode_task, queue_lists, waiting_slots
from zkqueue.coordinator.jobs import JobState, SlotState
from zkqueue.coordinator.reaper import Reaper

ZKEY = CHAIN / "circuit_final.zkey"


def _payload(worker: str) -> dict:
    return {"proof": {}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": worker, "attempt": 1}


def _messages(r) -> list:
    return [decode_task(json.loads(raw)) for lst in queue_lists(keys.SHARED_QUEUE) for raw in r.lrange(lst, 0, -1)]


def _client(queue, **kw):
    from zkqueue.coordinator.client import Client
    c = Client(settings=queue.settings(**kw))
    queue.clients.append(c)
    return c


def test_a_batch_message_stands_for_its_partitions_each_claimed_and_recorded_under_its_own_fence(queue):
    from zkqueue.coordinator.scheduler import Scheduler
    client = _client(queue, submit_batch=3)
    job = client.submit(ZKEY, PARTITIONS + PARTITIONS[:3])       # 7 partitions: batches of 3, 3 and 1
    msgs = sorted(_messages(queue.r), key=lambda m: int(m.slot))
    assert [(m.task, m.slot, m.count, m.token) for m in msgs] == [
        (TASK_PROVE_BATCH, "0", 3, 1), (TASK_PROVE_BATCH, "3", 3, 1), (TASK_PROVE, "6", 1, 1)]
    # The reaper's view of the queues: every partition has its message.
    assert waiting_slots(queue.r) == {(job.id, str(i), 1) for i in range(7)}
    assert [p.state for p in job.status().partitions] == [SlotState.QUEUED] * 7

    sched = Scheduler(queue.settings())
    first = sched.claim_batch(job.id, 0, 1, "w1", 11, max_batch=3, count=3)
    assert first.ok and [(m.index, m.token, m.attempt) for m in first.members] == [(0, 1, 1), (1, 1, 1), (2, 1, 1)]
    # A member another worker took meanwhile (its own claim, a scan) is left out; so is one
    # sent again alone under a new token.
    assert sched.claim(job.id, 4, 1, "w7", 77).kind == "ok"
    queue.r.hset(keys.slot(job.id, 5), "token", 2)
    second = sched.claim_batch(job.id, 3, 1, "w2", 22, max_batch=3, count=3)
    assert [m.index for m in second.members] == [3]
    # The same message delivered twice claims nothing the second time.
    assert sched.claim_batch(job.id, 0, 1, "w3", 33, max_batch=3, count=3).kind == "none"
    st = job.status()
    assert [e["batch"] for i in (0, 1, 2) for e in slot_events(st, i, "started")] == ["0", "0", "0"]
    assert queue.r.hget(keys.job(job.id), "c:prove:running") == b"5"

    # Recorded in one transition, each member fenced by its own token and holder.
    out = sched.record_batch(job.id, [(0, 1, _payload("w1")), (1, 2, _payload("w1")), (2, 1, _payload("w1"))], "w1",
                             fingerprint={"build": "b"})
    assert {i: r.kind for i, r in out.items()} == {0: "recorded", 1: "stale", 2: "recorded"}
    again = sched.record_batch(job.id, [(0, 1, _payload("w1")), (1, 1, _payload("w9"))], "w9", fingerprint={})
    assert {i: r.kind for i, r in again.items()} == {0: "stale", 1: "stale"}
    assert sorted(int(k) for k in queue.r.hkeys(keys.results(job.id))) == [0, 2]
    st = job.status()
    assert [st.partitions[i].state for i in (0, 1, 2)] == [SlotState.PROVED, SlotState.RUNNING, SlotState.PROVED]
    assert [len(slot_events(st, i, "proved")) for i in (0, 1, 2)] == [1, 0, 1]
    assert queue.r.zscore(keys.deadlines(), keys.member(job.id, 0)) is None      # its lease is over
    assert queue.r.zscore(keys.deadlines(), keys.member(job.id, 1)) is not None
    assert queue.r.hget(keys.job(job.id), "c:prove:proved") == b"2"
    sched.close()


def test_the_last_records_of_a_batch_elect_finalize_once(queue):
    from zkqueue.coordinator.scheduler import Scheduler
    client = _client(queue, submit_batch=4)
    job = client.submit(ZKEY, PARTITIONS)
    sched = Scheduler(queue.settings())
    claim = sched.claim_batch(job.id, 0, 1, "w1", 1, max_batch=4, count=4)
    assert len(claim.members) == 4
    out = sched.record_batch(job.id, [(m.index, m.token, _payload("w1")) for m in claim.members[:2]], "w1",
                             fingerprint={"build": "b"})
    assert all(r.kind == "recorded" and r.finalize_token is None for r in out.values())
    assert queue.r.hget(keys.job(job.id), "finalize_sent") is None
    out = sched.record_batch(job.id, [(m.index, m.token, _payload("w1")) for m in claim.members[2:]], "w1",
                             fingerprint={"build": "b"})
    assert {r.finalize_token for r in out.values()} == {1}
    assert queue.r.hget(keys.job(job.id), "finalize_sent") == b"1"
    finalize = [m for m in _messages(queue.r) if m.slot == keys.FINALIZE_SLOT]
    assert [(m.token, m.count) for m in finalize] == [(1, 1)]
    sched.close()


def test_a_lost_batch_message_is_sent_again_partition_by_partition(queue):
    from zkqueue.coordinator.scheduler import Scheduler
    client = _client(queue, submit_batch=4, queued_check_s=0.2)
    job = client.submit(ZKEY, PARTITIONS)
    assert [(m.task, m.count) for m in _messages(queue.r)] == [(TASK_PROVE_BATCH, 4)]
    sched = Scheduler(queue.settings(queued_check_s=0.2))
    reaper = Reaper(sched)
    # Its checks come due: the one message stands for all four, nothing is sent again.
    redis_now = lambda: sum(x / 10 ** (6 * i) for i, x in enumerate(queue.r.time()))   # noqa: E731
    wait_until(lambda: all(due <= redis_now() for _, due in queue.r.zrange(keys.checks(), 0, -1, withscores=True)),
               5, "the checks to come due")
    assert reaper.tick() == 0
    assert [(m.task, m.count) for m in _messages(queue.r)] == [(TASK_PROVE_BATCH, 4)]
    queue.r.delete(*queue_lists(keys.SHARED_QUEUE))        # the broker lost it
    wait_until(lambda: reaper.tick() >= 0 and len(_messages(queue.r)) == 4, 5, "the reaper to send them again")
    msgs = _messages(queue.r)
    assert sorted((m.task, m.slot, m.token) for m in msgs) == [(TASK_PROVE, str(i), 1) for i in range(4)]
    for i in range(4):
        assert [e["event"] for e in job.status().partitions[i].events] == ["resent"]
    sched.close()


def test_workers_prove_a_job_submitted_in_batches_each_partition_once(queue, tmp_path):
    group = queue.start_workers(2)
    queue.ready(group)
    client = _client(queue, submit_batch=3)
    job = client.submit(ZKEY, PARTITIONS + PARTITIONS[:2])      # 6 partitions: two messages
    result = job.wait(120)
    assert [p.index for p in result.partitions] == list(range(6))
    assert_snarkjs_accepts(result.partitions, CHAIN / "verification_key.json", tmp_path)
    st = job.status()
    assert st.state == JobState.DONE
    leads = {}
    for p in st.partitions:
        assert len(slot_events(st, p.index, "proved")) == 1 and len(slot_events(st, p.index, "started")) == 1
        leads.setdefault(slot_events(st, p.index, "started")[0]["batch"], []).append(p.index)
    assert leads == {"0": [0, 1, 2], "3": [3, 4, 5]}                # each message claimed in one transition

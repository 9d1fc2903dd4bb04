"""Independent checks as proofs are recorded (record.lua's and record_batch.lua's
exchange_checks, tasks/checks.py): a recording worker is handed other workers' proofs to
verify, never its own; its marks ride along with its next record; finalize trusts a mark only
under the partition's current token, and verifies the rest. On a real Redis, no workers."""

from __future__ import annotations

import json

from queue_support import CHAIN, PARTITIONS, queue  # noqa: F401  (fixture)

from zkqueue.coordinator import keys


def _payload(worker: str, n: int) -> dict:
    return {"proof": {"n": n}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": worker, "attempt": 1}


def test_a_recording_worker_is_handed_other_workers_proofs_and_its_marks_count_under_their_token(queue):
    client = queue.client()
    s = client.scheduler
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    for i, w in enumerate(["w1", "w1", "w2", "w2"]):
        assert s.claim(job.id, i, 1, w, 1).kind == "ok"
    # w1 records two proofs: there is nothing of another worker's to check yet.
    assert s.record(job.id, 0, 1, "w1", _payload("w1", 0), fingerprint={}, take=2).to_check == ()
    assert s.record(job.id, 1, 1, "w1", _payload("w1", 1), fingerprint={}, take=2).to_check == ()
    # w2 is handed w1's proofs, each with its token, witness and result as stored.
    got = s.record(job.id, 2, 1, "w2", _payload("w2", 2), fingerprint={}, take=2).to_check
    witness = queue.r.hget(keys.slot(job.id, 0), "witness").decode()
    assert [(c.index, c.token, c.witness, json.loads(c.result)["proof"]) for c in got] == [
        (0, 1, witness, {"n": 0}), (1, 1, queue.r.hget(keys.slot(job.id, 1), "witness").decode(), {"n": 1})]
    # ... and never its own: w2's proof of partition 2 waits for another worker.
    assert queue.r.lrange(keys.unchecked(job.id), 0, -1) == [f"2|1|w2|{queue.r.hget(keys.slot(job.id, 2), 'witness').decode()}".encode()]
    # Its verdicts ride along with its next record: finalize skips what is marked.
    s.record(job.id, 3, 1, "w2", _payload("w2", 3), fingerprint={}, checked=[(0, 1)], take=2)
    assert {i: p.checked for i, p in s.proved(job.id).items()} == {0: True, 1: False, 2: False, 3: False}
    todo, total = s.to_verify(job.id)      # finalize's share: only the unmarked results are read
    assert (sorted(todo), total) == ([1, 2, 3], 4) and todo[1].result["proof"] == {"n": 1}
    # A mark holds only under the token it was made for (the partition re-proved since: not).
    queue.r.hset(keys.slot(job.id, 0), "token", 2)
    assert s.proved(job.id)[0].checked is False
    assert sorted(s.to_verify(job.id)[0]) == [0, 1, 2, 3]


def test_a_batch_record_hands_out_checks_and_takes_marks_in_the_same_transition(queue):
    client = queue.client()
    s = client.scheduler
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS + PARTITIONS[:2])       # 6 partitions
    a = s.claim_batch(job.id, 0, 1, "w1", 1, max_batch=2)
    b = s.claim_batch(job.id, 2, 1, "w2", 2, max_batch=2)
    c = s.claim_batch(job.id, 4, 1, "w1", 1, max_batch=2)
    out = s.record_batch(job.id, [(m.index, m.token, _payload("w1", m.index)) for m in a.members], "w1",
                         fingerprint={}, take=4)
    assert {r.to_check for r in out.values()} == {()}
    out = s.record_batch(job.id, [(m.index, m.token, _payload("w2", m.index)) for m in b.members], "w2",
                         fingerprint={}, checked=[(0, 1), (1, 1)], take=4)
    assert [c.index for c in next(iter(out.values())).to_check] == [0, 1]
    assert {i: p.checked for i, p in s.proved(job.id).items()} == {0: True, 1: True, 2: False, 3: False}
    # The records that elect finalize are handed nothing to check: finalize verifies the rest.
    out = s.record_batch(job.id, [(m.index, m.token, _payload("w1", m.index)) for m in c.members], "w1",
                         fingerprint={}, take=4)
    assert {(r.finalize_token, r.to_check) for r in out.values()} == {(1, ())}
    assert [i for i, p in s.proved(job.id).items() if not p.checked] == [2, 3, 4, 5]


def test_two_workers_check_each_others_proofs_as_they_record(queue):
    """Real workers: each record hands its worker proofs the other recorded, verified and
    marked with its next record (every other record of a worker takes, one that carries marks
    takes none: tasks/checks.to_take); finalize verifies only what carries no mark."""
    group = queue.start_workers(2)
    queue.ready(group)
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS * 3)      # 12 partitions
    result = job.wait(120)
    assert result.complete and len(result.partitions) == 12
    marks = {int(i): int(t) for i, t in queue.r.hgetall(keys.checked(job.id)).items()}
    assert marks, "no proof was checked by the other worker"
    assert all(t == 1 for t in marks.values())           # each under the token its proof was recorded
    assert all(queue.r.hget(keys.slot(job.id, i), "producer") for i in marks)

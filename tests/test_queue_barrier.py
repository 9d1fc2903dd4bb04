"""The queue's Redis state machine without worker processes: submit, claim, lease expiry,
the reaper, the fan-in barrier, idempotency, cancellation, and the start-up checks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from queue_support import CHAIN, PARTITIONS, ROOT, queue, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.errors import ConfigError, JobCancelled, JobFailed, WaitTimeout
from zkqueue.coordinator.jobs import JobState, SlotState
from zkqueue.coordinator.reaper import Reaper


def _queued_messages(r, queue_name=keys.SHARED_QUEUE) -> list[dict]:
    """Celery messages waiting on a queue (all priority levels), decoded envelopes."""
    from zkqueue.coordinator.broker import queue_lists
    out = []
    for name in queue_lists(queue_name):
        out += [json.loads(m) for m in r.lrange(name, 0, -1)]
    return out


def _args(msg) -> list:
    import base64
    import msgpack
    assert msg["content-type"] == "application/x-msgpack"
    args, _kwargs, _embed = msgpack.unpackb(base64.b64decode(msg["body"]))
    return args


def test_submit_stores_artifacts_by_hash_and_enqueues_ids_only(queue):
    client = queue.client()
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2], priority="high")
    st = job.status()
    assert st.state == JobState.QUEUED and st.n_partitions == 2
    assert [p.state for p in st.partitions] == [SlotState.QUEUED] * 2
    msgs = _queued_messages(queue.r)
    assert sorted(_args(m)[1] for m in msgs) == [0, 1]
    for m in msgs:   # ids and a token, never file contents
        job_id, index, token = _args(m)
        assert (job_id, token) == (job.id, 1) and m["headers"]["task"] == "zkqueue.prove_partition"
        assert len(m["body"]) < 200
        assert m["properties"]["priority"] == 3
    from zkqueue.coordinator.store import sha256_file
    sha = sha256_file(PARTITIONS[0])
    assert client.store.local_path(sha).read_bytes() == PARTITIONS[0].read_bytes()
    assert queue.r.hget(keys.slot(job.id, 0), "witness").decode() == sha


def test_same_request_id_returns_same_job(queue):
    client = queue.client()
    a = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS, request_id="req-42")
    b = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1], request_id="req-42")
    c = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1], request_id="req-43")
    assert a.id == b.id != c.id
    assert len(_queued_messages(queue.r)) == 5     # 4 + 1: the repeat enqueued nothing


def test_cancel_and_wait(queue):
    client = queue.client()
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1])
    with pytest.raises(WaitTimeout):
        job.wait(0.2)
    assert job.cancel() is True
    assert job.cancel() is False
    with pytest.raises(JobCancelled):
        job.wait(5)
    # A message of a cancelled job is skipped when a worker claims it.
    assert client.scheduler.claim(job.id, 0, 1, "w1", 123).kind == "job_over"


def test_claim_lease_reaper_and_attempt_cap(queue):
    client = queue.client()
    settings = queue.settings(lease_ttl_s=0.3, max_attempts=2)
    from zkqueue.coordinator.scheduler import Scheduler
    sched = Scheduler(settings)
    b = sched
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:1])

    assert b.claim(job.id, 0, 2, "w1", 1).kind == "stale"        # not the current token
    assert b.claim(job.id, 0, 1, "w1", 1).kind == "ok"
    assert b.claim(job.id, 0, 1, "w2", 2).kind == "busy"         # a redelivery while the lease lives
    assert b.refresh(job.id, 0, 1, "w1") == "ok"
    reaper = Reaper(sched)
    assert reaper.tick() == 0                                     # lease alive: nothing to do
    wait_until(lambda: reaper.tick() == 1, 5, "the unrefreshed lease to lapse and be reaped")
    st = job.status()
    assert st.partitions[0].state == SlotState.QUEUED
    assert [e["event"] for e in st.partitions[0].events] == ["started", "lost"]
    assert b.refresh(job.id, 0, 1, "w1") == "lost"               # the old holder learns it lost
    assert b.claim(job.id, 0, 1, "w1", 1).kind == "stale"        # Celery's late redelivery: ignored
    tokens = sorted(_args(m)[2] for m in _queued_messages(queue.r))
    assert tokens == [1, 2]
    assert b.claim(job.id, 0, 2, "w2", 2).attempt == 2           # attempt 2
    wait_until(lambda: reaper.tick() == 1, 5, "attempt 2's lease to lapse: attempts exhausted")
    with pytest.raises(JobFailed, match="partition 0: gave up after 2 attempts") as info:
        job.wait(5)
    assert info.value.slot == "0"
    # An ended job's keys expire (set by the script that ended it), each of them.
    existing = list(queue.r.scan_iter(match=keys.job(job.id) + "*"))
    assert existing and all(0 < queue.r.ttl(k) <= settings.result_ttl_s for k in existing)
    sched.close()


def test_barrier_records_once_and_elects_finalize_once(queue):
    client = queue.client()
    b = client.scheduler
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2])
    payload = json.dumps({"proof": {}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": "w", "attempt": 1})

    def record(index, token, worker):    # the transition alone (the façade would also send finalize)
        return b.transitions.run("record", job.id, index, token=token, worker=worker, payload=payload, build="b1",
                                  field="", prove_s=0.0, key_load_s=0.0, checked=[], take=0,
                                  seen="", attempt=0, witness="", invalid_fps="")   # no claim: the slot is read
    for i in range(2):
        assert b.claim(job.id, i, 1, "w", 1).kind == "ok"
    assert record(0, 2, "w").kind == "stale"     # fenced: not the current token
    assert record(0, 1, "other").kind == "stale"  # nor the lease holder
    assert record(0, 1, "w").kind == "recorded"
    assert record(0, 1, "w").kind == "stale"     # a duplicate run changes nothing
    out = record(1, 1, "w")
    assert out == type(out)("recorded", ("finalize=1",))     # this record completed the set: elected
    assert record(1, 1, "w").kind == "stale"
    assert queue.r.hlen(keys.results(job.id)) == 2
    fin = [m for m in _queued_messages(queue.r) if m["headers"]["task"] == "zkqueue.finalize"]
    assert fin == []          # the election only hands out the token; the winner sends it
    # Finalize re-proves an invalid partition on another worker and re-elects later.
    assert b.claim(job.id, keys.FINALIZE_SLOT, 1, "w", 1).kind == "ok"
    out = b.reprove(job.id, 1, [{"index": 1, "worker": "w", "fingerprint": {"host": "h"},
                                 "reason": "proof does not verify", "route_to": "other"}])
    assert out.kind == "send" and out.sent == {1: 2}                 # partition 1 sent again, token 2
    assert queue.r.hlen(keys.results(job.id)) == 1
    assert b.claim(job.id, 1, 2, "w", 1).kind == "excluded"          # never the bad worker again
    assert b.claim(job.id, 1, 2, "other", 2).kind == "ok"
    assert record(1, 2, "other").detail == ("finalize=2",)
    st = job.status()
    assert st.bad_workers[0]["worker"] == "w" and st.bad_workers[0]["fingerprint"] == {"host": "h"}


def test_the_facade_answers_each_transition_with_its_typed_reply(queue):
    """The scheduler parses each script's raw reply once: a claim is Claimed (attempt, Redis's
    clock) or a Reply saying why not; the record that completes the set is Recorded with the
    finalize token it elected, and the façade has sent that message itself."""
    from zkqueue.coordinator.jobs import Priority
    from zkqueue.coordinator.replies import Claimed, Recorded, Reply, Submitted
    client = queue.client()
    s = client.scheduler
    job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:2], request_id="typed")
    again = s.submit("0" * 32, request_id="typed", priority=Priority.NORMAL, zkey_sha="0" * 64,
                     witnesses=[("1" * 64, "w.wtns")])
    assert again == Submitted(job.id, created=False) and again.kind == "exists"
    now = float(queue.r.time()[0])
    claims = [s.claim(job.id, i, 1, "w", 1) for i in range(2)]
    assert all(isinstance(c, Claimed) and c.attempt == 1 and abs(c.started_at - now) < 60 for c in claims), claims
    assert s.claim(job.id, 0, 1, "w2", 2) == Reply("busy", "w")
    assert s.claim(job.id, 0, 7, "w2", 2) == Reply("stale", "1")
    payload = {"proof": {}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": "w", "attempt": 1}
    fp = {"id": "f", "build": "b"}
    assert s.record(job.id, 0, 1, "w", payload, fingerprint=fp) == Recorded(finalize_token=None)
    assert s.record(job.id, 1, 1, "w", payload, fingerprint=fp) == Recorded(finalize_token=1)
    assert s.record(job.id, 1, 1, "w", payload, fingerprint=fp) == Reply("stale")
    fin = [_args(m) for m in _queued_messages(queue.r) if m["headers"]["task"] == "zkqueue.finalize"]
    assert fin == [[job.id, 1]]        # sent by the façade, not by the caller
    assert s.reap(job.id, 0) == Reply("none")      # proved: no deadline left
    # What the tasks read, through the façade.
    from zkqueue.coordinator.store import sha256_file
    records = s.slot_records(job.id, [0, 1])
    assert [r.witness for r in records] == [sha256_file(p) for p in PARTITIONS[:2]]
    assert [r.witness_name for r in records] == [p.name for p in PARTITIONS[:2]]
    assert all(abs(r.enqueued_at - now) < 60 and r.excluded == () for r in records)
    assert s.slot_record(job.id, 1) == records[1]
    assert s.job_files(job.id).zkey == sha256_file(CHAIN / "circuit_final.zkey") and s.job_files(job.id).wasm == ""
    assert sorted(s.proved(job.id)) == [0, 1] and s.proved(job.id)[1].witness == records[1].witness


def test_reaper_resends_a_message_lost_between_commit_and_send(queue):
    client = queue.client()
    sched = client.scheduler
    job_id = "f" * 32
    # A submitter that died right after committing: slots in `sending`, no message.
    sched.transitions.settings = queue.settings(send_grace_s=0.001)
    sched.transitions.run("submit", job_id, keys.FINALIZE_SLOT, request_id="", priority="normal", zkey="0" * 64,
                          witnesses=[{"sha": "1" * 64, "name": "w.wtns"}], inputs=[], wasm="", wasm_name="", r1cs="",
                          all_or_nothing=False)
    assert _queued_messages(queue.r) == []
    reaper = Reaper(sched)
    wait_until(lambda: reaper.tick() == 1, 5, "the reaper to send the message")
    assert [_args(m) for m in _queued_messages(queue.r)] == [[job_id, 0, 1]]
    assert queue.r.hget(keys.slot(job_id, 0), "state") == b"queued"


def test_reaper_lock_keeps_one_reaper(queue):
    from zkqueue.coordinator.scheduler import Scheduler
    s = Scheduler(queue.settings())
    a, b = Reaper(s, owner="a"), Reaper(s, owner="b")
    assert a.acquire() and not b.acquire() and a.acquire()
    a.release()
    assert b.acquire()
    s.close()


def test_settings_refuse_time_limit_over_visibility_timeout(queue):
    with pytest.raises(ConfigError, match="visibility_timeout"):
        queue.settings(task_time_limit_s=4000, visibility_timeout_s=3600)
    env = queue.env(ZKQUEUE_TASK_TIME_LIMIT_S=4000, ZKQUEUE_VISIBILITY_TIMEOUT_S=3600)
    proc = subprocess.run([sys.executable, "-m", "zkqueue.tasks.main", "--device", "cpu:0"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "visibility_timeout" in proc.stderr


def test_worker_config_never_accepts_pickle():
    from zkqueue.tasks.config import check, worker_config
    from zkqueue.config import Settings
    conf = worker_config(Settings())
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1 and conf["worker_concurrency"] == 1
    assert "pickle" not in conf["accept_content"]
    with pytest.raises(ConfigError, match="pickle"):
        check(dict(conf, accept_content=["json", "pickle"]))


def test_cli_submit_status_cancel_without_workers(queue):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "zkqueue.cli", *map(str, args)], env=queue.env(),
                              cwd=ROOT, capture_output=True, text=True, timeout=60)

    sub = cli("submit", CHAIN / "circuit_final.zkey", *PARTITIONS[:2], "--priority", "low")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip()
    assert "queued 0/2 proved" in cli("status", job_id).stdout
    assert cli("cancel", job_id).stdout.strip() == f"job {job_id} cancelled"
    st = json.loads(cli("status", job_id, "--json").stdout)
    assert st["state"] == "cancelled" and st["priority"] == "low"
    missing = cli("status", "0" * 32)
    assert missing.returncode == 2 and "no job" in missing.stderr
    bad = cli("submit", CHAIN / "circuit_final.zkey", queue.tmp / "nope.wtns")
    assert bad.returncode == 2 and "nope.wtns" in bad.stderr

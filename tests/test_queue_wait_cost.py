"""Waiting on a job costs the same Redis work per partition whatever the job's size: the
waiting client reads job-level counts kept by the transitions, not every partition, and
reads the partitions once, at the end."""

from __future__ import annotations

import threading

import redis

from queue_support import partition_slot_commands, queue  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.client import Client
from zkqueue.coordinator.jobs import Priority


class CountingConnection(redis.Connection):
    """A real connection that counts the commands it sends (pipelined ones included)."""

    sent = 0

    def send_command(self, *args, **kwargs):
        CountingConnection.sent += 1
        return super().send_command(*args, **kwargs)

    def pack_commands(self, commands):      # a pipeline's
        commands = list(commands)
        CountingConnection.sent += len(commands)
        return super().pack_commands(commands)


def _waited_commands(queue, n: int) -> int:
    """Commands the waiting client sent while a job of `n` partitions ran to its end, the
    fleet played by the state machine's own transitions (claim, record, finalize)."""
    fleet = queue.client()
    job_id = f"{n:032x}"
    fleet.scheduler.submit(job_id, request_id=None, priority=Priority.NORMAL, zkey_sha="0" * 64,
                           witnesses=[(f"{i:064x}", f"w{i}.wtns") for i in range(n)])
    waiter = Client(settings=queue.settings())
    waiter.r.connection_pool.connection_class = CountingConnection     # before its first command
    queue.clients.append(waiter)
    payload = {"proof": {}, "public": [], "fingerprint": {}, "timings_s": {}, "worker": "w", "attempt": 1}

    def run_fleet():
        s = fleet.scheduler
        for i in range(n):
            assert s.claim(job_id, i, 1, "w", 1).kind == "ok"
            assert s.record(job_id, i, 1, "w", payload, fingerprint={"id": "f", "build": "b"}).kind == "recorded"
        token = int(queue.r.hget(keys.slot(job_id, keys.FINALIZE_SLOT), "token"))
        assert s.claim(job_id, keys.FINALIZE_SLOT, token, "w", 1).kind == "ok"
        assert s.finish(job_id, token, 0.001)

    CountingConnection.sent = 0
    fleet_thread = threading.Thread(target=run_fleet)
    job = waiter.job(job_id)
    seen = []
    fleet_thread.start()
    result = job.wait(300, progress=seen.append)
    fleet_thread.join()
    assert len(result.partitions) == n and result.complete
    assert seen and seen[-1].proved == n        # the progress display saw the job move
    return CountingConnection.sent


def test_waiting_costs_the_same_per_partition_from_64_to_1024_partitions(queue):
    per_partition = {n: _waited_commands(queue, n) / n for n in (64, 1024)}
    print("Redis commands per partition of a waited job:", per_partition)
    assert per_partition[1024] <= 10, per_partition
    assert per_partition[1024] <= 1.25 * per_partition[64] + 1, per_partition


def test_a_submit_writes_each_slot_once_and_reads_none(queue):
    """Submitting writes each partition's slot once (submit.lua creates it queued); sending
    its messages arms their checks without reading or writing a slot again. Counted with
    MONITOR, which shows the commands scripts run too."""
    client = queue.client()
    job_id, n = "c" * 32, 300          # more than one chunk of checks armed (ARM_CHUNK)
    with partition_slot_commands(queue.redis_url, job_id) as commands:
        client.scheduler.submit(job_id, request_id=None, priority=Priority.NORMAL, zkey_sha="0" * 64,
                                witnesses=[(f"{i:064x}", f"w{i}.wtns") for i in range(n)])
    assert sorted(commands) == [("HSET", i) for i in range(n)]
    checks = queue.r.zrange(keys.checks(), 0, -1)
    assert sum(m.decode().startswith(job_id) for m in checks) == n


def test_the_result_reads_the_slots_of_the_failed_partitions_alone(queue):
    """A verified partition's result holds what the client's result says of it (worker,
    attempt, and the time of its record: record.lua stamps it), so result() reads only the
    slots of the partitions that failed, for their reasons."""
    fleet = queue.client()
    s = fleet.scheduler
    job_id, n = "d" * 32, 6
    s.submit(job_id, request_id=None, priority=Priority.NORMAL, zkey_sha="0" * 64,
             witnesses=[(f"{i:064x}", f"w{i}.wtns") for i in range(n)])
    finalize = None
    for i in range(n):
        assert s.claim(job_id, i, 1, "w", 1).kind == "ok"
        if i == 4:
            assert s.fail_input(job_id, i, 1, "w", "partition 4: w4.wtns is not a witness file")
            continue
        payload = {"proof": {"i": i}, "public": [], "fingerprint": {}, "timings_s": {"prove_s": 0.5}, "worker": "w",
                   "attempt": 1}
        finalize = s.record(job_id, i, 1, "w", payload, fingerprint={}).finalize_token or finalize
    assert s.claim(job_id, keys.FINALIZE_SLOT, finalize, "w", 1).kind == "ok"
    assert s.finish(job_id, finalize, 0.001)
    job = fleet.job(job_id)
    with partition_slot_commands(queue.redis_url, job_id) as commands:
        result = job.result()
    assert commands == [("HMGET", 4)]
    assert [p.index for p in result.partitions] == [0, 1, 2, 3, 5]
    assert [(f.index, f.reason) for f in result.failed] == [(4, "partition 4: w4.wtns is not a witness file")]
    created, finished = (float(v) for v in queue.r.hmget(keys.job(job_id), "created_at", "finished_at"))
    for p in result.partitions:
        assert p.worker == "w" and p.attempt == 1 and p.proof == {"i": p.index}
        assert 0 < p.timings_s["total_s"] <= finished - created and p.timings_s["prove_s"] == 0.5

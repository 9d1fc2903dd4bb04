"""Redis Sentinel failover mid-job, on namespaced hosts: a primary (r1) and a replica (r2),
three sentinels (r1, r2, r3), everything over TLS with the role users; workers on w1 and w2
and the waiting client reach Redis through `sentinels://`. The primary is SIGKILLed while
partitions are being proved: the sentinels promote the replica, workers and the waiting
client follow it, writes the replica had not received are recovered by the deadlines and
resends, and the job completes with every proof accepted by snarkjs. Prints the time from
the kill to the next proof recorded."""

from __future__ import annotations

import signal
import time

from fleet_support import (MASTER, PARTITIONS, REDIS_TLS_PORT, SENTINEL_PORT, Fleet, network,  # noqa: F401
                           snarkjs_accepts_all, wait_until)

from zkqueue.coordinator import keys

SLOW_S = 2


def test_the_primary_killed_mid_job_fails_over_to_the_replica_and_the_job_completes(network, tmp_path):
    fleet = Fleet(network, tmp_path, sentinel=True, env={"ZKQUEUE_LEASE_TTL_S": 6})
    r1, r2 = fleet.redis_hosts[:2]
    for name in ("w1", "w2"):
        fleet.start_workers(name, ZKQUEUE_FAULT=f"slow:{SLOW_S}")
    fleet.workers_ready(["w1", "w2"])
    files = PARTITIONS * 3                      # 12 partitions, ~2 s each on two workers
    submit = fleet.submit(files, fleet.client.dir / "out", timeout_s=170)
    job_id = wait_until(lambda: fleet.ask(lambda r: r.zrevrange(keys.jobs(), 0, 0)), 30, "the job")[0].decode()

    # Kill the primary once proofs are being recorded and others are running.
    def mid_job(r):
        states = [r.hget(keys.slot(job_id, i), "state") for i in range(len(files))]
        return r.hlen(keys.results(job_id)) >= 2 and b"running" in states
    wait_until(lambda: fleet.ask(mid_job), 60, "proofs recorded and partitions running", interval_s=0.1)
    r1.stop(fleet.redis_procs["primary"], sig=signal.SIGKILL, grace_s=0)
    killed_at = time.time()

    def promoted():
        from redis.sentinel import Sentinel
        s = Sentinel([(h.addr, SENTINEL_PORT) for h in fleet.redis_hosts],
                     sentinel_kwargs={"ssl": True, "ssl_ca_certs": str(fleet.certs.ca), "socket_timeout": 2})
        try:
            return s.discover_master(MASTER) == (r2.addr, REDIS_TLS_PORT)
        except Exception:        # noqa: BLE001 - no primary while they vote
            return False
    wait_until(lambda: fleet.client.call(promoted), 60, "the sentinels to promote the replica", interval_s=0.2)
    promoted_after_s = time.time() - killed_at

    assert fleet.finished(submit, 150) == job_id
    snarkjs_accepts_all(fleet.client.dir / "out", len(files))
    status = fleet.status(job_id)
    assert status["state"] == "done" and len(status["partitions"]) == len(files)

    # The next proof recorded after the kill (Redis's clock: the slots' finished_at).
    def finished(r):
        return sorted(float(v) for i in range(len(files))
                      if (v := r.hget(keys.slot(job_id, i), "finished_at")) and float(v) > killed_at)
    after = fleet.ask(finished)
    assert after, "no proof was recorded after the kill"
    kill_to_proof_s = after[0] - killed_at
    # Neither workers nor the client were refused anything on the new primary.
    denied = [e for e in fleet.ask(lambda r: r.acl_log()) if e["username"] in ("worker", "client", "admin")]
    assert denied == [], denied
    print(f"failover: replica promoted {promoted_after_s:.1f} s after the primary was killed; "
          f"next proof recorded {kill_to_proof_s:.1f} s after the kill")

"""A worker host's network cable pulled mid-partition (tests/hosts.py: its link to the switch
goes down; its processes live on, their connections silent), then put back: the partition
it held is proved by the other host once its lease expires, the job completes with every
proof valid, the cut-off host's late work is fenced by its stale token, and the host rejoins
and takes work again without any of its processes being restarted."""

from __future__ import annotations

import re
import time

from fleet_support import PARTITIONS, Fleet, network, snarkjs_accepts_all, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import TASK_PROVE as TASK

# Each attempt holds its lease this long before proving (workers/faults.py): w2's attempt
# outlasts the cut, so its late result arrives after the cable is back.
W1_SLOW_S, W2_SLOW_S = 2, 15
LEASE_TTL_S = 6.0
OVERDUE_MIN_S = 30.0    # w2's slow attempts are slow, not hung


def _slots(job_id: str, n: int):
    def read(r):
        with r.pipeline(transaction=False) as p:
            for i in range(n):
                p.hmget(keys.slot(job_id, i), "state", "worker", "token", "started_at")
            return [[v.decode() if v else "" for v in row] for row in p.execute()]
    return read


def test_a_worker_host_cut_off_mid_job_is_replaced_fenced_and_rejoins_without_a_restart(network, tmp_path):
    fleet = Fleet(network, tmp_path, env={"ZKQUEUE_LEASE_TTL_S": LEASE_TTL_S, "ZKQUEUE_OVERDUE_MIN_S": OVERDUE_MIN_S})
    fleet.start_workers("w1", ZKQUEUE_FAULT=f"slow:{W1_SLOW_S}")
    w2, w2_proc = fleet.start_workers("w2", ZKQUEUE_FAULT=f"slow:{W2_SLOW_S}")
    beats = fleet.workers_ready(["w1", "w2"])
    w2_before = {b["worker"]: (b["pid"], tuple(b["children"])) for b in beats if b["fingerprint"]["host"] == "w2"}

    files = PARTITIONS + PARTITIONS[:2]
    submit = fleet.submit(files, fleet.client.dir / "out1", timeout_s=170)
    job_id = wait_until(lambda: fleet.ask(lambda r: r.zrevrange(keys.jobs(), 0, 0)), 30, "the job")[0].decode()

    # Wait until w2 is inside an attempt with the key and the witness in its cache (so it
    # goes on proving without the network), then pull its cable.
    witnesses = fleet.ask(lambda r: [r.hget(keys.slot(job_id, i), "witness").decode() for i in range(len(files))])
    zkey = fleet.ask(lambda r: r.hget(keys.job(job_id), "zkey").decode())
    cached = lambda sha: (w2.cache_dir / "artifacts" / sha).is_file()  # noqa: E731

    def w2_running():
        rows = fleet.ask(_slots(job_id, len(files)))
        for i, (state, worker, token, started) in enumerate(rows):
            if state == "running" and worker.startswith("w2-") and cached(zkey) and cached(witnesses[i]):
                return i, worker, int(token)
        return None
    index, w2_worker, token = wait_until(w2_running, 60, "a partition running on w2", interval_s=0.2)
    network.cut("w2")
    cut_at = time.monotonic()

    # Its partition goes to w1 once the lease expires (the reaper runs on w1 too): sent again
    # under a new token, and claimed by w1 as soon as w1 is free (its attempts take W1_SLOW_S).
    def moved():
        state, worker, new_token, _ = fleet.ask(_slots(job_id, len(files)))[index]
        return (int(new_token) > token and state in ("running", "proved", "verified") and worker.startswith("w1-")
                and (time.monotonic() - cut_at))
    moved_after_s = wait_until(moved, 60, f"partition {index} to move to w1", interval_s=0.2)
    assert moved_after_s <= LEASE_TTL_S + W1_SLOW_S + 4, f"partition {index} moved {moved_after_s:.1f} s after the cut"

    # The cable back while w2 still holds its (now stale) attempt: its lease thread finds the
    # slot taken, or its record finds the token stale. Either way nothing of it is kept.
    network.mend("w2")
    cut_for_s = time.monotonic() - cut_at
    ended = re.compile(re.escape(f"Task {TASK}[{job_id}:{index}] succeeded in ") + r"[0-9.]+s: '([^']*)'")
    outcome = wait_until(lambda: ended.findall(w2.log("worker")), 90, "w2's cut-off attempt to end")[0]
    assert outcome in ("stale", "job_over") or outcome.startswith("stopped"), outcome

    assert fleet.finished(submit, 150) == job_id
    snarkjs_accepts_all(fleet.client.dir / "out1", len(files))
    status = fleet.status(job_id)
    assert status["partitions"][index]["worker"].startswith("w1-"), status["partitions"][index]
    assert w2_proc.poll() is None

    # It rejoins: heartbeats again, and takes work of the next job.
    fleet.workers_ready(["w1", "w2"], timeout_s=90)
    again = fleet.submit(files, fleet.client.dir / "out2", timeout_s=170)
    job2 = fleet.finished(again, 170)
    snarkjs_accepts_all(fleet.client.dir / "out2", len(files))
    status2 = fleet.status(job2)
    assert any(p["worker"] == w2_worker for p in status2["partitions"]), (w2_worker, status2["partitions"])

    # Not restarted: the same worker ids and worker processes as before the cut.
    beats = fleet.ask(lambda r: __import__("fleet_support").live_workers(r))
    w2_after = {b["worker"]: (b["pid"], tuple(b["children"])) for b in beats if b["fingerprint"]["host"] == "w2"}
    assert set(w2_after) == set(w2_before), (w2_before, w2_after)
    assert [pid for pid, _ in w2_after.values()] == [pid for pid, _ in w2_before.values()]
    print(f"w2 cut off for {cut_for_s:.1f} s; partition {index} moved to w1 {moved_after_s:.1f} s after the cut; "
          f"w2's late attempt: {outcome!r}")

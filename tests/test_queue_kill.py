"""SIGKILL in the middle of a partition: of the pool child, and of a whole worker tree.

Every partition is made slow on its first attempt (test-only fault), so the kill lands
while a partition is running under its lease. The reaper must restart it within 15 s
(not after the hour-long visibility timeout), from recorded attempt start times.
"""

from __future__ import annotations

import os
import signal
import time

from queue_support import CHAIN, PARTITIONS, queue, slot_events, wait_until  # noqa: F401  (fixtures)

from zkqueue.coordinator.jobs import JobState
from zkqueue.groth16.formats.jsonfiles import proof_from_json

RESTART_LIMIT_S = 15.0


def _first_running(job):
    def check():
        st = job.status()
        for p in st.partitions:
            started = slot_events(st, p.index, "started")
            if p.state.value == "running" and started:
                return p.index, started[-1]
        return None
    return wait_until(check, 60, "a partition to start")


def _check_complete(job, killed_index: int, killed_at: float) -> None:
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats.jsonfiles import load_verification_key

    result = job.wait(90)
    vk = load_verification_key(CHAIN / "verification_key.json")
    assert [p.index for p in result.partitions] == [0, 1, 2, 3]
    for p in result.partitions:
        assert verifier.verify(vk, proof_from_json(p.proof), [int(s) for s in p.public_signals]), p.index
    st = job.status()
    assert st.state == JobState.DONE
    for p in st.partitions:       # each partition present exactly once
        assert len(slot_events(st, p.index, "proved")) == 1, p.events
    starts = slot_events(st, killed_index, "started")
    assert len(starts) >= 2, starts
    restart = next(e["at"] for e in starts if e["at"] > killed_at)
    assert restart - killed_at <= RESTART_LIMIT_S, f"restarted {restart - killed_at:.1f} s after the kill"
    assert any(e["event"] == "lost" for e in st.partitions[killed_index].events)


def test_sigkill_of_the_pool_child_mid_partition(queue):
    a = queue.start_workers(1, fault="slow-first:4")
    b = queue.start_workers(1, fault="slow-first:4")
    queue.ready(a), queue.ready(b)
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    index, started = _first_running(job)
    pid = started["pid"]
    # The prover is the pool child, not the Celery parent: its parent is the worker process.
    beat = next(h for h in queue.heartbeats() if h["worker"] == started["worker"])
    assert pid in beat["children"] and pid != beat["pid"]
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    _check_complete(job, index, killed_at)
    assert a.proc.poll() is None and b.proc.poll() is None   # the workers themselves lived on


def test_sigkill_of_a_whole_worker_tree_mid_partition(queue):
    a = queue.start_workers(1, fault="slow-first:4")
    b = queue.start_workers(1, fault="slow-first:4")
    beats = {h["worker"]: g for g in (a, b) for h in queue.ready(g)}
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    index, started = _first_running(job)
    victim = beats[started["worker"]]
    victim.kill()                      # os.killpg(SIGKILL): supervisor, worker, pool child
    killed_at = time.time()
    _check_complete(job, index, killed_at)
    st = job.status()
    assert started["worker"] not in {p.worker for p in st.partitions if p.index == index}


def test_workers_stop_themselves_when_their_supervisor_is_killed(queue):
    """SIGKILL of the `zkqueue worker` process alone (the OOM killer's pick, a `kill -9` of its
    pid): its worker and pool processes stop within seconds instead of proving on, unwatched,
    beside the ones a restarted supervisor would start."""
    import psutil
    group = queue.start_workers(1)
    queue.ready(group)
    tree = psutil.Process(group.proc.pid).children(recursive=True)
    assert tree, "the supervisor has no worker processes"
    group.proc.send_signal(signal.SIGKILL)
    group.proc.wait(timeout=10)

    def all_gone():
        return not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    wait_until(all_gone, 30, "the orphaned worker processes to stop")
    assert "supervisor (pid" in group.log() and "is gone: stopping this worker" in group.log()

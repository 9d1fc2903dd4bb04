"""A worker's memory as the kernel enforces it, in real control groups: the limit that applies
(workers/memory.py), deaths of memory named by the supervisor (workers/deaths.py), and
admission: a worker claims only partitions whose key it can hold (workers/admission.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from cgroups import MemoryGroup, unavailable
from queue_support import (CHAIN, FIXTURES, PARTITIONS, ROOT, assert_snarkjs_accepts, queue,  # noqa: F401
                           wait_until)
from zkqueue.coordinator import metrics
from zkqueue.coordinator.errors import JobFailed
from zkqueue.workers import memory

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "cgroups available")

READ_LIMIT = ("import json; from zkqueue.workers import memory as m; l = m.process_limit(); "
              "print(json.dumps({'limit': l.limit_bytes, 'used': l.used_bytes, 'source': l.source}))")


def test_a_process_in_a_group_sees_the_groups_limit_not_the_hosts():
    host = memory.host_memory()
    limit = 300 << 20
    with MemoryGroup(limit) as group:
        proc = group.popen([sys.executable, "-c", READ_LIMIT], stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=60)
    seen = json.loads(out)
    assert seen["limit"] == limit < host.limit_bytes
    assert str(group.path) in seen["source"] and "cgroup v" in seen["source"]
    assert 0 < seen["used"] < limit      # the interpreter itself, counted in its group


def test_outside_any_limited_group_the_host_ram_applies():
    out = subprocess.run([sys.executable, "-c", READ_LIMIT], capture_output=True, text=True, check=True).stdout
    seen = json.loads(out)
    chain_limits = [g.limit_bytes() for g in memory.cgroup_memory()]
    if any(chain_limits):
        pytest.skip(f"this test process itself runs under a memory limit: {chain_limits}")
    assert seen["source"] == "host RAM" and seen["limit"] == memory.host_memory().limit_bytes


def test_an_oom_kill_is_counted_in_the_group():
    with MemoryGroup(64 << 20) as group:
        before = group.oom_kills()
        hog = group.popen([sys.executable, "-c", "b = bytearray(256 << 20); print(len(b))"],
                          stdout=subprocess.PIPE, text=True)
        hog.communicate(timeout=60)
        assert hog.returncode == -signal.SIGKILL
        assert group.oom_kills() == before + 1
        # The module reads the same counter from the group's folder.
        assert memory.CgroupMemory(group.path, group.version).oom_kills() == before + 1


def test_a_worker_whose_group_is_too_small_to_start_is_named_dead_of_memory_and_backed_off(queue):  # noqa: F811
    # 40 MiB holds the supervisor (~16 MiB) but not a worker process (~80 MiB once its imports
    # are done): the kernel's OOM killer kills the worker each time it starts. (With a little
    # more, enough to start but not to hold keys, the worker refuses to start instead, saying so:
    # workers/process.fit_key_cache reads the same limit.)
    with MemoryGroup(40 << 20) as group:
        workers = queue.start_workers(1, prefix=group.prefix())

        def two_deaths():
            deaths = [line for line in workers.log().splitlines() if "died of memory" in line]
            return deaths if len(deaths) >= 2 else None
        deaths = wait_until(two_deaths, 60, "the supervisor to log two deaths of memory")
        assert "OOM killer" in deaths[0] and str(group.path) in deaths[0] and "40 MiB" in deaths[0], deaths[0]
        # Backed off, not a hot loop: each restart waits longer than the one before.
        assert "restarting in 1 s" in deaths[0] and "restarting in 2 s" in deaths[1], deaths
        assert group.oom_kills() >= 2
        assert workers.proc.poll() is None          # the supervisor itself lives on


# ---- admission: a worker claims only partitions whose key it can hold -----------------------

BIG = FIXTURES / "keys" / "bn128_chain_14"        # a 2^14 key: about 27 MiB to prove on one thread (the model)
MIB = 1 << 20


def _needs(fixture) -> int:
    from zkqueue.groth16.formats.zkey import read_header
    from zkqueue.workers.key_needs import KeyShape, host_needs
    return host_needs(KeyShape.of_header(read_header(fixture / "circuit_final.zkey")), "cpu", threads=1)


def _small_worker(queue, group):
    """A CPU worker in `group` whose limit then leaves it room between the 2^10 key's needs and
    the 2^14 key's: it can hold the first, not the second."""
    small = queue.start_workers(1, prefix=group.prefix())
    small_id = queue.ready(small)[0]["worker"]
    group.set_limit(group.working_set_bytes() + (_needs(CHAIN) + _needs(BIG)) // 2)
    return small, small_id


def _waiting(job):
    st = job.status()
    return st if st.partitions and all(p.waiting for p in st.partitions) else None


def test_a_key_too_big_for_a_small_worker_waits_for_a_bigger_one_and_the_small_one_proves_what_fits(  # noqa: F811
        queue, tmp_path):
    assert _needs(BIG) - _needs(CHAIN) > 10 * MIB      # the two keys are far enough apart to tell
    with MemoryGroup(2 << 30) as group:
        small, small_id = _small_worker(queue, group)
        client = queue.client()
        big_job = client.submit(BIG / "circuit_final.zkey", [BIG / "witness.wtns"] * 2)
        # The small worker leaves both partitions without an attempt; no live worker has the
        # room, so they wait, saying what they need and what the largest worker has.
        st = wait_until(lambda: _waiting(big_job), 60, "the 2^14 partitions to wait for memory")
        waiting = st.partitions[0].waiting
        assert f"needs about {_needs(BIG) // MIB} MiB" in waiting and "the largest worker has" in waiting, waiting
        assert all(p.attempts == 0 for p in st.partitions)
        snap = metrics.snapshot(queue.r)
        assert snap["waiting_for_memory"] == 2 and snap["memory_needed_bytes"] >= _needs(BIG)
        status = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status", big_job.id], env=queue.env(),
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert "waiting: partition 0 needs about" in status.stdout, status.stdout

        # A worker without a limit appears: the reaper sends the partitions to it.
        big = queue.start_workers(1)
        big_id = queue.ready(big)[0]["worker"]
        result = big_job.wait(120)
        assert_snarkjs_accepts(result.partitions, BIG / "verification_key.json", tmp_path)
        assert {p.worker for p in result.partitions} == {big_id}
        assert all(p.attempts == 1 for p in big_job.status().partitions)
        big.kill()

        # The small worker still proves a job whose key fits it, and was never OOM-killed.
        fits = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS).wait(120)
        assert_snarkjs_accepts(fits.partitions, CHAIN / "verification_key.json", tmp_path)
        assert {p.worker for p in fits.partitions} == {small_id}
        assert group.oom_kills() == 0


def test_a_job_whose_key_no_worker_can_hold_fails_after_the_orphan_timeout_naming_the_sizes(  # noqa: F811
        queue, tmp_path):
    with MemoryGroup(2 << 30) as group:
        small, small_id = _small_worker(queue, group)
        client = queue.client()
        too_big = client.submit(BIG / "circuit_final.zkey", [BIG / "witness.wtns"] * 2)
        fits = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
        with pytest.raises(JobFailed) as info:
            too_big.wait(120)
        reason = str(info.value)
        assert f"needs about {_needs(BIG) // MIB} MiB" in reason and "the largest worker has" in reason, reason
        # Nothing else is lost: the job whose key fits is proved whole, by the small worker.
        result = fits.wait(120)
        assert_snarkjs_accepts(result.partitions, CHAIN / "verification_key.json", tmp_path)
        assert {p.worker for p in result.partitions} == {small_id}
        assert group.oom_kills() == 0


def test_the_admission_model_covers_the_measured_peak_of_a_proof():
    """bench/key_memory: a fresh process proves a fixture as a worker's pool child does; its
    peak resident set beyond its idle self must not exceed the model's estimate (admission
    would let a worker take a key it cannot hold), nor be far below it (a worker would refuse
    keys it can hold)."""
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "key_memory"), "--threads", "1",
                           str(FIXTURES / "bn128_chain_10"), str(FIXTURES / "keys" / "bn128_chain_14"),
                           str(FIXTURES / "bls12381_chain_12")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert len(rows) == 3, proc.stdout
    for name, _curve, _domain, _key, measured, model, ratio in rows:
        assert float(model) >= float(measured), (name, proc.stdout)
        assert float(model) <= 3 * float(measured) + 8, (name, proc.stdout)


# ---- an attempt that dies of memory: not counted, and its key kept from that worker ----------

def _slot_events(job, kind: str) -> list[dict]:
    return [e for p in job.status().partitions for e in p.events if e["event"] == kind]


def test_an_attempt_killed_by_the_oom_killer_is_not_counted_and_its_key_goes_to_a_bigger_worker(  # noqa: F811
        queue, tmp_path):
    # The production fault: a partition whose real memory exceeds the model's estimate. The
    # alloc fault touches 300 MiB inside each prove of the small worker; the model expects a
    # few MiB for the 2^10 key, so admission lets it claim, and its limit leaves it 150 MiB.
    # Key affinity is off: every partition the small worker takes goes through its admission.
    off = {"ZKQUEUE_KEY_AFFINITY": "0"}
    assert _needs(CHAIN) < 50 * MIB
    with MemoryGroup(2 << 30) as group:
        small = queue.start_workers(1, prefix=group.prefix(), fault="alloc:300", env=off)
        small_id = queue.ready(small)[0]["worker"]
        group.set_limit(group.working_set_bytes() + 150 * MIB)
        before = group.oom_kills()
        # A worker without a limit, slower (slow:1), so that the idle small one takes work.
        big = queue.start_workers(1, fault="slow:1", env=off)
        big_id = queue.ready(big)[0]["worker"]
        client = queue.client()
        job = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
        result = job.wait(180)
        assert group.oom_kills() > before, "the kernel's OOM killer never ran in the small worker's group"
        oom = _slot_events(job, "oom")
        assert oom and all(e["worker"] == small_id and e.get("refunded") for e in oom), oom
        assert "killed by the kernel's OOM killer" in oom[0]["reason"] and str(group.path) in oom[0]["reason"]
        # Not a strike against the partition: every partition's attempts count only the proof.
        assert all(p.attempts == 1 for p in job.status().partitions), [
            (p.attempts, [(e["event"], e.get("pid"), e.get("refunded")) for e in p.events])
            for p in job.status().partitions]
        assert {p.worker for p in result.partitions} == {big_id}
        assert_snarkjs_accepts(result.partitions, CHAIN / "verification_key.json", tmp_path)
        assert "died of memory: killed by the kernel's OOM killer" in small.log()

        # The small worker is not given that key again: it leaves each partition it takes.
        kills = group.oom_kills()
        again = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS)
        result = again.wait(180)
        assert {p.worker for p in result.partitions} == {big_id}
        assert not [e for e in _slot_events(again, "started") if e["worker"] == small_id]
        left = [e for e in _slot_events(again, "bounced") if f"worker {small_id} died of memory" in e["reason"]]
        assert left, _slot_events(again, "bounced")
        assert group.oom_kills() == kills
        assert_snarkjs_accepts(result.partitions, CHAIN / "verification_key.json", tmp_path)

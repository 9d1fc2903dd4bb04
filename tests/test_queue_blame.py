"""Blame exactly and keep the good proofs: a witness that does not satisfy the circuit fails
its own partition (on good evidence, or at once with the circuit's .r1cs), the other
partitions' proofs are delivered, nothing is quarantined; and a job whose record Redis lost
reads as lost, not as a typo."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import snarkjs_verifies
from queue_support import (CHAIN, PARTITIONS, ROOT, PrivateRedis, assert_snarkjs_accepts, queue,  # noqa: F401
                           slot_events, wait_until)

from zkqueue.coordinator import keys, quarantine
from zkqueue.coordinator.jobs import JobState, SlotState

ZKEY = CHAIN / "circuit_final.zkey"
VK = CHAIN / "verification_key.json"
R1CS = CHAIN / "circuit.r1cs"


def _unsatisfying_witness(tmp_path):
    """Partition 2's witness with one intermediate signal changed (still a field element):
    the right length and curve, but it no longer satisfies the circuit, as a witness computed
    with another version of the circuit's .wasm does not."""
    bad = tmp_path / "witness_2_stale_wasm.wtns"
    data = bytearray(PARTITIONS[2].read_bytes())
    data[-40] ^= 0x5A           # the low bytes of the second-to-last signal
    bad.write_bytes(bytes(data))
    return bad


def _invalid_at(st, index: int) -> list[float]:
    return [e["at"] for e in slot_events(st, index, "invalid")]


def test_a_bad_witness_on_a_one_build_fleet_fails_alone_and_the_others_are_delivered(queue, tmp_path):
    group = queue.start_workers(2)          # one build, two worker processes
    queue.ready(group)
    bad = _unsatisfying_witness(tmp_path)
    client = queue.client()
    job = client.submit(ZKEY, [PARTITIONS[0], PARTITIONS[1], bad, PARTITIONS[3]])
    result = job.wait(90)

    assert [p.index for p in result.partitions] == [0, 1, 3] and not result.complete
    assert_snarkjs_accepts(result.partitions, VK, tmp_path)
    [failure] = result.failed
    assert failure.index == 2
    assert bad.name in failure.reason and "does not satisfy the circuit's constraints" in failure.reason
    assert "2 workers" in failure.reason and "proved other witnesses of this key valid" in failure.reason
    st = job.status()
    assert st.state == JobState.DONE_WITH_FAILURES and st.partitions[2].state == SlotState.FAILED
    invalid = _invalid_at(st, 2)
    assert len(invalid) == 2 and len({e["worker"] for e in slot_events(st, 2, "invalid")}) == 2
    assert st.finished_at - invalid[-1] < 15.0, "judged at the second failed proof, not after a timeout"
    assert not slot_events(st, 2, "bounced") and not slot_events(st, 2, "parked")
    assert quarantine.quarantined(queue.r) == {} and not queue.r.hlen(keys.strikes())
    # The same workers go on with the next job.
    assert client.submit(ZKEY, PARTITIONS[:2]).wait(60).complete


def test_with_the_r1cs_the_broken_constraint_is_named_at_the_first_failed_proof(queue, tmp_path):
    group = queue.start_workers(2)
    queue.ready(group)
    bad = _unsatisfying_witness(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "submit", ZKEY, PARTITIONS[0],
                           PARTITIONS[1], bad, PARTITIONS[3], "--r1cs", R1CS, "--out", out, "--wait",
                           "--timeout", "90", "-q"], env=queue.env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3, proc.stderr + proc.stdout          # done with failures
    assert "done with 1 failed partition(s), 3 verified proofs" in proc.stdout
    [line] = [x for x in proc.stdout.splitlines() if x.strip().startswith("failed:")]
    assert "partition 2:" in line and bad.name in line and "does not satisfy constraint" in line, line
    for i in (0, 1, 3):
        assert snarkjs_verifies(VK, out / f"public_{i}.json", out / f"proof_{i}.json"), i
    assert not (out / "proof_2.json").exists()
    job_id = proc.stderr.split("submitted job ")[1].split()[0]
    st = queue.client().job(job_id).status()
    [first_invalid] = [e["at"] for e in slot_events(st, 2, "input_error")]
    assert len(slot_events(st, 2, "started")) == 1, "no second attempt: the .r1cs decided at once"
    assert st.finished_at - first_invalid < 5.0
    assert quarantine.quarantined(queue.r) == {}


def test_all_or_nothing_fails_the_job_at_the_first_failed_partition(queue, tmp_path):
    group = queue.start_workers(1)
    queue.ready(group)
    job = queue.client().submit(ZKEY, [PARTITIONS[0], _unsatisfying_witness(tmp_path)], r1cs=R1CS,
                                all_or_nothing=True)
    import pytest
    from zkqueue.coordinator.errors import JobFailed
    with pytest.raises(JobFailed, match="partition 1: .*witness_2_stale_wasm.wtns: the witness does not satisfy "
                                        "constraint"):
        job.wait(60)
    assert job.status().state == JobState.FAILED


def test_a_client_waiting_on_a_job_redis_lost_says_so_and_workers_go_on(queue):
    server = PrivateRedis()
    try:
        queue.redis_url, queue.r = server.url, server.r    # workers, client and helpers on the private Redis
        group = queue.start_workers(1, fault="slow:3")
        queue.ready(group)
        waiter = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "submit", ZKEY, *PARTITIONS[:2],
                                   "--wait", "-q"], env=queue.env(), cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        job = queue.client().job(waiter.stderr.readline().split("submitted job ")[1].split()[0])
        wait_until(lambda: slot_events(job.status(), 0, "started"), 30, "a partition to start")
        server.crash()                              # Redis restarts without its data
        server.start()
        restarted = time.monotonic()
        err = waiter.communicate(timeout=30)[1]
        assert time.monotonic() - restarted < 10.0
        assert waiter.returncode == 1, err                     # the failed-job code, not bad input (2)
        assert f"job {job.id} failed: its record is gone from Redis: Redis may have restarted without its data" \
               in err, err
        # The workers reconnect and serve the next job.
        assert queue.client().submit(ZKEY, PARTITIONS[:1]).wait(90).complete
        assert group.proc.poll() is None
    finally:
        for g in queue.groups:
            g.kill()
        server.close()

"""End to end through real worker processes: the CLI, snarkjs interop, priorities, timings."""

from __future__ import annotations

import subprocess
import sys

from conftest import snarkjs_verifies
from queue_support import CHAIN, PARTITIONS, ROOT, queue, slot_events, wait_until  # noqa: F401  (fixtures)

from zkqueue.coordinator.jobs import JobState


def test_four_partitions_on_two_cpu_workers_snarkjs_accepts_every_proof(queue, tmp_path):
    group = queue.start_workers(2)
    beats = queue.ready(group)
    assert len({b["worker"] for b in beats}) == 2
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "submit", CHAIN / "circuit_final.zkey",
                           *PARTITIONS, "--out", out, "--wait", "--timeout", "120"],
                          env=queue.env(), cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "4 verified proofs" in proc.stdout
    job_id = proc.stderr.split("submitted job ")[1].split()[0]
    for i in range(4):
        assert snarkjs_verifies(CHAIN / "verification_key.json", out / f"public_{i}.json", out / f"proof_{i}.json"), i

    st = queue.client().job(job_id).status()
    assert st.state == JobState.DONE
    assert {p.worker for p in st.partitions} <= {b["worker"] for b in beats}
    for p in st.partitions:
        assert len(slot_events(st, p.index, "proved")) == 1
        assert {"queued_s", "key_load_s", "prove_s", "verify_s", "total_s"} <= set(p.timings_s)
    assert {"queued_s", "prove_s", "verify_s", "total_s"} <= set(st.timings_s)

    status = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status", job_id], env=queue.env(),
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "done 4/4" in status.stdout, status.stdout + status.stderr
    listing = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status"], env=queue.env(),
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "2 live worker(s)" in listing.stdout and job_id[:12] in listing.stdout


def test_critical_partition_starts_before_waiting_normal_ones(queue):
    group = queue.start_workers(1, fault="slow:0.6")
    queue.ready(group)
    client = queue.client()
    normal = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[:3], priority="normal")
    wait_until(lambda: normal.status().partitions[0].state.value == "running", 30, "the first normal partition")
    critical = client.submit(CHAIN / "circuit_final.zkey", PARTITIONS[3:], priority="critical")
    critical.wait(60)
    normal.wait(60)
    n_st, c_st = normal.status(), critical.status()
    c_start = slot_events(c_st, 0, "started")[0]["at"]
    later = [slot_events(n_st, i, "started")[0]["at"] for i in (1, 2)]
    assert c_start < min(later), (c_start, later)

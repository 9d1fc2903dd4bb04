"""The start-up canary (workers/canary.py): a worker whose build proves wrong takes no work at
all, says so in `zkqueue status` and the metrics, and its supervisor does not restart it; a
good worker beside it proves the job."""

from __future__ import annotations

import subprocess
import sys

from queue_support import CHAIN, PARTITIONS, ROOT, assert_snarkjs_accepts, queue, wait_until  # noqa: F401
from zkqueue.coordinator import canary, metrics
from zkqueue.workers.exit_codes import ExitCode


def test_a_sabotaged_build_takes_no_partition_and_a_good_worker_proves_the_job(queue, tmp_path):  # noqa: F811
    # A wrong MSM inside the native backend (workers/faults.py: a bad build), at every size.
    bad = queue.start_workers(1, fault="msm-wrong")
    good = queue.start_workers(1)
    good_id = queue.ready(good)[0]["worker"]
    job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS)
    result = job.wait(120)

    # The bad worker's supervisor gives the device up: the canary failed, no restart loop.
    assert bad.proc.wait(60) == ExitCode.CANARY, bad.log()[-3000:]
    log = bad.log()
    assert "FAILED its canary" in log and "failed the start-up canary" in log and "not restarting" in log, log
    assert log.count("FAILED its canary") == 1, log      # started once: no restart
    failing = canary.failing(queue.r)
    assert len(failing) == 1, failing
    (fp_id, record), = failing.items()
    bad_id = record["worker"]
    assert "fault(msm-wrong)" in record["fingerprint"]["build"] and "fails verification" in record["reason"]

    # It took no partition: every attempt of the job was the good worker's.
    assert_snarkjs_accepts(result.partitions, CHAIN / "verification_key.json", tmp_path)
    assert {p.worker for p in result.partitions} == {good_id}
    events = [e for p in job.status().partitions for e in p.events]
    assert events and not [e for e in events if e.get("worker") == bad_id], events

    # An operator sees it: `zkqueue status` and the metrics name the failing build.
    status = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status"], env=queue.env(), cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert f"CANARY FAILED {fp_id}" in status.stdout and "fault(msm-wrong)" in status.stdout, status.stdout
    assert metrics.snapshot(queue.r)["canary_failed"].keys() == {fp_id}


def test_a_good_worker_passes_its_canary_and_clears_an_old_failure_of_its_build(queue):  # noqa: F811
    good = queue.start_workers(1)
    fp = queue.ready(good)[0]["fingerprint"]
    assert "passed its canary" in good.log()
    # A failure recorded for this very build earlier (a device since mended) is cleared when
    # the next worker of it passes.
    canary.record_failure(queue.r, fp, "old-worker", "bn128: an invalid proof", 0.1)
    again = queue.start_workers(1)
    queue.ready(again)
    wait_until(lambda: fp["id"] not in canary.failing(queue.r), 30, "the old failure to be cleared")

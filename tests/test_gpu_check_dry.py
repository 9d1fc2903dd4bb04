"""bench/gpu_check.sh --dry: every step of the GPU check that needs no GPU, run here.

The dry run takes the CUDA backend's real kernels on the host emulation
(ZKQUEUE_CUDA_EMULATION=1) through the same steps as on a GPU machine: kernel comparisons
with the CPU backend, `zkqueue prove --backend cuda` and verify on both curves, a real
redis-server with a CUDA worker and a CPU worker proving an 8-partition job, a 2^10 key made by
`zkqueue ptau beacon` + `zkqueue zkey new` and proved (the bigkey step), the timing
script, and the profile step's phase split of one MSM; only the GPU tests report SKIP. So a
first GPU run can fail only on GPU problems.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from queue_support import ROOT


def test_gpu_check_dry_run_passes_every_step_but_the_gpu_tests(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, GPU_CHECK_OUT=str(out), GPU_CHECK_PYTHON=sys.executable)
    env.pop("ZKQUEUE_REDIS_URL", None)
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=400)
    log = (out / "gpu_check.log").read_text() if (out / "gpu_check.log").exists() else proc.stdout
    assert proc.returncode == 0, log[-6000:] + proc.stderr[-2000:]
    summary = json.loads((out / "gpu_check.json").read_text())
    status = {s["step"]: s["status"] for s in summary["steps"]}
    assert status == {"setup": "PASS", "tests": "SKIP", "compare": "PASS", "prove": "PASS", "bigkey": "PASS",
                      "queue": "PASS", "time": "PASS", "profile": "PASS"}, summary["steps"]
    assert summary["dry"] and summary["passed"]
    # Each step says what it did, on one line.
    for line in ("PASS compare", "PASS prove", "PASS queue", "SKIP tests", "gpu_check: PASS"):
        assert line in log
    compare = summary["compare"]
    assert compare["mismatches"] == 0 and compare["compared"] >= 40 and compare["skipped"] == 0
    kinds = {r["what"] for r in compare["rows"]}
    assert kinds == {"msm_g1", "msm_g2", "ntt", "pointwise"}
    timing = summary["time"]
    assert timing["mismatches"] == 0
    assert {r["what"] for r in timing["rows"]} == {"msm_g1", "msm_g2", "ntt", "proof"}
    assert all(r.get("gpu_ms") is not None for r in timing["rows"]), timing["rows"]
    with_cpu = [r for r in timing["rows"] if r.get("cpu_ms") is not None]
    # The CPU reference ran beside the rest and its results equal the (emulated) GPU's.
    assert timing["cpu_reference_complete"] and len(with_cpu) >= 9 and all(r["ok"] for r in with_cpu), with_cpu
    queue = next(s for s in summary["steps"] if s["step"] == "queue")
    assert "8/8 proofs verified" in queue["detail"] and "cuda" in queue["detail"], queue
    # The bigkey step made a key here (chain_circuit.py, ptau beacon, zkey new) whose proof verifies.
    bigkey = next(s for s in summary["steps"] if s["step"] == "bigkey")
    assert "2^10 key" in bigkey["detail"] and "made here" in bigkey["detail"], bigkey
    assert "zkqueue verify OK" in bigkey["detail"] and "snarkjs verify OK" in bigkey["detail"], bigkey
    prove = next(s for s in summary["steps"] if s["step"] == "prove")
    assert "proved bn128 in" in prove["detail"] and "proved bls12381 in" in prove["detail"], prove
    # The profile step split one MSM into its phases (on the emulation's clock), result exact.
    phases = summary["profile"]["phases"]
    assert phases["ok"] and phases["launches"] >= 7 and phases["phases_ms"]["accumulate"] > 0, phases
    assert set(phases["phases_ms"]) == {"sort", "accumulate", "unit tree", "bucket reduction",
                                        "window combination"}, phases
    # Every timed row was checked exactly (folded MSMs and proofs, NTTs against the CPU).
    assert timing["unchecked"] == 0 and all(r["ok"] for r in timing["rows"]), timing["rows"]
    # The tests step left a record of each test (tests.xml), here every GPU test skipped.
    import xml.etree.ElementTree as ET
    cases = list(ET.parse(out / "tests.xml").iter("testcase"))
    assert len(cases) >= 100 and all(c.find("skipped") is not None for c in cases
                                     if "test_cuda_backend" in c.get("classname", ""))
    # What the script started (redis-server, two worker trees, the CPU reference) is gone.
    pgids = [int(x) for x in (out / "pgids.txt").read_text().split()]
    assert len(pgids) == 4
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process group {pgid} started by gpu_check.sh is still running")

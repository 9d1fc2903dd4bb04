"""bench/gpu_profile.py's pieces that need no GPU: the kernel -> phase map covers every MSM
kernel msm.cu defines, and ncu's details CSV is read into occupancy, pipe utilisation and the
top stall reasons (on text laid out as `ncu --csv --page details` writes it). The phase split
itself runs in gpu_check.sh --dry (tests/test_gpu_check_dry.py)."""

from __future__ import annotations

import sys

from conftest import ROOT
from zkqueue.groth16.backends import cuda_source

sys.path.insert(0, str(ROOT / "bench"))
import gpu_profile  # noqa: E402


def test_every_msm_kernel_has_a_phase():
    kernels = [k for unit in ("g1", "g2") for k in cuda_source.kernel_names(unit)]
    phases = {k: gpu_profile.phase_of(k) for k in kernels if k != "msm_small_g1" and k != "msm_small_g2"}
    assert phases and "other kernels" not in phases.values(), phases
    assert phases["msm_accumulate_g1"] == "accumulate" and phases["msm_combine_g2"] == "window combination"


HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(section, name, unit, value, kernel="msm_accumulate_g1"):
    return (f'"0","123","python3","host","{kernel}(unsigned long *, unsigned int *)","1","7","(256, 1, 1)",'
            f'"(3072, 1, 1)","0","9.0","{section}","{name}","{unit}","{value}"')


def test_ncu_summary_reads_occupancy_pipes_and_top_stalls():
    text = "\n".join([
        "==PROF== Connected to process 123",
        HEADER,
        row("Occupancy", "Achieved Occupancy", "%", "24.81"),
        row("Occupancy", "Theoretical Occupancy", "%", "25"),
        row("Compute Workload Analysis", "Issue Slots Busy", "%", "61.2"),
        row("Compute Workload Analysis", "FMA Pipe Utilization", "%", "58.3"),
        row("Warp State Statistics", "Stall Wait", "cycle", "1.1"),
        row("Warp State Statistics", "Stall Math Pipe Throttle", "cycle", "4.2"),
        row("Warp State Statistics", "Stall Long Scoreboard", "cycle", "2.5"),
        row("Warp State Statistics", "Stall Barrier", "cycle", "0.1"),
        row("Occupancy", "Achieved Occupancy", "%", "80.5", kernel="ntt_pass"),
        "==PROF== Disconnected from process 123",
    ])
    s = gpu_profile.ncu_summary(text)
    assert set(s) == {"msm_accumulate_g1", "ntt_pass"}
    acc = s["msm_accumulate_g1"]
    assert acc["occupancy"] == {"Achieved Occupancy": 24.81, "Theoretical Occupancy": 25.0}
    assert acc["pipes"] == {"Issue Slots Busy": 61.2, "FMA Pipe Utilization": 58.3}
    assert [n for n, _ in acc["top_stalls"]] == ["Stall Math Pipe Throttle", "Stall Long Scoreboard", "Stall Wait"]
    assert s["ntt_pass"]["occupancy"]["Achieved Occupancy"] == 80.5

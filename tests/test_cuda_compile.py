"""The CUDA kernels compile, with no GPU needed: nvcc for sm_90 (TEST_ARCHS: one is enough to
show they compile, and each costs minutes here; `bench/gpu_registers.py` compiles both
sm_80 and sm_90), and NVRTC when its library is installed (it is what the backend compiles
with on the GPU machine); and their registers, stack and spills are those of the checked
table bench/gpu_registers.tsv.

What is compiled is `groth16.backends.cuda_source.module_source(curve, unit)` with
`cuda_source.compile_options()`: exactly the translation units the backend hands to NVRTC.
Skipped only when nvcc (or, for the NVRTC test, libnvrtc) is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from zkqueue.groth16 import curves
from zkqueue.groth16.backends import cuda, cuda_source

sys.path.insert(0, str(ROOT / "bench"))
import gpu_registers  # noqa: E402

CURVES = (curves.BN128, curves.BLS12381)
UNITS = tuple(cuda_source.UNITS)
TEST_ARCHS = ("sm_90",)


@pytest.fixture(scope="module")
def nvcc_results(tmp_path_factory):
    """Compiles every (curve, unit, arch) once (minutes on two cores)."""
    if not gpu_registers.NVCC:
        pytest.skip("nvcc is not installed")
    return gpu_registers.compile_all(tmp_path_factory.mktemp("nvcc"), jobs=os.cpu_count(), archs=TEST_ARCHS)


@pytest.mark.parametrize("arch", TEST_ARCHS)
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_nvcc_compiles(nvcc_results, curve, unit, arch):
    proc, out = nvcc_results[(curve.name, unit, arch)]
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert out.stat().st_size > 0
    assert "error" not in proc.stderr.lower().replace("0 errors", "")
    # Every kernel the unit defines is in the binary.
    names = subprocess.run(["strings", str(out)], capture_output=True, text=True).stdout \
        if shutil.which("strings") else out.read_bytes().decode("latin-1")
    kernels = cuda_source.kernel_names(unit)
    assert kernels and all(k in names for k in kernels), [k for k in kernels if k not in names]


def test_register_table_is_current(nvcc_results):
    """Registers, stack, spills and shared memory of every kernel, curve and architecture
    equal bench/gpu_registers.tsv (regenerate it with bench/gpu_registers.py --write)."""
    fresh = gpu_registers.table_rows({k: gpu_registers.parse(proc.stderr + proc.stdout)
                                      for k, (proc, _) in nvcc_results.items()})
    key = lambda r: (r["curve"], r["unit"], r["arch"], r["kernel"])  # noqa: E731
    table = {key(r): r for r in gpu_registers.read_table() if r["arch"] in TEST_ARCHS}
    got = {key(r): r for r in fresh}
    assert set(got) == set(table), set(got) ^ set(table)
    differ = [(k, {c: (table[k][c], got[k][c]) for c in gpu_registers.COLUMNS[4:] if table[k][c] != got[k][c]})
              for k in got if any(table[k][c] != got[k][c] for c in gpu_registers.COLUMNS[4:])]
    assert not differ, differ


def test_no_kernel_spills_and_g1_accumulates_in_registers():
    """No spills anywhere; G1's bucket accumulation keeps its points in registers: its only
    stack is one XYZZ point (4 coordinates), the argument of the call to the doubling that an
    addition of a point to itself needs (a rare path)."""
    rows = gpu_registers.read_table()
    assert rows and all(r["spill_bytes"] == 0 for r in rows), [r for r in rows if r["spill_bytes"]]
    g1 = {(r["curve"], r["arch"]): r for r in rows if r["kernel"] == "msm_accumulate_g1"}
    assert len(g1) == 4, g1
    for (curve, _), r in g1.items():
        assert r["stack_bytes"] <= 4 * curves.by_name(curve).n8q, r


@pytest.mark.parametrize("unit", cuda_source.PRODUCTION_UNITS)
@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_nvrtc_compiles(curve, unit):
    from zkqueue.groth16.backends import cuda_compile
    try:
        cuda_compile.nvrtc()
    except cuda_compile.KernelCompileError as exc:
        pytest.skip(f"libnvrtc is not installed: {exc}")
    cubin, _ = cuda_compile.compile_source(cuda_source.module_source(curve, unit), f"zkq_{curve.name}_{unit}.cu",
                                           cuda_compile.options("sm_90"))
    assert cubin[:4] == b"\x7fELF"


# ---- the cubin cache (no compiler needed: NVRTC's call is replaced) ------------------------

@pytest.fixture
def settings(monkeypatch):
    """Sets ZKQUEUE_* variables for this test and has zkqueue.config read them again."""
    from zkqueue import config

    def setenv(**values):
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        config.set_process(None)

    yield setenv
    monkeypatch.undo()
    config.set_process(None)


@pytest.fixture
def fake_nvrtc(tmp_path, monkeypatch, settings):
    """cuda_compile with a stand-in compile_source that records what it is asked to compile."""
    from zkqueue.groth16.backends import cuda_compile
    settings(ZKQUEUE_CACHE_DIR=str(tmp_path / "cache"))
    monkeypatch.setattr(cuda_compile, "nvrtc_version", lambda: "12.9")
    calls = []

    def compile_source(text, name, options):
        calls.append((name, tuple(options)))
        return b"\x7fELF" + text.encode()[:64], ""

    monkeypatch.setattr(cuda_compile, "compile_source", compile_source)
    return cuda_compile, calls


def test_cubins_are_cached_by_source_arch_and_nvrtc(fake_nvrtc, tmp_path, monkeypatch):
    cuda_compile, calls = fake_nvrtc
    path, seconds = cuda_compile.cubin(curves.BN128, "g1", "sm_90")
    assert path.read_bytes().startswith(b"\x7fELF") and oct(path.stat().st_mode & 0o777) == "0o644"
    assert cuda_compile.cubin(curves.BN128, "g1", "sm_90") == (path, 0.0) and len(calls) == 1   # a hit
    assert cuda_compile.cubin(curves.BN128, "g1", "sm_80")[0] != path                          # per arch
    monkeypatch.setattr(cuda_compile, "nvrtc_version", lambda: "13.0")
    assert cuda_compile.cubin(curves.BN128, "g1", "sm_90")[0] != path                          # per NVRTC
    # An edited header changes every unit's key (the text embeds the sources' hash).
    copy = tmp_path / "kernels"
    shutil.copytree(cuda_source.KERNEL_DIR, copy, ignore=shutil.ignore_patterns("cpu"))
    (copy / "field.cuh").write_text((copy / "field.cuh").read_text() + "\n// edit\n")
    monkeypatch.setattr(cuda_source, "KERNEL_DIR", copy)
    monkeypatch.setattr(cuda_compile, "nvrtc_version", lambda: "12.9")
    assert cuda_compile.cubin(curves.BN128, "g1", "sm_90")[0] != path
    assert all("--gpu-architecture=sm_" in opts[-1] for _, opts in calls)


def test_prebuild_compiles_every_unit_of_both_curves(fake_nvrtc):
    cuda_compile, calls = fake_nvrtc
    rows = cuda_compile.prebuild(("sm_80", "sm_90"), jobs=2)
    assert {(c, u, a) for c, u, a, _ in rows} == {(c.name, u, a) for c in CURVES for u in cuda_source.PRODUCTION_UNITS
                                                  for a in ("sm_80", "sm_90")}
    assert len(calls) == 12 and cuda_compile.prebuild(("sm_80", "sm_90"))[0][3] == 0.0


def test_nvrtc_lookup_names_what_it_tried(monkeypatch, tmp_path, settings):
    from zkqueue.groth16.backends import cuda_compile
    settings(ZKQUEUE_NVRTC_LIB=str(tmp_path / "libnvrtc.so.99"))
    assert cuda_compile._candidates()[0] == str(tmp_path / "libnvrtc.so.99")
    monkeypatch.setattr(cuda_compile, "_candidates", lambda: [str(tmp_path / "libnvrtc.so.99")])
    monkeypatch.setattr(cuda_compile, "_lib", None)
    with pytest.raises(cuda_compile.KernelCompileError, match="libnvrtc.so.99"):
        cuda_compile.nvrtc()
    assert cuda.cupy_error_kind(cuda_compile.KernelCompileError("x")) == "device"

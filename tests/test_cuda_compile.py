"""The CUDA kernels compile, with no GPU needed: nvcc for sm_80 and sm_90, and NVRTC when
its library is installed (it is what CuPy compiles with on the GPU machine).

What is compiled is `groth16.backends.cuda.module_source(curve)`: every .cu file of
groth16/kernels with its headers, exactly the translation unit the backend hands to
NVRTC. Skipped only when nvcc (or, for the NVRTC test, libnvrtc) is absent.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from zkqueue.groth16 import curves
from zkqueue.groth16.backends import cuda

ARCHS = ("sm_80", "sm_90")
CURVES = (curves.BN128, curves.BLS12381)
NVCC = os.environ.get("NVCC") or shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc",) if Path(p).exists()), None)


@pytest.fixture(scope="module")
def nvcc_results(tmp_path_factory):
    """Compiles every (curve, arch) at once (a minute or two each; both cores busy)."""
    if not NVCC:
        pytest.skip("nvcc is not installed")
    tmp = tmp_path_factory.mktemp("nvcc")

    def one(curve, arch):
        src = tmp / f"zkq_{curve.name}.cu"
        if not src.exists():
            src.write_text(cuda.module_source(curve))
        out = tmp / f"zkq_{curve.name}_{arch}.cubin"
        proc = subprocess.run([NVCC, "-std=c++17", f"-I{cuda.KERNEL_DIR}", f"-arch={arch}", "-cubin",
                               "-Xptxas", "-v", "-o", str(out), str(src)], capture_output=True, text=True)
        return proc, out

    for curve in CURVES:
        (tmp / f"zkq_{curve.name}.cu").write_text(cuda.module_source(curve))
    jobs = [(c, a) for c in CURVES for a in ARCHS]
    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda job: one(*job), jobs))
    return {(c.name, a): r for (c, a), r in zip(jobs, results)}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_nvcc_compiles(nvcc_results, curve, arch):
    proc, out = nvcc_results[(curve.name, arch)]
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert out.stat().st_size > 0
    assert "error" not in proc.stderr.lower().replace("0 errors", "")
    # Every kernel the backend launches is in the binary.
    names = subprocess.run(["strings", str(out)], capture_output=True, text=True).stdout \
        if shutil.which("strings") else out.read_bytes().decode("latin-1")
    for kernel in ("fr_mul", "fr_h_scalars", "fr_evaluate_ab", "check_g1", "check_g2", "ntt_bitrev",
                   "ntt_stage", "fr_scale", "msm_count", "msm_scatter"):
        assert kernel in names
    for group in ("g1", "g2"):
        for stem in ("msm_level_points", "msm_level_parts", "msm_window_parts", "msm_window_sums", "msm_finish"):
            assert f"{stem}_{group}" in names


def _nvrtc_library():
    """libnvrtc from $ZKQUEUE_NVRTC_LIB, an nvidia-cuda-nvrtc wheel (CUDA 13: nvidia/cu13/lib,
    CUDA 12: nvidia/cuda_nvrtc/lib, as cupy-cuda12x uses it), or the system; None if absent."""
    candidates = [os.environ.get("ZKQUEUE_NVRTC_LIB")]
    try:
        import nvidia  # type: ignore[import-not-found]  (namespace package of NVIDIA's wheels)
        for root in map(Path, nvidia.__path__):
            for sub in ("cu13/lib", "cuda_nvrtc/lib"):
                candidates += sorted(str(p) for p in (root / sub).glob("libnvrtc.so.*"))
    except ImportError:
        pass
    candidates.append(ctypes.util.find_library("nvrtc"))
    for path in filter(None, candidates):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_nvrtc_compiles(curve):
    lib = _nvrtc_library()
    if lib is None:
        pytest.skip("libnvrtc is not installed (pip install nvidia-cuda-nvrtc, or set ZKQUEUE_NVRTC_LIB)")
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), cuda.module_source(curve).encode(), b"zkq.cu",
                                  0, None, None) == 0
    opts = [*cuda.compile_options(), "--gpu-architecture=compute_90"]
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0, log.value.decode(errors="replace")[-6000:]

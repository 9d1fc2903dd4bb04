"""Build-time check of the GPU image (Dockerfile, GPU=1); needs no GPU and no driver.

Asserts that CuPy imports, that NVRTC and the CUDA runtime are the libraries of the
nvidia-cuda-*-cu12 wheels in this environment (not something the host might mount), and
that NVRTC compiles zkqueue's own CUDA modules for both curves to PTX for the oldest
architecture docs/gpu.md supports. (The image's next build step compiles them to cubins for
sm_80 and sm_90 into the cache: groth16/backends/cuda_compile.py.) A GPU worker would
otherwise find a missing or broken NVRTC only at its first partition.
Exits non-zero with the reason on any failure.
"""

from __future__ import annotations

import ctypes
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ARCH = "compute_70"   # the oldest architecture docs/gpu.md supports


def loaded_libraries() -> list[str]:
    """Paths of the shared libraries mapped into this process."""
    return sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                   if ".so" in line})


def from_wheel(name: str) -> str:
    """The loaded library called `name`, which must come from an nvidia wheel's folder."""
    hits = [p for p in loaded_libraries() if Path(p).name.startswith(name)]
    if not hits:
        sys.exit(f"gpu image check: {name} is not loaded")
    if not all("/site-packages/nvidia/" in p for p in hits):
        sys.exit(f"gpu image check: {name} was loaded from {hits}, expected the nvidia wheel in site-packages")
    return hits[0]


def compile_module(curve) -> tuple[str, float, int]:
    """Every production unit of one curve (groth16/backends/cuda_source.py, UNITS) to PTX."""
    from cupy.cuda import nvrtc

    from zkqueue.groth16.backends import cuda_source
    start, size = time.monotonic(), 0
    for unit in cuda_source.PRODUCTION_UNITS:
        prog = nvrtc.createProgram(cuda_source.module_source(curve, unit), f"zkq_{curve.name}_{unit}.cu", [], [])
        try:
            nvrtc.compileProgram(prog, [*cuda_source.compile_options(), f"-arch={ARCH}"])
        except nvrtc.NVRTCError as exc:
            sys.exit(f"gpu image check: NVRTC failed on the {curve.name} {unit} kernels: {exc}\n"
                     f"{nvrtc.getProgramLog(prog)[-4000:]}")
        size += len(nvrtc.getPTX(prog))
    return curve.name, time.monotonic() - start, size


def main() -> None:
    import cupy
    from cupy.cuda import nvrtc, runtime

    from zkqueue.groth16 import curves

    nvrtc_version = nvrtc.getVersion()
    nvrtc_path = from_wheel("libnvrtc.so")
    runtime_version = runtime.runtimeGetVersion()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(compile_module, (curves.BN128, curves.BLS12381)))
    from_wheel("libnvrtc-builtins")          # loaded by NVRTC at the first compile
    cudart = Path(nvrtc_path).parents[2] / "cuda_runtime" / "lib" / "libcudart.so.12"
    ctypes.CDLL(str(cudart))
    from_wheel("libcudart.so")
    print(f"gpu image check: CuPy {cupy.__version__}, NVRTC {nvrtc_version[0]}.{nvrtc_version[1]} "
          f"({nvrtc_path}), CUDA runtime {runtime_version}; "
          + ", ".join(f"{name} kernels -> {ARCH} PTX ({size} bytes, {s:.0f} s)" for name, s, size in results))


if __name__ == "__main__":
    main()

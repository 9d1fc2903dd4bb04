"""Host emulation of the CUDA backend's runtime: the real .cu kernels, compiled by g++.

`CudaBackend(curve, runtime=EmulatedRuntime(curve))` runs every kernel of
groth16/kernels/*.cu, in the order and with the arguments the backend uses on a GPU, as
plain C++ on the CPU with numpy arrays standing in for device arrays. The kernels are
grid-stride loops, so the emulation launches each one as a grid of one block of one thread
(device.cuh), which then does all the work. Field and point arithmetic use the GPU's 32-bit
limbs.

What this checks: the arithmetic, the algorithms (digit recoding, counting sort, the
segmented bucket sum, window reduction, NTT stages, CSR evaluation), the host
orchestration in cuda.py, and that the concatenated module is valid C++. What it cannot:
races between threads, the warp-level atomics (device.cuh's CUDA branch), NVRTC itself and
launch limits; those need a GPU (tests/test_cuda_backend.py, bench/gpu_check.sh).

Slow (one core, no parallelism): for tests on small inputs only.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ..curves import Curve
from ..errors import NativeBuildError
from ..native import cache_dir
from .cuda import KERNEL_DIR, module_source

CXX_FLAGS = ("-O1", "-std=c++17", "-fPIC", "-shared", "-w")

_lock = threading.Lock()
_libs: dict[str, ctypes.CDLL] = {}


def build(curve: Curve) -> Path:
    """Compiles the curve's CUDA module as a host shared library (cached by source hash)."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise NativeBuildError("no C++ compiler for the CUDA emulation", expected="g++", found="none")
    source = module_source(curve)
    key = hashlib.sha256((source + cxx + " ".join(CXX_FLAGS)).encode()).hexdigest()[:20]
    target = cache_dir() / "cuda-emu" / key / f"zkq_cuda_emu_{curve.name}.so"
    if target.exists():
        return target
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent.parent))
    try:
        out = tmp / target.name
        proc = subprocess.run([cxx, *CXX_FLAGS, "-x", "c++", "-I", str(KERNEL_DIR), "-", "-o", str(out)],
                              input=source, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"the CUDA kernels do not compile as C++ for the emulation:\n"
                                   f"{proc.stderr[-4000:]}")
        try:
            tmp.rename(target.parent)
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _arg(a):
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise ValueError("emulated kernel arguments must be contiguous arrays")
        return ctypes.c_void_p(a.ctypes.data)
    if isinstance(a, np.uint64):
        return ctypes.c_uint64(int(a))
    if isinstance(a, np.uint32):
        return ctypes.c_uint32(int(a))
    if isinstance(a, np.int32):
        return ctypes.c_int32(int(a))
    raise TypeError(f"unsupported kernel argument {type(a).__name__}: pass numpy arrays or numpy scalars")


class EmulatedDeviceError(RuntimeError):
    """A device failure in the emulation (a CUDA runtime or driver error on a GPU).

    The g++-compiled kernels cannot fail the way a GPU does; tests raise this from a
    runtime's launch to drive the backend's error handling.
    """


class EmulatedRuntime:
    """The CupyRuntime interface over numpy arrays and the g++-compiled kernels."""

    xp = np

    def __init__(self, curve: Curve):
        path = str(build(curve))
        with _lock:
            if path not in _libs:
                _libs[path] = ctypes.CDLL(path)
            self.lib = _libs[path]
        self.launches: list[str] = []  # kernel names in launch order (tests look at it)

    def active(self):
        return nullcontext()

    def launch(self, name: str, threads: int, args: tuple, *, block: int = 256) -> None:
        self.launches.append(name)
        fn = getattr(self.lib, name)
        fn.restype = None
        fn(*(_arg(a) for a in args))

    def upload(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True, order="C")

    def download(self, dev: np.ndarray) -> np.ndarray:
        return np.array(dev, copy=True, order="C")

    def synchronize(self) -> None:
        pass

    def free_pool(self) -> None:
        pass

    def memory(self) -> dict[str, int]:
        return {"device_free_bytes": 1 << 34, "device_total_bytes": 1 << 34, "pool_used_bytes": 0,
                "pool_held_bytes": 0}

    def error_kind(self, exc: BaseException) -> str | None:
        """As CupyRuntime.error_kind: host memory stands in for the device's, and
        EmulatedDeviceError for a CUDA runtime or driver error; anything else is a bug."""
        if isinstance(exc, MemoryError):
            return "oom"
        if isinstance(exc, EmulatedDeviceError):
            return "device"
        return None

    def describe(self) -> str:
        return "host emulation (g++)"

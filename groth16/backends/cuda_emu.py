"""Host emulation of the CUDA backend's runtime: the real .cu kernels, compiled by g++, run
as blocks of virtual threads with their data races checked.

`CudaBackend(curve, runtime=EmulatedRuntime(curve))` runs every kernel of
groth16/kernels/*.cu, in the order and with the arguments the backend uses on a GPU, as
C++ on the CPU with numpy arrays standing in for device arrays. Each launch runs as the
blocks of threads a GPU would run (up to MAX_GRID blocks; the kernels' grid-stride loops
cover the rest), blocks in a random order and the threads of a block as fibers in a random
order; warp operations complete in lockstep over the warp's 32 lanes, __syncthreads over
the block. Every load and store of an argument array is checked against an ownership
record (groth16/kernels/emu.cuh): a write-write, read-after-write or write-after-read
between two threads of one launch, and any access outside the arguments, fail the launch
with EmulatedRaceError naming the kernel, the threads and the argument.

What this checks: the arithmetic on the GPU's 32-bit limbs (the portable path; the PTX
carry chains run as an exact model in the self-test), the algorithms, the warp-aggregated
atomics, shared-memory passes with their barriers, the host orchestration in cuda.py, and
that kernels do not race. What it cannot: NVRTC and PTX themselves, memory ordering a GPU
would add, launch limits, timing; those need a GPU (tests/test_cuda_backend.py,
bench/gpu_check.sh).

Slow (one core): for tests on small inputs only.
"""

from __future__ import annotations

import ctypes
import hashlib
import random
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ..curves import Curve
from ..errors import NativeBuildError
from . import cuda_source
from .cuda_compile import cache_dir

CXX_FLAGS = ("-O1", "-std=c++17", "-fPIC", "-shared", "-w")
MAX_GRID = 8          # blocks per launch at most (grid-stride kernels cover the rest)
ERROR_BYTES = 1024

_lock = threading.Lock()
_libs: dict[str, ctypes.CDLL] = {}


class EmulatedDeviceError(RuntimeError):
    """A device failure in the emulation (a CUDA runtime or driver error on a GPU).

    The g++-compiled kernels cannot fail the way a GPU does; tests raise this from a
    runtime's launch to drive the backend's error handling.
    """


class EmulatedRaceError(RuntimeError):
    """A kernel raced with itself (or read out of bounds, or misused a warp operation or
    barrier) in the emulation. A bug in a kernel: never converted into a backend error."""


class _Region(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("bytes", ctypes.c_uint64)]


class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint64), ("block", ctypes.c_uint64), ("seed", ctypes.c_uint64),
                ("dyn_shared_bytes", ctypes.c_uint64), ("n_regions", ctypes.c_uint64),
                ("regions", ctypes.POINTER(_Region)), ("error", ctypes.c_char_p), ("error_cap", ctypes.c_uint64)]


def _compiler() -> str:
    from zkqueue import config
    cxx = config.compiler() or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise NativeBuildError("no C++ compiler for the CUDA emulation", expected="g++", found="none")
    return cxx


def build(curve: Curve, unit: str) -> Path:
    """Compiles one module unit of a curve (cuda_source.UNITS) as a host shared library, cached
    by the hash of its text, the compiler and the flags."""
    cxx = _compiler()
    source = cuda_source.module_source(curve, unit)
    key = hashlib.sha256((source + cxx + " ".join(CXX_FLAGS)).encode()).hexdigest()[:20]
    target = cache_dir() / "cuda-emu" / key / f"zkq_emu_{curve.name}_{unit}.so"
    if target.exists():
        return target
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent.parent))
    try:
        out = tmp / target.name
        proc = subprocess.run([cxx, *CXX_FLAGS, "-x", "c++", "-I", str(cuda_source.KERNEL_DIR), "-", "-o", str(out)],
                              input=source, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"the CUDA kernels ({curve.name}, {unit}) do not compile as C++ for the "
                                   f"emulation:\n{proc.stderr[-4000:]}")
        try:
            tmp.rename(target.parent)
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _load(path: Path) -> ctypes.CDLL:
    with _lock:
        if str(path) not in _libs:
            _libs[str(path)] = ctypes.CDLL(str(path))
        return _libs[str(path)]


_SCALARS = {np.uint64: ("Q", ctypes.c_uint64), np.uint32: ("I", ctypes.c_uint32), np.int32: ("i", ctypes.c_int32)}


class EmulatedRuntime:
    """The CupyRuntime interface over numpy arrays and the g++-compiled kernels."""

    xp = np

    def __init__(self, curve: Curve, *, seed: int | None = None, units: tuple[str, ...] = ("fr",)):
        """Builds `units` now (g++ side by side; a compile error surfaces here), the others
        at their first launch."""
        with ThreadPoolExecutor(max(1, len(units))) as pool:
            paths = dict(zip(units, pool.map(lambda u: build(curve, u), units)))
        self.curve = curve
        self._libs = {u: _load(p) for u, p in paths.items()}
        self._entries: dict[str, tuple] = {}
        self._rng = random.Random(seed)
        self.launches: list[str] = []  # kernel names in launch order (tests look at it)

    def active(self):
        return nullcontext()

    def stream(self):
        """A stream context (the emulation runs everything in order)."""
        return nullcontext()

    def record(self):
        """An event marking the work launched so far (nothing to wait for here)."""
        return None

    def wait(self, event) -> None:
        pass

    def _entry(self, name: str):
        hit = self._entries.get(name)
        if hit is None:
            unit = cuda_source.unit_of(name)
            if unit not in self._libs:
                self._libs[unit] = _load(build(self.curve, unit))
            lib = self._libs[unit]
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.POINTER(_Launch), ctypes.c_void_p]
            sig_fn = getattr(lib, f"{name}_zkq_signature")
            sig_fn.restype = ctypes.c_char_p
            hit = self._entries[name] = (fn, sig_fn().decode())
        return hit

    def launch(self, name: str, threads: int, args: tuple, *, block: int = 256, grid: int | None = None,
               shared_bytes: int = 0) -> None:
        """Runs kernel `name` as `grid` blocks (default: enough for `threads`, at most MAX_GRID)
        of `block` threads, checking every access. Raises EmulatedRaceError when it races."""
        self.launches.append(name)
        fn, sig = self._entry(name)
        if len(sig) != len(args):
            raise TypeError(f"{name} takes {len(sig)} arguments ({sig}), {len(args)} given")
        keep, regions = [], (_Region * max(1, len(args)))()
        argv = (ctypes.c_void_p * max(1, len(args)))()
        for i, (kind, a) in enumerate(zip(sig, args)):
            if kind == "p":
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"{name} argument {i} must be an array, not {type(a).__name__}")
                if not a.flags.c_contiguous:
                    raise ValueError(f"{name} argument {i}: emulated kernel arrays must be contiguous")
                value = ctypes.c_void_p(a.ctypes.data)
                regions[i] = _Region(a.ctypes.data, a.nbytes)
            else:
                want = next((k for t, (k, _) in _SCALARS.items() if isinstance(a, t)), None)
                if want != kind:
                    raise TypeError(f"{name} argument {i} must be of kind {kind!r} (signature {sig}), "
                                    f"not {type(a).__name__}")
                value = _SCALARS[type(a)][1](int(a))
            keep.append(value)
            argv[i] = ctypes.cast(ctypes.pointer(value), ctypes.c_void_p)
        blocks = grid if grid is not None else max(1, min(-(-threads // block), MAX_GRID))
        error = ctypes.create_string_buffer(ERROR_BYTES)
        launch = _Launch(blocks, block, self._rng.getrandbits(63) | 1, shared_bytes, len(args),
                         ctypes.cast(regions, ctypes.POINTER(_Region)), ctypes.cast(error, ctypes.c_char_p),
                         ERROR_BYTES)
        if fn(ctypes.byref(launch), argv) != 0:
            raise EmulatedRaceError(error.value.decode(errors="replace"))

    def upload(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True, order="C")

    def upload_async(self, host: np.ndarray):
        """(device copy, event): as CupyRuntime's copy on the copy stream."""
        return self.upload(host), None

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
        EmulatedDeviceError for a CUDA runtime or driver error; anything else (a race
        included) is a bug."""
        if isinstance(exc, MemoryError):
            return "oom"
        if isinstance(exc, EmulatedDeviceError):
            return "device"
        return None

    def describe(self) -> str:
        return "host emulation (g++, threaded)"

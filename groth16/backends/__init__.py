"""Proving backends: one small interface (NTT, MSM on G1 and G2, pointwise field ops).

`get_backend("cpu" | "cuda" | "auto", curve)` picks one. A GPU that is asked for and
missing is an error, never a silent CPU fallback; "auto" logs what it chose and why.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

from ..curves import Curve
from ..errors import BackendUnavailable

if TYPE_CHECKING:  # .base imports numpy; `zkqueue prove --backend auto` on a CPU stays numpy-free
    from .base import Backend

log = logging.getLogger("zkqueue.backend")

BACKENDS = ("cpu", "cuda", "auto")
MIN_COMPUTE_CAPABILITY = (7, 0)  # the MSM's warp-aggregated atomics use __match_any_sync


def cuda_device() -> int:
    """The device ordinal the CUDA backend pins: $ZKQUEUE_CUDA_DEVICE, else 0 (of the visible
    ones), as zkqueue.config reads it."""
    from zkqueue import config
    return config.process().cuda_device


EMULATION_ENV = "ZKQUEUE_CUDA_EMULATION"


def cuda_emulated() -> bool:
    """True when $ZKQUEUE_CUDA_EMULATION=1: "cuda" runs its kernels on the host emulation.

    For checking the GPU path without a GPU (bench/gpu_check.sh --dry, tests): slow, one
    core, and never chosen unless set; every backend it makes logs a warning.
    """
    from zkqueue import config
    return config.process().cuda_emulation


def cuda_preflight(driver_cuda_version: int | None = None) -> tuple[bool, str]:
    """(plausible, reason): what a parent process may check before it forks the one that proves.

    A process that initialises CUDA cannot hand a usable CUDA to a child it forks afterwards,
    so a Celery parent must not call cuda_status(). This checks, without importing cupy or
    loading any CUDA library, that a CuPy distribution is installed and its package can be
    found, and, when the driver's CUDA version is given (NVML's nvmlSystemGetCudaDriverVersion,
    e.g. 12040 for 12.4), that the driver is new enough for the CUDA major CuPy was built for.
    The full check (device, compute capability, NVRTC) is cuda_status(), in the child.
    """
    if cuda_emulated():
        return True, f"host emulation of the CUDA kernels (${EMULATION_ENV}=1)"
    from .cuda_compile import cupy_distribution  # light: no CuPy, no CUDA library
    dist = cupy_distribution()
    if dist is None or importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (pip install cupy-cuda12x or cupy-cuda13x)"
    name, version, major = dist
    found = f"{name} {version}"
    if driver_cuda_version:
        driver_major = driver_cuda_version // 1000
        driver_text = f"{driver_major}.{driver_cuda_version % 1000 // 10}"
        if major is not None and driver_major < major:
            return False, (f"{found} needs a driver for CUDA {major}, but the driver supports CUDA "
                           f"{driver_text} (upgrade the driver or install cupy-cuda{driver_major}x)")
        found += f", driver for CUDA {driver_text}"
    return True, found


def cuda_status(device: int | None = None) -> tuple[bool, str]:
    """(usable, reason): whether the CUDA kernels can run here, and what was found.

    Checks that CuPy imports, a driver answers, the device exists and is new enough, and
    NVRTC loads. It initialises CUDA in the calling process, so call it where the proving
    happens (a worker's child process), not in a parent that forks afterwards.
    """
    if cuda_emulated():
        return True, f"host emulation of the CUDA kernels (${EMULATION_ENV}=1; no GPU is used)"
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install cupy-cuda12x or cupy-cuda13x)"
    except Exception as exc:  # noqa: BLE001 - a broken install says why in its message
        return False, f"CuPy does not import: {type(exc).__name__}: {exc}"
    dev = cuda_device() if device is None else device
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no driver, no device, driver too old
        return False, f"no usable CUDA driver or device: {exc}"
    if count == 0:
        return False, "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)"
    if not 0 <= dev < count:
        return False, f"CUDA device {dev} was asked for but {count} device(s) are visible"
    try:
        props = cupy.cuda.runtime.getDeviceProperties(dev)
        nvrtc = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:  # noqa: BLE001
        return False, f"CUDA device {dev} or NVRTC does not answer: {exc}"
    from .cuda_compile import KernelCompileError, nvrtc_version
    try:   # the NVRTC the kernels' cubins are compiled with (cuda_compile.py)
        cubin_nvrtc = nvrtc_version()
    except KernelCompileError as exc:
        return False, f"the CUDA kernels cannot be compiled here: {exc}"
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    cc = (props["major"], props["minor"])
    if cc < MIN_COMPUTE_CAPABILITY:
        return False, (f"device {dev} ({name}) has compute capability {cc[0]}.{cc[1]}; the kernels need "
                       f"{MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]} or newer")
    mem_gib = props["totalGlobalMem"] / 2**30
    return True, (f"CuPy {cupy.__version__}, NVRTC {nvrtc[0]}.{nvrtc[1]} (kernels: {cubin_nvrtc}), {count} device(s); "
                  f"using device {dev}: {name} (sm_{cc[0]}{cc[1]}, {mem_gib:.0f} GiB)")


def get_backend(kind: str, curve: Curve, *, threads: int | None = None) -> Backend:
    """A backend of `kind` for `curve`.

    "cuda" must run on the GPU or fail; "auto" takes the GPU when cuda_status() says it
    is usable and its kernels compile, the CPU otherwise, and logs which and why.

    Raises:
        BackendUnavailable: "cuda" without a usable GPU (or kernels that do not compile
            there), or an unknown kind.
        NativeBuildError: the CPU kernels do not compile.
    """
    if kind not in BACKENDS:
        raise BackendUnavailable(f"unknown backend {kind!r}", expected=" | ".join(BACKENDS), found=kind)
    if kind in ("cuda", "auto"):
        usable, why = cuda_status()
        if kind == "cuda" and not usable:
            raise BackendUnavailable(f"backend 'cuda' was asked for but cannot run: {why}",
                                     expected="a CUDA device visible to CuPy", found=why)
        if usable:
            from .cuda import CudaBackend
            try:
                if cuda_emulated():
                    from .cuda_emu import EmulatedRuntime
                    log.warning("backend cuda on the host emulation ($%s=1): for checks, not for use", EMULATION_ENV)
                    return CudaBackend(curve, runtime=EmulatedRuntime(curve))
                backend = CudaBackend(curve, device=cuda_device())
            except BackendUnavailable as exc:
                if kind == "cuda":
                    raise
                log.warning("backend auto: using cpu: the GPU looked usable (%s) but failed: %s", why, exc)
            else:
                if kind == "auto":
                    log.info("backend auto: using cuda (%s)", why)
                return backend
        else:
            log.info("backend auto: using cpu (%s)", why)
    from .cpu import CpuBackend
    return CpuBackend(curve, threads=threads)

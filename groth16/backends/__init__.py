"""Proving backends: one small interface (NTT, MSM on G1 and G2, pointwise field ops).

`get_backend("cpu" | "cuda" | "auto", curve)` picks one. A GPU that is asked for and
missing is an error, never a silent CPU fallback; "auto" logs what it chose and why.
"""

from __future__ import annotations

import logging
import os

from ..curves import Curve
from ..errors import BackendUnavailable
from .base import Backend

log = logging.getLogger("zkqueue.backend")

BACKENDS = ("cpu", "cuda", "auto")
MIN_COMPUTE_CAPABILITY = (7, 0)  # the MSM's warp-aggregated atomics use __match_any_sync


def cuda_device() -> int:
    """The device ordinal the CUDA backend pins: $ZKQUEUE_CUDA_DEVICE, else 0 (of the visible ones)."""
    return int(os.environ.get("ZKQUEUE_CUDA_DEVICE", "0"))


def cuda_status(device: int | None = None) -> tuple[bool, str]:
    """(usable, reason): whether the CUDA kernels can run here, and what was found.

    Checks that CuPy imports, a driver answers, the device exists and is new enough, and
    NVRTC loads. It initialises CUDA in the calling process, so call it where the proving
    happens (a worker's child process), not in a parent that forks afterwards.
    """
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
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    cc = (props["major"], props["minor"])
    if cc < MIN_COMPUTE_CAPABILITY:
        return False, (f"device {dev} ({name}) has compute capability {cc[0]}.{cc[1]}; the kernels need "
                       f"{MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]} or newer")
    mem_gib = props["totalGlobalMem"] / 2**30
    return True, (f"CuPy {cupy.__version__}, NVRTC {nvrtc[0]}.{nvrtc[1]}, {count} device(s); using device {dev}: "
                  f"{name} (sm_{cc[0]}{cc[1]}, {mem_gib:.0f} GiB)")


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

"""A worker's fingerprint: enough to find the machine, device and build behind a proof.

`kernel_hash` names the sources that decide what the worker's device computes: for a CUDA
worker the .cu files, every .cuh header and the backend's Python modules that choose window
widths, splits, passes and kernel order (groth16.backends.cuda_source.source_hash: kernel_sources
and host_sources), for a CPU worker the shared headers and the C++ sources
(groth16.native.kernel_sources). `build` adds what turns
those sources into machine code: for the CPU the compiler, its flags and the CPU's features
(native.build_key); for CUDA the CuPy and NVRTC versions, the compile options, the driver
and the device name. So a change to msm.cu or cuda_msm.py changes every CUDA worker's hashes
and no CPU worker's, and a new NVRTC changes a CUDA worker's build.

Everything here is read from files and package metadata (NVRTC's version from its library
only when no wheel names it): nothing imports cupy or initialises CUDA, because the
Celery parent, which forks the process that proves, publishes the fingerprint.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib.metadata
import os
import socket
from functools import lru_cache

from .devices import Device

# NVRTC's wheels: CUDA 12's carry the suffix, CUDA 13's do not.
NVRTC_DISTRIBUTIONS = ("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu11")


def kernel_hash(backend: str) -> str:
    """Hash of the kernel sources that `backend` ("cpu" or "cuda") compiles and runs."""
    if backend == "cuda":
        from zkqueue.groth16.backends import cuda_source
        return cuda_source.source_hash()
    from zkqueue.groth16 import native
    return native.source_hash()


def nvrtc_version(cuda_major: int | None = None) -> str:
    """The NVRTC that CuPy will compile with, e.g. "12.9.86", or "unknown".

    Prefers the nvidia-cuda-nvrtc wheel of `cuda_major` (CuPy's CUDA major), then any NVRTC
    wheel, then the library on the loader's path (loading NVRTC does not initialise CUDA).
    """
    found = []
    for name in NVRTC_DISTRIBUTIONS:
        try:
            found.append(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
    for version in found:
        if cuda_major is not None and version.split(".")[0] == str(cuda_major):
            return version
    if found:
        return found[0]
    path = ctypes.util.find_library("nvrtc")
    if path:
        try:
            lib = ctypes.CDLL(path)
            major, minor = ctypes.c_int(), ctypes.c_int()
            if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
                return f"{major.value}.{minor.value}"
        except (OSError, AttributeError):
            pass
    return "unknown"


def cuda_toolchain() -> str:
    """"<CuPy distribution> <version>, NVRTC <version>": what compiles the CUDA kernels here."""
    from zkqueue.groth16.backends import cuda_emulated
    from zkqueue.groth16.backends.cuda_compile import cupy_distribution
    if cuda_emulated():
        return "host emulation of the CUDA kernels (g++), no GPU"
    dist = cupy_distribution()
    cupy = f"{dist[0]} {dist[1]}" if dist else "no CuPy"
    return f"{cupy}, NVRTC {nvrtc_version(dist[2] if dist else None)}"


def build_hash(backend: str, device: Device) -> str:
    """Hash of the kernel sources and everything that compiles them for this device.

    A CPU build names no device: the CPU's features are part of native.build_key.
    """
    if backend != "cuda":
        from zkqueue.groth16 import native
        try:
            return native.build_key()
        except Exception as exc:  # noqa: BLE001 - no compiler: the backend check reports it properly
            return f"unbuildable: {exc}"
    from zkqueue.groth16.backends import cuda_source
    h = hashlib.sha256()
    for part in (cuda_source.source_hash(), cuda_toolchain(), " ".join(cuda_source.NVRTC_OPTIONS), device.driver, device.name):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


@lru_cache(maxsize=None)
def _hashes(backend: str, device: Device) -> tuple[str, str, str]:
    toolchain = cuda_toolchain() if backend == "cuda" else ""
    return kernel_hash(backend), build_hash(backend, device), toolchain


def fingerprint(worker_id: str, device: Device, backend: str) -> dict:
    """host, device name, driver, backend, kernel source hash, build hash (and CUDA toolchain).

    Computed once per process and (backend, device): the sources cannot change under a
    running worker without a restart meaning to pick them up.
    """
    source, build, toolchain = _hashes(backend, device)
    fp = {"worker": worker_id, "host": socket.gethostname(), "pid": os.getpid(),
          "device": device.spec, "device_name": device.name, "driver": device.driver,
          "backend": backend, "kernel_hash": source, "build": build}
    if toolchain:
        fp["toolchain"] = toolchain
    return fp

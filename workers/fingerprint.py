"""A worker's fingerprint: enough to find the machine, device and build behind a proof."""

from __future__ import annotations

import os
import socket
from functools import lru_cache

from .devices import Device


@lru_cache(maxsize=None)
def _kernel_hashes(backend: str) -> tuple[str, str]:
    from groth16 import native
    source = native.source_hash()
    try:
        build = native.build_key() if backend == "cpu" else source
    except Exception as exc:      # no compiler: the backend check reports it properly
        build = f"unbuildable: {exc}"
    return source, build


def fingerprint(worker_id: str, device: Device, backend: str) -> dict:
    """host, device name, driver, backend, kernel source hash and build (sources + compiler)."""
    source, build = _kernel_hashes(backend)
    return {"worker": worker_id, "host": socket.gethostname(), "pid": os.getpid(),
            "device": device.spec, "device_name": device.name, "driver": device.driver,
            "backend": backend, "kernel_hash": source, "build": build}

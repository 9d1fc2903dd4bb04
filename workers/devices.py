"""Which devices this machine offers: GPUs through pynvml (NVML), or N CPU workers."""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass

log = logging.getLogger("zkqueue.devices")


@dataclass(frozen=True)
class Device:
    """One device a worker process owns: kind "cuda" or "cpu", and its index."""

    kind: str
    index: int
    name: str
    driver: str = ""
    uuid: str = ""

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.index}"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def discover_gpus() -> tuple[list[Device], str]:
    """(GPUs NVML sees, why none when empty). pynvml is the optional extra 'gpu'."""
    try:
        import pynvml
    except ImportError:
        return [], "pynvml is not installed (pip install 'zkqueue[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:   # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return [], f"NVML cannot start: {exc}"
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append(Device("cuda", i, _text(pynvml.nvmlDeviceGetName(h)), driver,
                              _text(pynvml.nvmlDeviceGetUUID(h))))
        return out, "" if out else "NVML reports no GPU"
    finally:
        pynvml.nvmlShutdown()


def cuda_driver_version() -> int | None:
    """The CUDA version the driver supports (e.g. 12040 for 12.4) from NVML; None if unknown.

    NVML only: safe in a parent process that forks the one that proves (CUDA is not
    initialised, no CUDA library is loaded).
    """
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, no driver: nothing to compare with
        return None
    try:
        get = getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2", None) or pynvml.nvmlSystemGetCudaDriverVersion
        return int(get())
    except Exception:  # noqa: BLE001 - an NVML too old to say
        return None
    finally:
        pynvml.nvmlShutdown()


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def plan(cpu_workers: int | None) -> tuple[list[Device], str]:
    """The devices to start one worker process each on: `cpu_workers` CPU workers when
    given, else every GPU. Returns (devices, why empty)."""
    if cpu_workers:
        name = cpu_name()
        return [Device("cpu", i, name, platform.release()) for i in range(cpu_workers)], ""
    return discover_gpus()


def cpu_device(index: int = 0) -> Device:
    return Device("cpu", index, cpu_name(), platform.release())


def device_from_spec(spec: str) -> Device:
    """Device for "cpu:N" or "cuda:N" (NVML index), as the supervisor passes it.

    Raises:
        ValueError: a malformed spec or a GPU index NVML does not know.
    """
    kind, _, idx = spec.partition(":")
    index = int(idx or 0)
    if kind == "cpu":
        return cpu_device(index)
    if kind == "cuda":
        gpus, why = discover_gpus()
        for g in gpus:
            if g.index == index:
                return g
        raise ValueError(f"no GPU {index}: {why or 'index out of range'}")
    raise ValueError(f"device spec {spec!r} is not cpu:N or cuda:N")

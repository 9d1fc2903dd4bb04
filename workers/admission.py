"""Memory admission: whether this worker can hold a partition of a key before it claims it.

A worker given a key it cannot hold is killed by the kernel's OOM killer mid-partition; the
partition goes back on the queue, the same or another small worker takes it and dies again,
and after ZKQUEUE_MAX_ATTEMPTS deaths it fails although a bigger worker could have proved it.
So a worker compares what the key needs (workers/key_needs.py, from the key's shape) with the
room it has: what its memory limit leaves available (workers/memory.py) plus the keys it holds
now, which it would evict first. A partition that does not fit is left for a worker that has
the room, without spending an attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

from .key_needs import KeyShape, device_needs, host_needs
from .memory import process_limit

MIB = 1 << 20


@dataclass(frozen=True)
class Verdict:
    """Whether a partition fits here: the bytes it needs and the room this worker has, in its
    host memory and, on a GPU worker whose device memory was read, on the device."""
    fits: bool
    needs_bytes: int
    room_bytes: int
    where: str          # what the room was read from: "cgroup v1 /sys/fs/...", "host RAM"
    device_needs_bytes: int = 0
    device_room_bytes: int | None = None    # None: not judged (a CPU worker, or no device reading)

    @property
    def device_short(self) -> bool:
        """The device, not the host, is what has no room."""
        return self.device_room_bytes is not None and self.device_needs_bytes > self.device_room_bytes

    def words(self) -> str:
        if self.device_short:
            return (f"needs about {self.device_needs_bytes // MIB} MiB of GPU memory, this worker's GPU has room "
                    f"for {self.device_room_bytes // MIB} MiB")
        return (f"needs about {self.needs_bytes // MIB} MiB, this worker has room for {self.room_bytes // MIB} MiB "
                f"({self.where})")


def judge(shape: KeyShape, backend: str, *, threads: int, held_key_bytes: int, holds_it: bool,
          device_free_bytes: int | None = None) -> Verdict:
    """Whether a partition of a key of `shape` fits this worker now. `held_key_bytes`: what
    its key cache holds (evicted before a new key loads; on a GPU its sections are on the
    device too); `holds_it`: the key is loaded here already (then it fits: it has been proved
    here); `device_free_bytes`: a CUDA worker's free GPU memory (None: not read, the device is
    not judged). The device model (key_needs.device_needs) is from the buffers the CUDA prover
    allocates and has not been checked against a GPU's measured peak."""
    needs = host_needs(shape, backend, threads=threads)
    limit = process_limit()
    room = limit.available_bytes + held_key_bytes
    fits = needs <= room
    dev_needs, dev_room = 0, None
    if backend == "cuda" and device_free_bytes is not None:
        dev_needs, dev_room = device_needs(shape), device_free_bytes + held_key_bytes
        fits = fits and dev_needs <= dev_room
    return Verdict(holds_it or fits, needs, room, limit.source, dev_needs, dev_room)

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

from .key_needs import KeyShape, host_needs
from .memory import process_limit

MIB = 1 << 20


@dataclass(frozen=True)
class Verdict:
    """Whether a partition fits here: the bytes it needs and the room this worker has."""
    fits: bool
    needs_bytes: int
    room_bytes: int
    where: str          # what the room was read from: "cgroup v1 /sys/fs/...", "host RAM"

    def words(self) -> str:
        return (f"needs about {self.needs_bytes // MIB} MiB, this worker has room for {self.room_bytes // MIB} MiB "
                f"({self.where})")


def judge(shape: KeyShape, backend: str, *, threads: int, held_key_bytes: int, holds_it: bool) -> Verdict:
    """Whether a partition of a key of `shape` fits this worker now. `held_key_bytes`: what
    its key cache holds (evicted before a new key loads); `holds_it`: the key is loaded here
    already (then it fits: it has been proved here)."""
    needs = host_needs(shape, backend, threads=threads)
    limit = process_limit()
    room = limit.available_bytes + held_key_bytes
    return Verdict(holds_it or needs <= room, needs, room, limit.source)

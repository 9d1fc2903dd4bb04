"""Per-process state of a worker: settings, Redis, store, prover, identity.

Built lazily in the process that uses it (the pool child proves; the parent only beats
and reaps), and rebuilt after a fork, so no Redis socket is ever shared by two processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

from coordinator.scheduler import Scheduler
from coordinator.settings import Settings
from coordinator.store import ArtifactStore
from workers import faults
from workers.devices import Device, device_from_spec
from workers.fingerprint import fingerprint
from workers.proving import PartitionProver


@dataclass
class Identity:
    """Who this worker is; set by tasks/main.py in the environment before the pool forks."""

    worker_id: str
    device: Device
    backend: str
    threads: int | None

    @classmethod
    def from_env(cls) -> "Identity":
        threads = os.environ.get("ZKQUEUE_THREADS")
        return cls(worker_id=os.environ["ZKQUEUE_WORKER_ID"],
                   device=device_from_spec(os.environ.get("ZKQUEUE_DEVICE", "cpu:0")),
                   backend=os.environ.get("ZKQUEUE_BACKEND", "cpu"),
                   threads=int(threads) if threads else None)


class Context:
    def __init__(self, settings: Settings, identity: Identity):
        self.settings = settings
        self.identity = identity
        self.worker_id = identity.worker_id
        self.pid = os.getpid()

    @cached_property
    def scheduler(self) -> Scheduler:
        return Scheduler(self.settings)

    @cached_property
    def store(self) -> ArtifactStore:
        return ArtifactStore(self.settings.store_url)

    @cached_property
    def fingerprint(self) -> dict:
        return fingerprint(self.worker_id, self.identity.device, self.identity.backend)

    @cached_property
    def prover(self) -> PartitionProver:
        return PartitionProver(self.identity.backend, threads=self.identity.threads,
                               cache_bytes=self.settings.key_cache_bytes, faults=faults.from_env())


_ctx: Context | None = None


def get() -> Context:
    """This process's context (created on first use, and again after a fork)."""
    global _ctx
    if _ctx is None or _ctx.pid != os.getpid():
        _ctx = Context(Settings.from_env(), Identity.from_env())
    return _ctx

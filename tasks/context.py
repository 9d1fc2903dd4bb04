"""Per-process state of a worker: settings, Redis, store, prover, identity.

tasks/main.py calls configure() in the worker's parent process before the pool forks; the
pool child inherits those values (a fork copies them) and builds its Context from them on
first use, and again after a fork, so no Redis socket is ever shared by two processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from functools import cached_property

from zkqueue.config import ProcessSettings, Settings
from zkqueue.coordinator.scheduler import Scheduler
from zkqueue.coordinator.store import ArtifactStore
from zkqueue.workers import faults
from zkqueue.workers.devices import Device
from zkqueue.workers.fingerprint import fingerprint
from zkqueue.workers.proving import PartitionProver

# How often one process folds a key's measured proving time into the fleet's average.
RUNTIME_FOLD_S = 5.0
# By this age of a pool child, its worker's main process has reported any earlier child's death
# of memory (workers/deaths.PoolWatch looks at every liveness beat, heartbeat_interval_s).
DEATHS_REPORTED_S = 10.0


@dataclass(frozen=True)
class Identity:
    """Who this worker is: decided by tasks/main.py from its flags."""

    worker_id: str
    device: Device
    backend: str
    threads: int | None
    key_cache_bytes: int
    batch: int | None = None            # `--batch N`: most partitions of one key claimed at once (None: by backend)
    preload: tuple[str, ...] = ()       # `--preload KEY...`: keys (sha256 in the store) loaded at start


class Context:
    """What a task needs in this process, built lazily."""

    def __init__(self, settings: Settings, proc: ProcessSettings, identity: Identity):
        self.settings = settings
        self.proc = proc
        self.identity = identity
        self.worker_id = identity.worker_id
        self.pid = os.getpid()
        self._shapes: dict = {}
        self._folded: dict[str, float] = {}     # runtime field -> when this process last folded into it
        self._started = time.monotonic()
        self._fits: set[str] = set()            # keys this worker is known not to have died of memory proving
        # job -> (index, token) of other workers' proofs this worker verified valid, sent with
        # its next record of the job (tasks/checks.py).
        self.check_marks: dict[str, list[tuple[int, int]]] = {}

    @cached_property
    def scheduler(self) -> Scheduler:
        return Scheduler(self.settings)

    @cached_property
    def store(self) -> ArtifactStore:
        return ArtifactStore(self.settings.store_url, cache_dir=self.proc.cache_path / "artifacts",
                             cache_bytes=self.proc.store_cache_bytes, part_bytes=self.proc.store_part_bytes)

    @cached_property
    def faults(self) -> faults.Faults:
        return faults.parse(self.proc.fault)

    @cached_property
    def fingerprint(self) -> dict:
        """This worker's fingerprint, with `id`: the hash of what decides whether its proofs
        are right (backend, kernel build, device, driver, host), shared by every worker
        process on the same device and build, and so what quarantine acts on."""
        fp = fingerprint(self.worker_id, self.identity.device, self.identity.backend)
        if self.faults.any:
            # A worker with an injected fault plays a different (faulty) build, as the real one is.
            fp["build"] = f"{fp.get('build')}+fault({self.proc.fault.strip()})"
        identity = {k: fp.get(k) for k in ("backend", "build", "kernel_hash", "device_name", "driver", "host")}
        # Each GPU is a device of its own; CPU workers on one host share the same processor.
        identity["device"] = fp.get("device") if self.identity.device.kind == "cuda" else "cpu"
        fp["id"] = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
        return fp

    @property
    def device_class(self) -> str:
        """What proving times are measured per: the backend and the device model."""
        return f"{self.identity.backend}:{self.fingerprint.get('device_name')}"

    def key_too_big(self, zkey_sha: str) -> bool:
        """Whether this worker died of memory proving the key (Scheduler.key_too_big). Once
        this process is DEATHS_REPORTED_S old, a "no" is kept rather than read again before
        every partition: a worker has one pool child at a time (concurrency 1), so the only
        death that could turn it into a "yes" later is this process's own, and an earlier
        child's was reported by then."""
        if zkey_sha in self._fits:
            return False
        too_big = self.scheduler.key_too_big(self.worker_id, zkey_sha)
        if not too_big and time.monotonic() - self._started >= DEATHS_REPORTED_S:
            self._fits.add(zkey_sha)
        return too_big

    def key_shape(self, zkey_sha: str):
        """The recorded shape of a key (workers.key_needs.KeyShape), or None when its client did
        not record one; read from Redis once per key and process (a key's shape never changes)."""
        from zkqueue.workers.key_needs import KeyShape
        if zkey_sha not in self._shapes:
            self._shapes[zkey_sha] = KeyShape.from_fields(self.scheduler.key_shape(zkey_sha))
        return self._shapes[zkey_sha]

    def runtime_field(self, zkey_sha: str, key_load_s: float) -> str:
        """The runtime average a record of this key folds its timings into ("" for none): at
        most once per RUNTIME_FOLD_S per key from this process (and whenever it loaded the
        key), not at every record; the averages set how long attempts may run, and are read
        at most that often anyway (Scheduler.measured_runtime)."""
        field = f"{zkey_sha}|{self.device_class}"
        now = time.monotonic()
        if key_load_s > 0 or now - self._folded.get(field, -RUNTIME_FOLD_S) >= RUNTIME_FOLD_S:
            self._folded[field] = now
            return field
        return ""

    def run_s(self, zkey_sha: str, proofs: int = 1) -> float:
        """How long an attempt on this key may run here before it counts as hung: a multiple
        of the measured proving time (of `proofs` proofs: a batch's members share one run
        deadline), plus loading when the key is not in this process's cache, or the
        configured cap when nothing was measured yet."""
        field = f"{zkey_sha}|{self.device_class}"
        prove_s, load_s = self.scheduler.measured_runtime(field)
        if prove_s is None:
            return self.settings.partition_timeout_s
        expected = prove_s * proofs
        if not self.prover.has_key(zkey_sha):
            if load_s is None:
                return self.settings.partition_timeout_s
            expected += load_s
        return min(self.settings.partition_timeout_s,
                   max(self.settings.overdue_min_s, self.settings.overdue_factor * expected))

    @cached_property
    def prover(self) -> PartitionProver:
        return PartitionProver(self.identity.backend, threads=self.identity.threads,
                               cache_bytes=self.identity.key_cache_bytes, faults=self.faults,
                               index_dir=self.proc.cache_path / "coef-index")


_configured: tuple[Settings, ProcessSettings, Identity] | None = None
_ctx: Context | None = None


def configure(settings: Settings, proc: ProcessSettings, identity: Identity) -> None:
    """Sets this worker's settings and identity (in the parent, before the pool forks)."""
    global _configured, _ctx
    _configured, _ctx = (settings, proc, identity), None


def get() -> Context:
    """This process's context (created on first use, and again after a fork).

    Raises:
        RuntimeError: configure() was never called in this process or its parent.
    """
    global _ctx
    if _configured is None:
        raise RuntimeError("tasks.context.configure() was not called: tasks run only in `zkqueue worker`")
    if _ctx is None or _ctx.pid != os.getpid():
        _ctx = Context(*_configured)
    return _ctx

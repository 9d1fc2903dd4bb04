"""Test-only faults, set per worker process with ZKQUEUE_FAULT (comma separated). Each is
injected where the real fault happens, never after the check meant to catch it:

    msm-wrong            the backend's G1 MSM returns a wrong but valid curve point (a bad
                         build; in the CPU's whole prove, the A query's MSM); the worker's
                         start-up canary (workers/canary.py) and its own verification of each
                         proof must catch it
    msm-wrong:above=N    the same, only for MSMs of more than N points: a size-dependent bug
                         (a code path only large inputs take) that the canary's small circuit
                         does not reach, so the worker takes work and its own check catches it
    hang                 the backend's G1 MSM (the CPU's whole prove) blocks inside a native
                         call (a hung kernel): the GIL is released, so the lease thread goes
                         on renewing
    hang-first           the same, only on a partition's first attempt
    slow:SECONDS         sleep that long after claiming each partition, holding the lease
    slow-first:SECONDS   the same, only on a partition's first attempt
    slow-record:SECONDS  in a batch (tasks/batch.py), wait that long after recording each
                         member but the last, holding the other members' leases: a kill lands
                         between two records of one batch
    corrupt              report corrupted proofs after the worker's own check (pi_c replaced by
                         pi_a: parses, never verifies): a worker that lies, or a corrupting
                         transport, which only finalize can catch
    slow-load:SECONDS    sleep that long in every key load (a key not in the cache): a stand-in
                         for a GPU's upload of a large key (seconds at 2^24), so that a bench
                         or test with small keys sees what key loads cost there
    alloc:MIB            allocate and touch MIB MiB inside each prove, beyond what the key's
                         memory model (workers/key_needs.py) expects: a partition whose real
                         memory exceeds the estimate, which the kernel's OOM killer ends in a
                         worker with too small a memory limit
    fake-prove:SECONDS   BENCH ONLY (bench/one_redis, bench/cells): no proving. Each witness is proved for
                         real once per process; every later partition with the same witness
                         sleeps SECONDS (a stand-in for a GPU's proving time) and returns that
                         same, valid, proof. It measures the queue, not the prover. Like every
                         fault here it changes the worker's build in its fingerprint and logs
                         "TEST FAULT ACTIVE" at start.

A worker logs a warning when a fault is set.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Faults:
    slow_s: float = 0.0
    slow_first_s: float = 0.0
    corrupt: bool = False
    msm_wrong: bool = False
    msm_wrong_above: int = 0     # msm-wrong strikes only MSMs of more points than this
    hang: bool = False
    hang_first: bool = False
    fake_prove_s: float = 0.0
    slow_record_s: float = 0.0
    slow_load_s: float = 0.0
    alloc_mib: int = 0

    @property
    def any(self) -> bool:
        return any(dataclasses.astuple(self))

    def delay(self, attempt: int, stop: threading.Event) -> None:
        """Sleeps as configured for this attempt; returns early when `stop` is set."""
        seconds = self.slow_s + (self.slow_first_s if attempt == 1 else 0.0)
        if seconds > 0:
            stop.wait(seconds)

    def load_delay(self) -> None:
        """Sleeps as configured for each key load (slow-load)."""
        if self.slow_load_s > 0:
            time.sleep(self.slow_load_s)

    def allocate(self):
        """The alloc fault's memory, touched page by page so that it is really resident
        (returned: the caller holds it for the prove); None without the fault."""
        if not self.alloc_mib:
            return None
        block = np.empty(self.alloc_mib << 20, dtype=np.uint8)
        block[::4096] = 1
        return block

    def wrong_msm(self, n_points: int) -> bool:
        """Whether this build's G1 MSM of `n_points` points comes out wrong."""
        return self.msm_wrong and n_points > self.msm_wrong_above

    def build_defects(self) -> "Faults":
        """Only the faults of a bad build (what a canary proof can meet): not the timing faults
        the queue tests put on partitions, nor `corrupt`, which strikes after a worker's check."""
        return Faults(msm_wrong=self.msm_wrong, msm_wrong_above=self.msm_wrong_above)

    def hangs(self, attempt: int) -> bool:
        return self.hang or (self.hang_first and attempt == 1)

    def apply(self, proof):
        """The proof as this (possibly faulty) worker reports it."""
        if self.corrupt:
            return dataclasses.replace(proof, c=proof.a)
        return proof


def block_in_native_code() -> None:
    """Blocks forever inside a C call (libc pause() through ctypes, which releases the GIL),
    as a hung CUDA kernel or a deadlocked native library does: no Python-level flag can
    interrupt it; only killing the process ends it."""
    libc = ctypes.CDLL(None, use_errno=True)
    while True:
        libc.pause()


def wrong_msm(msm, points: np.ndarray, scalars: np.ndarray) -> bytes:
    """The MSM plus one extra term: a valid point that is not the right one."""
    nonzero = np.flatnonzero(points.reshape(points.shape[0], -1).any(axis=1))
    if nonzero.size == 0:
        return msm(points, scalars)
    extra = points[nonzero[:1]]
    one = np.zeros((1, scalars.shape[1]), dtype=scalars.dtype)
    one[0, 0] = 1
    return msm(np.concatenate([points, extra]), np.concatenate([scalars, one]))


def wrong_a_msm(backend, zkey, pi_a: bytes, pi_c: bytes, s: int) -> tuple[bytes, bytes]:
    """pi_a and pi_c of a whole prove whose A-query MSM returned A + P instead of A (P the
    query's first non-infinity point): pi_a = A + alpha1 + r delta1 gains P, and
    pi_c, which adds s * pi_a, gains s * P. Both stay valid curve points."""
    q = zkey.a_query
    nonzero = np.flatnonzero(q.reshape(q.shape[0], -1).any(axis=1))
    if nonzero.size == 0:
        return pi_a, pi_c
    p = q[nonzero[:1]]
    r = backend.curve.r

    def plus(point: bytes, k: int) -> bytes:
        rows = np.concatenate([np.frombuffer(point, dtype=np.uint64).reshape(1, -1), p])
        scalars = np.frombuffer(b"".join(x.to_bytes(32, "little") for x in (1, k % r)), dtype=np.uint64)
        return backend.msm_g1(rows, scalars.reshape(2, 4))

    return plus(pi_a, 1), plus(pi_c, s)


def parse(spec: str | None) -> Faults:
    """Faults from a ZKQUEUE_FAULT value.

    Raises:
        ValueError: an unknown fault or a bad number.
    """
    flags = {"corrupt": "corrupt", "msm-wrong": "msm_wrong", "hang": "hang", "hang-first": "hang_first"}
    kw: dict = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        if name == "slow":
            kw["slow_s"] = float(arg)
        elif name == "fake-prove":
            kw["fake_prove_s"] = float(arg)
        elif name == "slow-first":
            kw["slow_first_s"] = float(arg)
        elif name == "slow-record":
            kw["slow_record_s"] = float(arg)
        elif name == "slow-load":
            kw["slow_load_s"] = float(arg)
        elif name == "alloc":
            if not arg.isdigit():
                raise ValueError(f"bad fault {item!r} in ZKQUEUE_FAULT (alloc:MIB, a whole number of MiB)")
            kw["alloc_mib"] = int(arg)
        elif name == "msm-wrong" and arg:
            key, _, value = arg.partition("=")
            if key != "above" or not value.isdigit():
                raise ValueError(f"bad fault {item!r} in ZKQUEUE_FAULT (msm-wrong or msm-wrong:above=N)")
            kw["msm_wrong"], kw["msm_wrong_above"] = True, int(value)
        elif name in flags:
            kw[flags[name]] = True
        else:
            raise ValueError(f"unknown fault {item!r} in ZKQUEUE_FAULT "
                             f"(slow:S, slow-first:S, slow-record:S, slow-load:S, alloc:MIB, fake-prove:S, {', '.join(flags)})")
    return Faults(**kw)


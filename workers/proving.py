"""Proves one partition on this worker's device: key from the cache, witness checked, proof
self-verified, faults (test-only) applied last."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import metrics
from .faults import Faults
from .keycache import KeyCache


@dataclass
class Proved:
    """A partition's proof (proof.json object), public signals (decimal strings), timings."""

    proof: dict
    public: list[str]
    timings_s: dict[str, float]


class PartitionProver:
    """Holds the backend and the key cache of one worker process (the Celery pool child)."""

    def __init__(self, backend_kind: str, *, threads: int | None, cache_bytes: int, faults: Faults):
        self.backend_kind = backend_kind
        self.threads = threads
        self.cache = KeyCache(cache_bytes)
        self.faults = faults
        self._backends: dict[str, object] = {}

    def backend(self, curve):
        """This process's backend for `curve`, created once (CUDA initialises here, in the child).

        Raises:
            BackendUnavailable, NativeBuildError: the backend cannot run here.
        """
        b = self._backends.get(curve.name)
        if b is None:
            from groth16.backends import get_backend
            b = self._backends[curve.name] = get_backend(self.backend_kind, curve, threads=self.threads)
        return b

    def key(self, sha: str, path: Callable[[], Path]):
        """(ZKey, seconds spent loading: 0 when cached). `path()` is only called on a miss.

        Raises:
            groth16 FormatError / UnsupportedError: a corrupt or unsupported key.
        """
        from groth16.formats.zkey import read_zkey

        def load():
            p = path()
            key = read_zkey(p)
            key.check_points(self.backend(key.curve))   # once per load, not per proof
            return key, os.path.getsize(p)

        t0 = time.perf_counter()
        key, cached = self.cache.get(sha, load)
        metrics.key_cache(cached, self.cache.used_bytes)
        return key, 0.0 if cached else time.perf_counter() - t0

    def prove(self, zkey_sha: str, zkey_path: Callable[[], Path], witness_path: Path, *, attempt: int,
              stop: threading.Event) -> Proved | None:
        """Proves the witness at `witness_path` against the key `zkey_sha`.

        Returns None when `stop` was set while waiting (lease lost or job over).

        Raises:
            groth16 InputError: a corrupt witness or key, a mismatch, or an unsatisfied witness.
            groth16 BackendError: the device failed.
        """
        from groth16 import prover
        from groth16.formats.jsonfiles import proof_json
        from groth16.formats.wtns import read_wtns

        key, key_load_s = self.key(zkey_sha, zkey_path)
        self.faults.delay(attempt, stop)
        if stop.is_set():
            return None
        witness = read_wtns(witness_path)
        prover.check_inputs(key, witness)
        t0 = time.perf_counter()
        result = prover.prove(key, witness, self.backend(key.curve))   # verifies its own proof
        elapsed = time.perf_counter() - t0
        verify_s = result.timings_s.get("verify", 0.0)
        metrics.proved(key.curve.name, key.domain_size, elapsed - verify_s)
        proof = self.faults.apply(result.proof)
        return Proved(proof=proof_json(proof), public=[str(s) for s in result.public_signals],
                      timings_s={"key_load_s": key_load_s, "prove_s": elapsed - verify_s, "verify_s": verify_s})

"""Proves one partition on this worker's device: key from the cache, witness checked, proof
verified by the worker itself before anyone sees it.

A proof that fails that check is what a bad build or a failing device produces far more
often than a bad witness, so it raises SelfCheckFailed (a backend error), not the
groth16 UnsatisfiedError: the queue re-proves it elsewhere and blames the witness only
when two different builds agree.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from zkqueue.groth16.errors import BackendError, InputError

from . import metrics
from .attempt_backend import AttemptBackend, Stopped
from .faults import Faults
from .keycache import KeyCache

log = logging.getLogger("zkqueue.proving")

TABLE_MARGIN_BYTES = 16 << 20     # left free beside the tables: the allocator's and Python's slack


class SelfCheckFailed(BackendError):
    """The proof this worker made does not verify against the key's own verification key."""


@dataclass
class Proved:
    """A partition's proof (proof.json object), public signals (decimal strings), timings."""

    proof: dict
    public: list[str]
    timings_s: dict[str, float]


@dataclass(frozen=True)
class BatchItem:
    """One partition of a batch as the prover sees it: how to get its witness file (a store
    fetch, run on the reader thread) and its attempt number (test faults key on it)."""

    witness_path: Callable[[], Path]
    attempt: int


@dataclass
class ResidentKey:
    """A loaded key and what its backend precomputed for it (fixed-base MSM tables, see
    CpuBackend.prepare), cached as one entry: evicting the key frees its tables too."""

    zkey: object
    prepared: object | None


def memory_room_for_tables(key) -> int:
    """What the memory limit leaves for a key's fixed-base tables once a proof of it has the
    room the admission model gives it (workers/key_needs.py), less a margin."""
    from .key_needs import KeyShape, host_needs
    from .memory import process_limit
    shape = KeyShape(key.curve.name, key.domain_size, key.n_vars, key.n_public, 0)   # the key is mapped already
    return process_limit().available_bytes - host_needs(shape, "cpu") - TABLE_MARGIN_BYTES


class PartitionProver:
    """Holds the backend and the key cache of one worker process (the Celery pool child)."""

    def __init__(self, backend_kind: str, *, threads: int | None, cache_bytes: int, faults: Faults,
                 index_dir: Path | None = None):
        """`index_dir`: where a GPU keeps each key's coefficient index between processes
        (None: rebuilt at every load)."""
        self.backend_kind = backend_kind
        self.index_dir = index_dir
        self.threads = threads
        self.cache = KeyCache(cache_bytes)
        self.faults = faults
        self._backends: dict[str, object] = {}
        self._faked: dict[tuple[str, str], Proved] = {}     # fake-prove (bench only): proved once
        self._shapes: dict[str, object] = {}                # key sha256 -> KeyShape (batching)
        self._locks: dict[str, threading.Lock] = {}          # key sha256 -> its load's lock
        self._locks_lock = threading.Lock()

    def backend(self, curve):
        """This process's backend for `curve`, created once (CUDA initialises here, in the child).

        Raises:
            BackendUnavailable, NativeBuildError: the backend cannot run here.
        """
        b = self._backends.get(curve.name)
        if b is None:
            from zkqueue.groth16.backends import get_backend
            b = self._backends[curve.name] = get_backend(self.backend_kind, curve, threads=self.threads)
        return b

    def shape(self, sha: str, path: Callable[[], Path]):
        """The key's KeyShape (workers/batching.py), from its header (read once per key;
        `path()` may fetch the key from the store: it is needed to prove anyway).

        Raises:
            groth16 FormatError / UnsupportedError: a corrupt or unsupported key.
        """
        from zkqueue.groth16.formats.zkey import read_header

        from .batching import KeyShape
        hit = self._shapes.get(sha)
        if hit is None:
            header = read_header(path())
            hit = self._shapes[sha] = KeyShape(header.domain_size.bit_length() - 1, header.n_vars)
        return hit

    def device_free_bytes(self) -> int | None:
        """The free memory of this process's GPU, once a CUDA backend exists here (None before,
        or on a CPU)."""
        for b in self._backends.values():
            memory = getattr(b, "memory", None)
            if memory is not None:
                free = memory().get("device_free_bytes")
                if free is not None:
                    return int(free)
        return None

    def _load_lock(self, sha: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(sha, threading.Lock())

    def has_key(self, sha: str) -> bool:
        """Whether the key is loaded already (an attempt then needs no load time)."""
        return self.cache.contains(sha)

    def key(self, sha: str, path: Callable[[], Path]):
        """(ZKey, seconds spent loading: 0 when cached). `path()` is only called on a miss.

        A key loaded here also gets the backend's fixed-base MSM tables when the backend
        has them (CPU) and the key cache has room left for them: see `_prepare`. They are
        built in the background: this returns once the key is read and checked, and the
        proofs that start before the tables are whole run without them.

        Raises:
            groth16 FormatError / UnsupportedError: a corrupt or unsupported key.
        """
        from zkqueue.groth16.formats.zkey import read_zkey

        def load():
            self.faults.load_delay()
            p = path()
            key = read_zkey(p)
            backend = self.backend(key.curve)
            key.check_points(backend)   # once per load, not per proof (on a GPU: the points stay resident)
            resident_coefs = getattr(backend, "resident_coefs", None)
            if resident_coefs is not None:   # the GPU's coefficient index: built once per key, kept on disk
                index_file = self.index_dir / f"{sha}-{key.domain_size}.npz" if self.index_dir else None
                resident_coefs(key.coefs, key.domain_size, index_file)
            size = os.path.getsize(p)
            prepared = self._prepare(backend, key, size)
            return ResidentKey(key, prepared), size + (prepared.planned_bytes if prepared else 0)

        t0 = time.perf_counter()
        with self._load_lock(sha):      # one load per key, whoever asks first (a preload thread, a task)
            resident, cached = self.cache.get(sha, load)
        metrics.key_cache(cached, self.cache.used_bytes)
        return resident.zkey, 0.0 if cached else time.perf_counter() - t0

    def _prepare(self, backend, key, key_bytes: int):
        """Fixed-base MSM tables for `key` (the backend's `prepare`), sized to the room the
        key cache has left after the key itself, so that tables never evict another key;
        None when the backend has no tables or there is no room. The tables' bytes count
        against the cache budget with the key's from the start (the caller adds their
        planned size), while a background thread builds them (CpuBackend.prepare)."""
        prepare = getattr(backend, "prepare", None)
        if prepare is None:
            return None
        # Tables are an option: never more than the memory limit leaves beside the proofs of
        # this key (workers/admission.py), so that they cannot push the worker into the OOM killer.
        room = min(self.cache.free_bytes - key_bytes, memory_room_for_tables(key))
        if room <= 0:
            log.info("key %s: no MSM tables (key cache budget %d bytes, %d free, key %d bytes; memory room %d bytes)",
                     key.path, self.cache.budget_bytes, self.cache.free_bytes, key_bytes, memory_room_for_tables(key))
            return None
        prepared = prepare(key, room, background=True)
        if prepared.planned_bytes < prepared.full_bytes:
            log.info("key %s: MSM tables shrunk to %d of %d bytes to fit the key cache budget (%d bytes free)",
                     key.path, prepared.planned_bytes, prepared.full_bytes, room)
        return prepared

    def prove_batch(self, zkey_sha: str, zkey_path: Callable[[], Path], items: list[BatchItem], *,
                    stop: threading.Event, together: bool = True) -> Iterator[tuple[int, Proved | BaseException]]:
        """Proves B witnesses of one key (a batch claimed in one transition), yielding
        (position in `items`, its Proved or the exception that ended it alone) as each is
        done and verified by this worker. It stops early, yielding nothing more, when `stop`
        is set (the batch's leases lost, overdue, or the job cancelled): what was not yielded
        was not proved.

        Overlap: one reader thread fetches and reads the witnesses in order, so witness i+1
        is read from the store and the disk while witness i proves. With `together`, on a
        backend with `prove_batch` (CUDA), every proof of the batch goes through the device in
        one pass (groth16/backends/cuda_prove.py); otherwise they are proved one after another
        (a pipeline: a larger key's next partition read while this one proves).

        Per item: groth16 InputError (a corrupt or mismatched witness, a value >= r),
        SelfCheckFailed (the proof does not verify), or what fetching the witness raised.

        Raises (the whole batch): what loading the key raises (an InputError of the key, a
        store fault) and device failures (BackendError).
        """
        from zkqueue.groth16 import prover
        from zkqueue.groth16.formats.wtns import read_wtns

        key, key_load_s = self.key(zkey_sha, zkey_path)
        self.faults.delay(items[0].attempt, stop)
        if stop.is_set():
            return
        if self.faults.fake_prove_s:        # bench only: one at a time, as prove() fakes it
            for i, item in enumerate(items):
                proved = self.prove(zkey_sha, zkey_path, item.witness_path(), attempt=item.attempt, stop=stop)
                if proved is None:
                    return
                yield i, proved
            return

        def read(item: BatchItem):
            try:
                path = item.witness_path()
                witness = read_wtns(path)
                prover.check_inputs(key, witness)
                return witness
            except Exception as exc:  # noqa: BLE001 - this item's alone: handed back in its place
                return exc

        backend = AttemptBackend(self.backend(key.curve), stop, self.faults, items[0].attempt)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="witness-reader") as reader:
            reads = [reader.submit(read, item) for item in items]
            if together and hasattr(backend, "prove_batch"):
                yield from self._prove_together(key, key_load_s, backend, reads)
            else:
                yield from self._prove_in_turn(key, key_load_s, backend, reads)

    def _prove_together(self, key, key_load_s: float, backend, reads) -> Iterator[tuple[int, Proved | BaseException]]:
        """The batch in one device pass (prove_batch), then each proof checked in turn."""
        from zkqueue.groth16 import prover
        from zkqueue.groth16.model import Proof
        from zkqueue.groth16.encoding import g1_from_lem, g2_from_lem

        witnesses = [None] * len(reads)

        def values():
            for i, fut in enumerate(reads):
                witnesses[i] = w = fut.result()
                yield w if isinstance(w, BaseException) else w.values
        blinding = [prover.blinding_scalars(key.curve) for _ in reads]
        t0 = time.perf_counter()
        try:
            points = backend.prove_batch(key, values(), blinding)
        except Stopped:
            return
        prove_s = (time.perf_counter() - t0) / len(reads)
        for i, item in enumerate(points):
            if isinstance(item, BaseException):
                yield i, item
                continue
            pi_a, pi_b, pi_c = item
            proof = Proof(curve=key.curve, a=g1_from_lem(key.curve, pi_a), b=g2_from_lem(key.curve, pi_b),
                          c=g1_from_lem(key.curve, pi_c))
            try:
                yield i, self._checked(key, witnesses[i], proof, key_load_s if i == 0 else 0.0, prove_s)
            except SelfCheckFailed as exc:
                yield i, exc

    def _prove_in_turn(self, key, key_load_s: float, backend, reads) -> Iterator[tuple[int, Proved | BaseException]]:
        """The batch one proof after another (the reader thread reads ahead)."""
        from zkqueue.groth16 import prover
        for i, fut in enumerate(reads):
            witness = fut.result()
            if isinstance(witness, BaseException):
                yield i, witness
                continue
            t0 = time.perf_counter()
            try:
                result = prover.prove(key, witness, backend, self_check=False)
            except Stopped:
                return
            except InputError as exc:
                yield i, exc
                continue
            try:
                yield i, self._checked(key, witness, result.proof, key_load_s if i == 0 else 0.0,
                                       time.perf_counter() - t0)
            except SelfCheckFailed as exc:
                yield i, exc

    def _checked(self, key, witness, proof, key_load_s: float, prove_s: float) -> Proved:
        """The proof verified against the key's own verification key, as a Proved.

        Raises:
            SelfCheckFailed: it does not verify.
        """
        from zkqueue.groth16 import verifier
        from zkqueue.groth16.formats.jsonfiles import proof_json
        public = witness.public_signals(key.n_public)
        t0 = time.perf_counter()
        if not verifier.verify(key.verification_key, proof, public):
            raise SelfCheckFailed(
                f"the proof of witness {Path(witness.path).name} fails verification against its own key: "
                "a faulty build or device, or a witness that does not satisfy the circuit",
                expected="a proof that verifies", found="an invalid proof")
        verify_s = time.perf_counter() - t0
        metrics.proved(key.curve.name, key.domain_size, prove_s)
        return Proved(proof=proof_json(self.faults.apply(proof)), public=[str(s) for s in public],
                      timings_s={"key_load_s": key_load_s, "prove_s": prove_s, "verify_s": verify_s})

    def prove(self, zkey_sha: str, zkey_path: Callable[[], Path], witness_path: Path, *, attempt: int,
              stop: threading.Event) -> Proved | None:
        """Proves the witness at `witness_path` against the key `zkey_sha`, and verifies it.

        Returns None when `stop` was set (lease lost, overdue, job over) before the proof was done.

        Raises:
            groth16 InputError: a corrupt witness or key, or files that do not belong together.
            SelfCheckFailed: the proof does not verify (a faulty build or device, or a witness
                that does not satisfy the circuit: the queue tells which).
            groth16 BackendError: the device failed.
        """
        from zkqueue.groth16 import prover, verifier
        from zkqueue.groth16.formats.jsonfiles import proof_json
        from zkqueue.groth16.formats.wtns import read_wtns

        key, key_load_s = self.key(zkey_sha, zkey_path)
        self.faults.delay(attempt, stop)
        if stop.is_set():
            return None
        if self.faults.fake_prove_s:
            faked = self._faked.get((zkey_sha, witness_path.name))
            if faked is not None:       # bench only: the queue's cost, not the prover's
                stop.wait(self.faults.fake_prove_s)
                return None if stop.is_set() else Proved(faked.proof, faked.public, dict(
                    faked.timings_s, key_load_s=key_load_s, prove_s=self.faults.fake_prove_s))
        witness = read_wtns(witness_path)
        prover.check_inputs(key, witness)
        backend = AttemptBackend(self.backend(key.curve), stop, self.faults, attempt)
        t0 = time.perf_counter()
        extra = self.faults.allocate()    # the alloc fault: memory the key's model did not expect
        try:
            result = prover.prove(key, witness, backend, self_check=False)
        except Stopped:
            return None
        finally:
            del extra
        prove_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        valid = verifier.verify(key.verification_key, result.proof, result.public_signals)
        verify_s = time.perf_counter() - t0
        if not valid:
            raise SelfCheckFailed(
                f"the proof of witness {witness_path.name} fails verification against its own key: "
                "a faulty build or device, or a witness that does not satisfy the circuit",
                expected="a proof that verifies", found="an invalid proof")
        metrics.proved(key.curve.name, key.domain_size, prove_s)
        proof = self.faults.apply(result.proof)
        proved = Proved(proof=proof_json(proof), public=[str(s) for s in result.public_signals],
                        timings_s={"key_load_s": key_load_s, "prove_s": prove_s, "verify_s": verify_s})
        if self.faults.fake_prove_s:
            self._faked[(zkey_sha, witness_path.name)] = proved
        return proved

"""The proving backend as one attempt sees it.

Every kernel call first checks the attempt's stop flag (lease lost, overdue, job cancelled
or failed), so a stopped attempt ends at the next kernel boundary; the CPU's whole prove in
one call (prove_whole) gets the flag passed in and stops before its next step. A kernel
already running cannot be interrupted; the lease keeper kills the process if it does not
come back (workers/lease.py). Test faults (workers/faults.py) are injected here, inside the
backend, where a bad build or a hung kernel would strike: before the worker's own
verification.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

from zkqueue.groth16.errors import BackendError, Cancelled

from . import faults as faults_mod
from .faults import Faults


class Stopped(BackendError):
    """The attempt was stopped between two kernel calls; nothing is recorded."""


class AttemptBackend:
    """Wraps a backend for one attempt: stop checks and (test-only) faults around each call."""

    def __init__(self, inner, stop: threading.Event, faults: Faults, attempt: int):
        self._inner = inner
        self._stop = stop
        self._faults = faults
        self._attempt = attempt
        self.name = inner.name
        if hasattr(inner, "prove_whole"):  # only then: groth16.prover looks for the attribute
            self.prove_whole = self._prove_whole
        if hasattr(inner, "prove_batch"):  # only then: workers/proving.py looks for it
            self.prove_batch = self._prove_batch

    def _check(self) -> None:
        if self._stop.is_set():
            raise Stopped("the attempt was stopped")

    def evaluate_ab(self, coefs, witness_std, domain_size):
        self._check()
        return self._inner.evaluate_ab(coefs, witness_std, domain_size)

    def mul(self, a_mont, b_mont):
        self._check()
        return self._inner.mul(a_mont, b_mont)

    def ntt(self, values_mont, *, inverse=False, coset_shift=None):
        self._check()
        return self._inner.ntt(values_mont, inverse=inverse, coset_shift=coset_shift)

    def h_scalars(self, a_mont, b_mont, c_mont):
        self._check()
        return self._inner.h_scalars(a_mont, b_mont, c_mont)

    def msm_g1(self, points, scalars_std):
        self._check()
        if self._faults.hangs(self._attempt):
            faults_mod.block_in_native_code()
        if self._faults.wrong_msm(points.shape[0]):
            return faults_mod.wrong_msm(self._inner.msm_g1, points, scalars_std)
        return self._inner.msm_g1(points, scalars_std)

    def msm_g2(self, points, scalars_std):
        self._check()
        return self._inner.msm_g2(points, scalars_std)

    def _prove_whole(self, zkey, witness_std, r, s):
        self._check()
        if self._faults.hangs(self._attempt):
            faults_mod.block_in_native_code()
        with self._relay() as cancel:
            try:
                pi_a, pi_b, pi_c = self._inner.prove_whole(zkey, witness_std, r, s, cancel=cancel)
            except Cancelled:
                raise Stopped("the attempt was stopped") from None
        if self._faults.wrong_msm(zkey.n_vars):
            pi_a, pi_c = faults_mod.wrong_a_msm(self._inner, zkey, pi_a, pi_c, s)
        return pi_a, pi_b, pi_c

    def _prove_batch(self, zkey, witnesses, blinding):
        """The inner backend's prove_batch under this attempt's stop flag (and faults, applied
        to every proof of the batch as to a proof made alone)."""
        self._check()
        if self._faults.hangs(self._attempt):
            faults_mod.block_in_native_code()
        with self._relay() as cancel:
            try:
                out = self._inner.prove_batch(zkey, witnesses, blinding, cancel=cancel)
            except Cancelled:
                raise Stopped("the attempt was stopped") from None
        if self._faults.wrong_msm(zkey.n_vars):
            out = [item if isinstance(item, BaseException) else self._wrong(zkey, item, s)
                   for item, (_r, s) in zip(out, blinding)]
        return out

    def _wrong(self, zkey, points, s):
        """A whole proof's points as a bad build's A-query MSM would have made them."""
        pi_a, pi_b, pi_c = points
        pi_a, pi_c = faults_mod.wrong_a_msm(self._inner, zkey, pi_a, pi_c, s)
        return pi_a, pi_b, pi_c

    @contextlib.contextmanager
    def _relay(self):
        """A ctypes int set to 1 once the stop flag is set (what the backends poll)."""
        cancel, done = ctypes.c_int(0), threading.Event()

        def relay_stop():  # the native calls poll an int, not a threading.Event
            while not self._stop.wait(0.05):
                if done.is_set():
                    return
            cancel.value = 1

        relay = threading.Thread(target=relay_stop, name="stop-relay", daemon=True)
        relay.start()
        try:
            yield cancel
        finally:
            done.set()

    def __getattr__(self, name):
        # Anything else the prover may use (helpers a backend adds) passes straight through.
        return getattr(self._inner, name)

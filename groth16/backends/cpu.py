"""The CPU backend: native kernels from groth16/kernels/cpu/*.cpp, called through ctypes
(their signatures and error codes: groth16/native_abi.py).

The C ABI works on little-endian 64-bit words (see groth16/backends/base.py); arrays are
passed as contiguous numpy uint64 buffers, so .zkey sections reach the kernels without a
copy. Every native call returns 0 or one of the codes of kernels/cpu/errors.hpp, mapped
here to the error tree of groth16/errors.py.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import weakref
from ctypes import c_int64
from dataclasses import dataclass, field

import numpy as np

from ..curves import Curve
from ..native_abi import default_threads, library, raise_for
from .base import as_words
from ..errors import BackendError, FormatError, InputError, MismatchError

__all__ = ["CpuBackend", "MsmPlan", "default_threads", "library"]

log = logging.getLogger("zkqueue.backend.cpu")


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _queries(zkey) -> list[tuple[np.ndarray, bool]]:
    """A key's five MSM bases, in zkq_prove's order (A, B1, B2, L, H), each with `g2`."""
    return [(zkey.a_query, False), (zkey.b1_query, False), (zkey.b2_query, True),
            (zkey.l_query, False), (zkey.h_query, False)]


@dataclass(frozen=True)
class MsmPlan:
    """How an MSM runs (kernels/cpu/msm.hpp, MsmPlan): c-bit signed windows over GLV
    halves, grouped `stride` bucket sets of `levels` table levels each; a table of
    `table_bytes` (0: none, levels == 1)."""

    window_bits: int
    windows: int
    stride: int
    levels: int
    table_bytes: int


@dataclass(eq=False)
class MsmTable:
    """A fixed-base table for one point array (CpuBackend.precompute_g1/g2). `buffer` is
    the native layout (header, then the table levels); it keeps `points` alive, so the
    registration by id in CpuBackend stays unambiguous."""

    points: np.ndarray
    g2: bool
    plan: MsmPlan
    buffer: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes


@dataclass(eq=False)
class PreparedKey:
    """The tables CpuBackend.prepare built, or is building, for one key; dropping it frees
    them. `tables`: those built so far (each registered as soon as it is whole);
    `planned_bytes`: what they take once all are built; `full_bytes`: what full tables for
    every query would have taken; `error`: why a background build stopped, if it failed."""

    tables: list[MsmTable]
    full_bytes: int
    planned_bytes: int = 0
    error: BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def nbytes(self) -> int:
        """Bytes of the tables built so far."""
        return sum(t.nbytes for t in self.tables)

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the build is over (every table built, or the build stopped); False
        when `timeout` passed first."""
        return self._done.wait(timeout)


class CpuBackend:
    """Groth16 kernels on the host CPU for one curve (see `groth16.backends.base.Backend`)."""

    name = "cpu"

    def __init__(self, curve: Curve, threads: int | None = None, variant: str | None = None):
        """Bind to `curve`; `threads` defaults to ZKQUEUE_THREADS, else os.cpu_count().

        `variant` picks the native arithmetic ("x86-adx" or "portable"; default: the CPU's).

        Raises:
            NativeBuildError: the native kernels cannot be built here.
            BackendError: `threads` is not a positive integer.
        """
        self.curve = curve
        self.threads = default_threads() if threads is None else int(threads)
        if self.threads < 1:
            raise BackendError("threads must be >= 1", expected=">= 1", found=threads)
        self._lib = library(variant)
        self._variant = variant
        self._cid = curve.native_id
        self._nwq = curve.n8q // 8  # 64-bit words per base-field element
        # id(points array) -> its table, for keys prepared by `prepare` (see there)
        self._registered: weakref.WeakValueDictionary[int, MsmTable] = weakref.WeakValueDictionary()

    # ---- Fr vectors ---------------------------------------------------------------

    def evaluate_ab(self, coefs: np.ndarray, witness_std: np.ndarray, domain_size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """A and B evaluated on the domain (Montgomery form, shape (domain_size, 4) each).

        `coefs`: .zkey section 4 after its u32 count, as 44-byte records (a structured array
        or raw uint8 bytes). Raises FormatError naming the first bad entry (matrix, constraint,
        signal or value out of range).
        """
        raw = np.ascontiguousarray(coefs)
        if raw.dtype.itemsize == 44 and raw.dtype != np.uint8:
            ncoefs = raw.shape[0] if raw.ndim else 1
            raw = raw.view(np.uint8).reshape(-1)
        else:
            raw = raw.view(np.uint8).reshape(-1)
            if raw.size % 44:
                raise FormatError("coefficient section is not a whole number of 44-byte entries",
                                  expected="multiple of 44 bytes", found=raw.size)
            ncoefs = raw.size // 44
        w = as_words(witness_std, 4, "witness")
        a = np.empty((domain_size, 4), dtype=np.uint64)
        b = np.empty((domain_size, 4), dtype=np.uint64)
        bad = c_int64(-1)
        rc = self._lib.zkq_evaluate_ab(self._cid, _ptr(raw), ncoefs, _ptr(w), w.shape[0], domain_size,
                                       _ptr(a), _ptr(b), ctypes.byref(bad), self.threads)
        raise_for(rc, "A/B coefficients", bad.value, "entry")
        return a, b

    def mul(self, a_mont: np.ndarray, b_mont: np.ndarray) -> np.ndarray:
        """Pointwise a * b (Montgomery form in and out)."""
        a, b = as_words(a_mont, 4, "a"), as_words(b_mont, 4, "b")
        if a.shape != b.shape:
            raise InputError("pointwise product of arrays of different lengths",
                             expected=a.shape[0], found=b.shape[0])
        out = np.empty_like(a)
        raise_for(self._lib.zkq_fr_mul(self._cid, _ptr(a), _ptr(b), _ptr(out), a.shape[0], self.threads), "mul")
        return out

    def ntt(self, values_mont: np.ndarray, *, inverse: bool = False, coset_shift: int | None = None
            ) -> np.ndarray:
        """Forward/inverse NTT, natural order, snarkjs's roots; see Backend.ntt. Returns a new array.

        Raises InputError when the length is not a power of two within the 2-adicity.
        """
        out = np.array(as_words(values_mont, 4, "ntt input"), dtype=np.uint64, copy=True, order="C")
        shift_ptr = None
        if coset_shift is not None:
            # Montgomery form of the shift for the kernel
            shift = np.frombuffer((coset_shift % self.curve.r * pow(2, 256, self.curve.r) % self.curve.r)
                                  .to_bytes(32, "little"), dtype=np.uint64).copy()
            shift_ptr = _ptr(shift)
        rc = self._lib.zkq_ntt(self._cid, _ptr(out), out.shape[0], int(inverse), shift_ptr, self.threads)
        raise_for(rc, f"ntt of size {out.shape[0]}")
        return out

    def h_scalars(self, a_mont: np.ndarray, b_mont: np.ndarray, c_mont: np.ndarray) -> np.ndarray:
        """from_mont(a*b - c) pointwise: the H MSM's standard-form scalars."""
        a, b, c = (as_words(x, 4, "h input") for x in (a_mont, b_mont, c_mont))
        if not a.shape == b.shape == c.shape:
            raise InputError("h_scalars inputs differ in length",
                             expected=a.shape[0], found=(b.shape[0], c.shape[0]))
        out = np.empty_like(a)
        raise_for(self._lib.zkq_h_scalars(self._cid, _ptr(a), _ptr(b), _ptr(c), _ptr(out), a.shape[0],
                                       self.threads), "h_scalars")
        return out

    # ---- MSM and point checks -------------------------------------------------------

    def _registered_table(self, points: np.ndarray, g2: bool) -> "MsmTable | None":
        """The table `prepare` registered for exactly this array object, if any."""
        table = self._registered.get(id(points))
        if table is not None and (table.points is not points or table.g2 != g2):
            return None  # an id reused by another array: only the registered object counts
        return table

    def _msm(self, g2: bool, points: np.ndarray, scalars_std: np.ndarray, table: "MsmTable | None",
             window_bits: int = 0) -> bytes:
        what = "msm_g2" if g2 else "msm_g1"
        width = self._width(g2)
        if table is None:
            table = self._registered_table(points, g2)
        elif table.points is not points or table.g2 != g2:
            raise InputError(f"{what}: the table was built for other points",
                             expected="the array the table was precomputed from", found="another array")
        p = as_words(points, width, f"{what} points")
        s = as_words(scalars_std, 4, f"{what} scalars")
        if p.shape[0] != s.shape[0]:
            raise InputError(f"{what}: {p.shape[0]} points but {s.shape[0]} scalars",
                             expected=p.shape[0], found=s.shape[0])
        if not 0 <= window_bits <= 15:
            raise InputError(f"{what}: window_bits must be 0 (automatic) or 1..15", expected="0..15",
                             found=window_bits)
        out = np.zeros(width, dtype=np.uint64)
        fn = self._lib.zkq_msm_g2_ex if g2 else self._lib.zkq_msm_g1_ex
        rc = fn(self._cid, _ptr(p), _ptr(s), p.shape[0], None if table is None else _ptr(table.buffer),
                window_bits, _ptr(out), self.threads)
        raise_for(rc, what)
        return out.tobytes()

    def msm_g1(self, points: np.ndarray, scalars_std: np.ndarray, table: MsmTable | None = None, *,
               window_bits: int = 0) -> bytes:
        """sum scalars[i] * points[i] on G1 as affine LEM bytes (zeros for infinity).

        `table`: a table from `precompute_g1(points)`. Without one, a table registered by
        `prepare` for this very array object (not an equal copy) is used when there is one.
        `window_bits`: 0 lets the cost model pick the window width (see `msm_plan`); 1..15
        forces it (measurements, tests); a table fixes its own.

        Raises InputError on mismatched lengths, a scalar >= r, or a table of other points.
        """
        return self._msm(False, points, scalars_std, table, window_bits)

    def msm_g2(self, points: np.ndarray, scalars_std: np.ndarray, table: MsmTable | None = None, *,
               window_bits: int = 0) -> bytes:
        """sum scalars[i] * points[i] on G2 as affine LEM bytes (zeros for infinity).

        `table` and `window_bits` as in `msm_g1` (tables from `precompute_g2`).

        Raises InputError on mismatched lengths, a scalar >= r, or a table of other points.
        """
        return self._msm(True, points, scalars_std, table, window_bits)

    # ---- fixed-base tables ----------------------------------------------------------

    def _width(self, g2: bool) -> int:
        return (4 if g2 else 2) * self._nwq

    def msm_plan(self, n: int, *, g2: bool = False, budget_bytes: int = 0) -> MsmPlan:
        """How an MSM of `n` points runs on this backend's thread count: without a table
        (`budget_bytes` 0), or with the best fixed-base table of at most `budget_bytes`."""
        out = (c_int64 * 5)()
        fn = self._lib.zkq_msm_g2_plan if g2 else self._lib.zkq_msm_g1_plan
        raise_for(fn(self._cid, n, self.threads, max(0, int(budget_bytes)), out), "msm_plan")
        return MsmPlan(*out)

    def table_bytes(self, n: int, *, g2: bool = False, budget_bytes: int) -> int:
        """Bytes of the table `precompute_g1/g2` would build for `n` points within
        `budget_bytes` (0 when no table that fits is worth it)."""
        return self.msm_plan(n, g2=g2, budget_bytes=budget_bytes).table_bytes

    def _precompute(self, g2: bool, points: np.ndarray, budget_bytes: int, threads: int | None = None
                    ) -> MsmTable | None:
        what = "precompute_g2" if g2 else "precompute_g1"
        p = as_words(points, self._width(g2), f"{what} points")
        plan = self.msm_plan(p.shape[0], g2=g2, budget_bytes=budget_bytes)
        if plan.table_bytes == 0:
            return None
        buf = np.empty(plan.table_bytes // 8, dtype=np.uint64)
        fn = self._lib.zkq_msm_g2_table_build if g2 else self._lib.zkq_msm_g1_table_build
        raise_for(fn(self._cid, _ptr(p), p.shape[0], plan.window_bits, plan.stride, plan.levels, _ptr(buf),
                  buf.nbytes, self.threads if threads is None else threads), what)
        return MsmTable(points=points, g2=g2, plan=plan, buffer=buf)

    def precompute_g1(self, points: np.ndarray, budget_bytes: int) -> MsmTable | None:
        """A fixed-base table for `points` (G1) of at most `budget_bytes`, for
        `msm_g1(points, scalars, table=...)`; None when no table that fits saves time.

        The table holds 2^(j*stride*c) * P_i for the plan's levels j >= 1 (level 0 is the
        points themselves), so an MSM needs fewer bucket sets and doublings; its memory is
        one numpy buffer (`MsmTable.nbytes`), owned by the table object.
        """
        return self._precompute(False, points, budget_bytes)

    def precompute_g2(self, points: np.ndarray, budget_bytes: int) -> MsmTable | None:
        """As `precompute_g1` for G2 points."""
        return self._precompute(True, points, budget_bytes)

    def prepare(self, zkey, budget_bytes: int, *, background: bool = False) -> PreparedKey:
        """Precomputes tables for the fixed MSM bases of a resident proving key, within
        `budget_bytes` in all, and registers them with this backend.

        While the returned PreparedKey is alive, `msm_g1`/`msm_g2` called on exactly
        zkey.a_query, b1_query, b2_query, l_query or h_query (the same array objects, as
        groth16.prover passes them) use the tables; once it is dropped (e.g. evicted from a
        worker's key cache) the tables are freed and the registrations vanish with them.
        When all full tables do not fit, each query gets a share of the budget in
        proportion to its full table's size and a smaller table (or none) is built.
        Preparing the same arrays again registers the newer tables in place of the older.

        `background`: return at once and build the tables on a daemon thread, one query
        at a time, each registered when whole; proofs started meanwhile run without the
        tables not yet built (same results, only slower), so a key's first proof does not
        wait for its tables. `planned_bytes` is known at once either way; `wait()` blocks
        until the build is over. Dropping the PreparedKey stops the build after the table
        in progress.
        """
        queries = _queries(zkey)
        full = [self.table_bytes(len(p), g2=g2, budget_bytes=1 << 62) if len(p) else 0 for p, g2 in queries]
        total = sum(full)
        share = 1.0 if total <= budget_bytes else max(0, budget_bytes) / total
        # (points, g2, budget) per table to build; the plan is deterministic, so its sizes
        # are the bytes the tables will take
        jobs = [(points, g2, int(size * share)) for (points, g2), size in zip(queries, full) if size]
        planned = sum(self.table_bytes(len(p), g2=g2, budget_bytes=b) for p, g2, b in jobs)
        prepared = PreparedKey(tables=[], full_bytes=total, planned_bytes=planned)
        if not background:
            self._build_tables(weakref.ref(prepared), prepared._done, jobs)
            if prepared.error is not None:
                raise prepared.error
            return prepared
        # One thread: the proofs that run meanwhile have every core already
        threading.Thread(target=self._build_tables, args=(weakref.ref(prepared), prepared._done, jobs, 1),
                         name="zkq-msm-tables", daemon=True).start()
        return prepared

    def _build_tables(self, ref: "weakref.ref[PreparedKey]", done: threading.Event, jobs: list,
                      threads: int | None = None) -> None:
        """Builds `jobs`' tables into the PreparedKey behind `ref`, registering each; holds
        that key only between tables, so dropping it stops the build."""
        try:
            for points, g2, budget in jobs:
                if ref() is None:
                    return
                # native, without the GIL (threads: None = the backend's)
                table = self._precompute(g2, points, budget, threads)
                prepared = ref()
                if prepared is None:
                    return
                if table is not None:
                    prepared.tables.append(table)
                    self._registered[id(points)] = table
                del prepared
        except Exception as e:  # noqa: BLE001 - kept on the key; proofs go on without tables
            log.warning("building fixed-base MSM tables failed (%s): proofs go on without them", e)
            prepared = ref()
            if prepared is not None:
                prepared.error = e
        finally:
            done.set()

    # ---- the whole prove ----------------------------------------------------------------

    def prove_whole(self, zkey, witness_std: np.ndarray, r: int, s: int, *,
                    cancel: ctypes.c_int | None = None) -> tuple[bytes, bytes, bytes]:
        """The proof points (pi_a, pi_b, pi_c as affine LEM bytes) for blinding scalars r, s,
        in one native call (kernels/cpu/prove.cpp): the transforms and the five MSMs
        overlap on the cores, and the MSMs use the tables `prepare` registered for this key.
        groth16.prover.prove calls it in place of the step-by-step kernels; the result is
        the same points.

        `witness_std`: the key's n_vars witness values, standard form, each below r (as
        formats.wtns.read_wtns checks). `cancel`: a c_int another thread may set to 1 to
        stop before the next step.

        Raises:
            FormatError: a bad coefficient entry.
            MismatchError: the witness length is not the key's.
            Cancelled: `cancel` was set.
            BackendError: the native prove failed.
        """
        from .. import native_prove  # noqa: PLC0415 - Sections and call_prove; numpy-free, imported on first prove

        w = as_words(witness_std, 4, "witness")
        if w.shape[0] != zkey.n_vars:
            raise MismatchError(f"the witness has {w.shape[0]} values but the key needs {zkey.n_vars}",
                                expected=zkey.n_vars, found=w.shape[0])
        queries = _queries(zkey)
        arrays = [as_words(q, self._width(g2), "key points") for q, g2 in queries]
        tables = [self._registered_table(q, g2) for q, g2 in queries]
        coefs = np.ascontiguousarray(zkey.coefs)
        sec = native_prove.Sections(coefs.ctypes.data, coefs.shape[0], *(_ptr(a) for a in arrays),
                                    alpha1=zkey.alpha1, beta1=zkey.beta1, delta1=zkey.delta1,
                                    beta2=zkey.beta2, delta2=zkey.delta2)
        pi_a, pi_b, pi_c, _ = native_prove.call_prove(
            library(self._variant), self.curve, zkey.path, sec, _ptr(w), n_vars=zkey.n_vars,
            n_public=zkey.n_public, domain_size=zkey.domain_size, r=r, s=s, threads=self.threads,
            tables=[None if t is None else _ptr(t.buffer) for t in tables], cancel=cancel)
        return pi_a, pi_b, pi_c

    def _check_points(self, fn, points: np.ndarray, width: int, what: str) -> None:
        p = as_words(points, width, what)
        bad = c_int64(-1)
        rc = fn(self._cid, _ptr(p), p.shape[0], ctypes.byref(bad), self.threads)
        raise_for(rc, f"{what} ({self.curve.name})", bad.value, "point")

    def check_g1(self, points: np.ndarray) -> None:
        """Reject G1 points with a coordinate >= q or off the curve (zeros = infinity pass).

        Raises:
            FormatError: naming the first bad point's index (the caller adds the file path).
        """
        self._check_points(self._lib.zkq_check_g1, points, 2 * self._nwq, "G1 point")

    def check_g2(self, points: np.ndarray) -> None:
        """Reject G2 points with a coordinate >= q or off the twist (zeros = infinity pass).

        Raises:
            FormatError: naming the first bad point's index (the caller adds the file path).
        """
        self._check_points(self._lib.zkq_check_g2, points, 4 * self._nwq, "G2 point")

"""CUDA backend: the kernels of groth16/kernels/*.cu on one pinned GPU, through CuPy.

How it is put together (a newcomer's map):
  * `module_source(curve)` is the one CUDA translation unit of a curve: every .cu file,
    each after a `#line 1 "<path>"` so compiler errors name the real file and line, and
    `#include`s resolved from groth16/kernels (the .cuh headers the CPU build uses too).
    CuPy's RawModule compiles it with NVRTC; modules are cached per (device, curve, source
    hash) in this process, and CuPy keeps the binary on disk keyed by the text, which
    embeds the hash of every source so that an edited header is never served stale.
  * Kernels are launched through a small `Runtime` (CuPy here; `cuda_emu.EmulatedRuntime`
    runs the same .cu files compiled by g++ with numpy arrays, so the whole backend is
    tested on machines without a GPU). Everything below uses `rt.xp` (cupy or numpy).
  * Inputs stay on the device while their host arrays cannot change: key sections (read-
    only memory maps of the .zkey) are mirrored once in an LRU cache with a byte budget,
    so the next partition with the same key uploads only its witness; arrays returned by
    this backend are read-only and remembered, so handing them back costs no upload.
  * Errors are converted at the public methods, and only the device's: out of device memory
    (after freeing the caches and trying once more) is a retryable BackendError; any other
    CUDA runtime or driver error, an NVRTC or compile error, or a CUDA library that does not
    load is BackendUnavailable (not retryable on this device: a faulted CUDA context stays
    faulted). Everything else (InputError and its kind, and any other exception, which is a
    bug in this code) propagates unchanged, with its traceback. `cupy_error_kind` decides.

Algorithms are described in the .cu files; `_msm`, `ntt` and `evaluate_ab` below say which
kernels run in what order.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import sys
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..curves import Curve
from .base import as_words
from ..encoding import fq_to_lem
from ..errors import BackendError, BackendUnavailable, FormatError, InputError, UnsupportedError

log = logging.getLogger("zkqueue.backend.cuda")

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
CU_FILES = ("fr_ops.cu", "ntt.cu", "msm.cu")  # one module per curve, in this order
NVRTC_OPTIONS = ("-std=c++17",)

BLOCK = 256                 # threads per block unless a kernel's registers allow fewer
LEVEL_SLICE = 32            # entries per thread in the MSM's segmented sum (msm.cu step 3)
SORT_ENTRIES = 1 << 28      # (point, window) entries sorted at once: bounds an MSM's memory
MAX_WINDOW = 20             # bucket keys and counts stay far below 2^32
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


# ---- sources ---------------------------------------------------------------------------

def kernel_sources() -> list[Path]:
    """Every file the CUDA modules are built from: the .cu files and all shared headers."""
    return sorted(KERNEL_DIR.glob("*.cuh")) + [KERNEL_DIR / f for f in CU_FILES]


def source_hash() -> str:
    """Hash of the CUDA sources: the code part of a worker's fingerprint."""
    h = hashlib.sha256()
    for path in kernel_sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def module_source(curve: Curve) -> str:
    """The CUDA translation unit of one curve (see the module docstring)."""
    parts = [f"// zkqueue CUDA kernels for {curve.name}, sources {source_hash()}\n",
             f"#define ZKQ_CURVE {curve.native_id}\n"]
    for name in CU_FILES:
        path = KERNEL_DIR / name
        parts.append(f'#line 1 "{path}"\n{path.read_text()}\n')
    return "".join(parts)


def compile_options() -> tuple[str, ...]:
    return (*NVRTC_OPTIONS, f"-I{KERNEL_DIR}")


# ---- which errors are the device's ---------------------------------------------------------

CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY alike


def cupy_error_kind(exc: BaseException) -> str | None:
    """What CuPy raised, if it is the device's failure at all.

    Returns "oom" for device memory exhausted (CuPy's OutOfMemoryError, or a runtime or
    driver call that returned the out-of-memory status), "device" for any other CUDA
    runtime or driver error, an NVRTC error or a kernel that does not compile, and a CUDA
    library (libcuda, libnvrtc, ...) that does not load; None for everything else, which
    callers must let propagate. Looks only at classes of a CuPy already imported: with no
    CuPy loaded, nothing can be CuPy's.
    """
    cp = sys.modules.get("cupy")
    if cp is not None:
        try:
            runtime_error, driver_error = cp.cuda.runtime.CUDARuntimeError, cp.cuda.driver.CUDADriverError
            oom_error = cp.cuda.memory.OutOfMemoryError
            compile_errors = (cp.cuda.nvrtc.NVRTCError, cp.cuda.compiler.CompileException)
        except AttributeError:  # a CuPy that failed half-way through its import
            pass
        else:
            if isinstance(exc, oom_error):
                return "oom"
            if isinstance(exc, (runtime_error, driver_error)):
                return "oom" if getattr(exc, "status", None) == CUDA_OUT_OF_MEMORY else "device"
            if isinstance(exc, compile_errors):
                return "device"
    if isinstance(exc, RuntimeError):
        # CuPy's own message for a CUDA library it cannot dlopen, and cuda-pathfinder's
        # error for one it cannot find (CuPy 14 looks NVRTC up through it).
        if str(exc).startswith("CuPy failed to load") or any(
                c.__name__ == "DynamicLibNotFoundError" for c in type(exc).__mro__):
            return "device"
    return None


# ---- runtimes ---------------------------------------------------------------------------

class CupyRuntime:
    """Launches the kernels of one curve on one CUDA device through CuPy (NVRTC)."""

    _modules: dict[tuple, Any] = {}
    _lock = threading.Lock()

    def __init__(self, curve: Curve, device_id: int):
        import cupy

        self.cp = cupy
        self.xp = cupy
        self.device_id = device_id
        self.device = cupy.cuda.Device(device_id)
        with self.device:
            props = cupy.cuda.runtime.getDeviceProperties(device_id)
            self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            self.compute_capability = f"{props['major']}{props['minor']}"
            self.module = self._module(curve)
            self._kernels: dict[str, Any] = {}
            self.kernel("fr_mul")  # compiles now, so a compile error surfaces at start-up

    def _module(self, curve: Curve):
        key = (self.device_id, curve.native_id, source_hash(), compile_options())
        with self._lock:
            if key not in self._modules:
                self._modules[key] = self.cp.RawModule(code=module_source(curve), options=compile_options())
            return self._modules[key]

    def active(self):
        return self.device

    def kernel(self, name: str):
        if name not in self._kernels:
            self._kernels[name] = self.module.get_function(name)
        return self._kernels[name]

    def launch(self, name: str, threads: int, args: tuple, *, block: int = BLOCK) -> None:
        """Runs kernel `name` with at least `threads` threads (its loops are grid-stride)."""
        kern = self.kernel(name)
        block = max(32, min(block, kern.max_threads_per_block) // 32 * 32)
        grid = max(1, min(-(-threads // block), 1 << 24))
        kern((grid,), (block,), args)

    def upload(self, host: np.ndarray):
        return self.cp.asarray(host)

    def download(self, dev) -> np.ndarray:
        return self.cp.asnumpy(dev)

    def synchronize(self) -> None:
        self.device.synchronize()

    def free_pool(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.cp.get_default_pinned_memory_pool().free_all_blocks()

    def memory(self) -> dict[str, int]:
        free, total = self.cp.cuda.runtime.memGetInfo()
        pool = self.cp.get_default_memory_pool()
        return {"device_free_bytes": int(free), "device_total_bytes": int(total),
                "pool_used_bytes": int(pool.used_bytes()), "pool_held_bytes": int(pool.total_bytes())}

    def error_kind(self, exc: BaseException) -> str | None:
        """"oom", "device" or None (not the device's); see cupy_error_kind."""
        return cupy_error_kind(exc)

    def describe(self) -> str:
        return f"device {self.device_id}: {self.device_name} (sm_{self.compute_capability})"


# ---- host-side helpers ------------------------------------------------------------------

def choose_window(n: int, scalar_bits: int) -> int:
    """Window width c minimising windows * (n madds + ~3 madds per bucket) (msm.cu)."""
    best, best_cost = 2, math.inf
    for c in range(2, MAX_WINDOW + 1):
        windows = -(-(scalar_bits + 1) // c)
        cost = windows * (n + 3 * (1 << (c - 1)))
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def _mont_words(values: list[int], modulus: int, n_words: int) -> np.ndarray:
    """Integers -> Montgomery form (R = 2^(64*n_words)) as an (len, n_words) uint64 array."""
    r_mont = pow(2, 64 * n_words, modulus)
    data = b"".join((v * r_mont % modulus).to_bytes(8 * n_words, "little") for v in values)
    return np.frombuffer(data, dtype="<u8").reshape(len(values), n_words).copy()


@functools.lru_cache(maxsize=64)
def _geometric_tables(r: int, x: int, scale: int, log_count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(lo, hi, lo_bits) with scale * x^i = lo[i mod 2^lo_bits] * hi[i >> lo_bits] for i < 2^log_count.

    Both tables hold about sqrt(2^log_count) elements (ntt.cu: table_power).
    """
    lo_bits = (log_count + 1) // 2
    lo, v = [], 1
    for _ in range(1 << lo_bits):
        lo.append(v)
        v = v * x % r
    step, hi, v = v, [], scale % r  # v is x^(2^lo_bits) here
    for _ in range(1 << (log_count - lo_bits)):
        hi.append(v)
        v = v * step % r
    return _mont_words(lo, r, 4), _mont_words(hi, r, 4), lo_bits


def _fq2_inv(a: tuple[int, int], q: int) -> tuple[int, int]:
    t = pow(a[0] * a[0] + a[1] * a[1], -1, q)
    return a[0] * t % q, -a[1] * t % q


def _fq2_mul(a: tuple[int, int], b: tuple[int, int], q: int) -> tuple[int, int]:
    return (a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q


def _immutable(arr: np.ndarray) -> bool:
    """True when no one can change this array's bytes while we hold a reference to it:
    a read-only view whose underlying buffer is read-only too (bytes, a read-only mmap)."""
    if arr.flags.writeable:
        return False
    root = arr
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    if isinstance(root, np.ndarray):
        return False
    try:
        return memoryview(root).readonly
    except TypeError:
        return False


class _Mirrors:
    """Device copies of immutable host arrays, least recently used first out, within a budget.

    An entry holds a reference to its host array, so that array's memory (and thus its
    address, part of the key) cannot be reused for other data while the entry lives.
    """

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self.used_bytes = 0
        self._entries: OrderedDict[tuple, tuple[np.ndarray, Any, int]] = OrderedDict()

    @staticmethod
    def key(tag: str, arr: np.ndarray, *extra) -> tuple:
        return (tag, arr.__array_interface__["data"][0], arr.shape, arr.strides, arr.dtype.str, *extra)

    def get(self, key: tuple):
        hit = self._entries.get(key)
        if hit is None:
            return None
        self._entries.move_to_end(key)
        return hit[1]

    def put(self, key: tuple, host: np.ndarray, dev: Any, nbytes: int) -> None:
        if nbytes > self.budget_bytes:
            return
        while self._entries and self.used_bytes + nbytes > self.budget_bytes:
            _, (_, _, size) = self._entries.popitem(last=False)
            self.used_bytes -= size
        self._entries[key] = (host, dev, nbytes)
        self.used_bytes += nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.used_bytes = 0


def _guarded(method: Callable) -> Callable:
    """Converts the device's failures at the backend's boundary; lets everything else through.

    rt.error_kind(exc) decides (cupy_error_kind on a GPU): "oom" frees the caches and tries
    once more, then raises a retryable BackendError; "device" raises BackendUnavailable;
    None (bad input, or a bug here) re-raises the exception itself, traceback intact, so a
    bug fails the attempt that hit it instead of excluding a healthy device.
    """

    def unavailable(self: "CudaBackend", exc: BaseException) -> BackendUnavailable:
        return BackendUnavailable(f"CUDA backend failed in {method.__name__}: {type(exc).__name__}: {exc}",
                                  found=self.rt.describe())

    @functools.wraps(method)
    def wrapper(self: "CudaBackend", *args, **kwargs):
        with self._lock, self.rt.active():
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - classified, and re-raised unless the device's
                kind = self.rt.error_kind(exc)
                if kind is None:
                    raise
                if kind != "oom":
                    raise unavailable(self, exc) from exc
            log.warning("out of device memory in %s: freeing caches and trying once more", method.__name__)
            self.release_memory()
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                kind = self.rt.error_kind(exc)
                if kind is None:
                    raise
                if kind == "oom":
                    raise BackendError(f"out of device memory in {method.__name__} on {self.rt.describe()}",
                                       found=self.memory()) from exc
                raise unavailable(self, exc) from exc
    return wrapper


# ---- the backend ------------------------------------------------------------------------

class CudaBackend:
    """The Backend interface (groth16/backends/base.py) on one CUDA device.

    Args:
        curve: the curve every call works on.
        device: CUDA device ordinal among the visible ones (default $ZKQUEUE_CUDA_DEVICE or 0).
        cache_bytes: device memory for mirrored key sections (default
            $ZKQUEUE_CUDA_CACHE_BYTES or half of the device's memory).
        runtime: a Runtime to launch with (tests pass cuda_emu.EmulatedRuntime).

    Raises:
        BackendUnavailable: CuPy or the device cannot be used, or the kernels do not compile.
    """

    name = "cuda"

    def __init__(self, curve: Curve, *, device: int | None = None, cache_bytes: int | None = None,
                 runtime: Any = None):
        self.curve = curve
        self._lock = threading.RLock()
        if runtime is None:
            device = int(os.environ.get("ZKQUEUE_CUDA_DEVICE", "0")) if device is None else device
            try:
                runtime = CupyRuntime(curve, device)
            except Exception as exc:  # noqa: BLE001 - classified below; a bug propagates
                # ImportError/OSError: CuPy missing or broken; the rest: no device, driver, NVRTC.
                if not isinstance(exc, (ImportError, OSError)) and cupy_error_kind(exc) is None:
                    raise
                raise BackendUnavailable(f"the CUDA kernels cannot run on device {device}: "
                                         f"{type(exc).__name__}: {exc}", found=str(exc)) from exc
        self.rt = runtime
        self.xp = runtime.xp
        if cache_bytes is None:
            env = os.environ.get("ZKQUEUE_CUDA_CACHE_BYTES")
            cache_bytes = int(env) if env else self.rt.memory()["device_total_bytes"] // 2
        self._mirrors = _Mirrors(cache_bytes)
        self._outputs: dict[int, tuple[weakref.ref, Any]] = {}
        self._tables: dict[tuple, tuple[Any, Any, int]] = {}
        self._q_words = curve.n8q // 8
        self._scalar_bits = curve.r.bit_length()
        with self.rt.active():  # allocations land on the pinned device
            self._dummy = self.xp.zeros(4, dtype=self.xp.uint64)
            self._b1 = self.rt.upload(_mont_words([curve.b], curve.q, self._q_words))
            self._b2 = self.rt.upload(_mont_words(list(curve.b2), curve.q, self._q_words))
        log.info("cuda backend on %s for %s, kernels %s", self.rt.describe(), curve.name, source_hash())

    # -- bookkeeping ------------------------------------------------------------------

    def fingerprint(self) -> dict[str, str]:
        """What produced a proof: backend, device and a hash of the kernel sources."""
        return {"backend": self.name, "device": self.rt.describe(), "kernels": source_hash()}

    def memory(self) -> dict[str, int]:
        """Device memory: cached key sections, CuPy's pool, the device's free and total bytes."""
        return {"cache_bytes": self._mirrors.used_bytes, "cache_budget_bytes": self._mirrors.budget_bytes,
                **self.rt.memory()}

    def release_memory(self) -> None:
        """Drops every cached key section and table and returns pooled memory to the device."""
        with self._lock:
            self._mirrors.clear()
            self._tables.clear()
            self._outputs.clear()
            self.rt.free_pool()

    close = release_memory

    def _input(self, arr: np.ndarray, tag: str = "in"):
        """The device copy of a host array: a remembered output, a cached mirror, or a new upload."""
        hit = self._outputs.get(id(arr))
        if hit is not None and hit[0]() is arr and not arr.flags.writeable:
            return hit[1]
        arr = np.ascontiguousarray(arr)
        if _immutable(arr):
            key = _Mirrors.key(tag, arr)
            dev = self._mirrors.get(key)
            if dev is None:
                dev = self.rt.upload(arr)
                self._mirrors.put(key, arr, dev, arr.nbytes)
            return dev
        return self.rt.upload(arr)

    def _output(self, dev) -> np.ndarray:
        """A device result as a read-only host array, remembered so that passing it back is free."""
        host = self.rt.download(dev)
        host.flags.writeable = False
        ident = id(host)
        self._outputs[ident] = (weakref.ref(host), dev)
        weakref.finalize(host, self._outputs.pop, ident, None)
        return host

    def _launch(self, name: str, threads: int, *args, block: int = BLOCK) -> None:
        self.rt.launch(name, threads, args, block=block)

    def _fr_array(self, arr: np.ndarray, what: str, n: int | None = None) -> np.ndarray:
        arr = as_words(arr, 4, what)
        if n is not None and len(arr) != n:
            raise InputError(f"{what}: {len(arr)} elements where {n} were expected", expected=n, found=len(arr))
        return arr

    def _table(self, x: int, scale: int, log_count: int):
        key = (x, scale, log_count)
        if key not in self._tables:
            lo, hi, bits = _geometric_tables(self.curve.r, x % self.curve.r, scale, log_count)
            self._tables[key] = (self.rt.upload(lo), self.rt.upload(hi), bits)
        return self._tables[key]

    # -- pointwise ------------------------------------------------------------------------

    @_guarded
    def mul(self, a_mont: np.ndarray, b_mont: np.ndarray) -> np.ndarray:
        """Pointwise a * b (Montgomery form in and out)."""
        a = self._fr_array(a_mont, "mul a")
        n = len(a)
        b = self._fr_array(b_mont, "mul b", n)
        out = self.xp.empty((n, 4), dtype=self.xp.uint64)
        self._launch("fr_mul", n, self._input(a), self._input(b), out, np.uint64(n))
        return self._output(out)

    @_guarded
    def h_scalars(self, a_mont: np.ndarray, b_mont: np.ndarray, c_mont: np.ndarray) -> np.ndarray:
        """a*b - c pointwise, out of Montgomery form: the H MSM's scalars."""
        a = self._fr_array(a_mont, "h a")
        n = len(a)
        b, c = self._fr_array(b_mont, "h b", n), self._fr_array(c_mont, "h c", n)
        out = self.xp.empty((n, 4), dtype=self.xp.uint64)
        self._launch("fr_h_scalars", n, self._input(a), self._input(b), self._input(c), out, np.uint64(n))
        return self._output(out)

    # -- A and B from the key's coefficients ----------------------------------------------

    def _coef_rows(self, coefs: np.ndarray, domain_size: int):
        """The coefficients sorted by row (A rows, then B rows) as CSR, validated; cached per key.

        Returns (row_start u32[2*domain+1], signal u32[m], value (m, 4) u64, max_signal).
        Raises FormatError naming the first bad entry.
        """
        xp = self.xp
        raw = np.ascontiguousarray(coefs).view(np.uint8).reshape(-1)  # 44-byte records or raw bytes
        if raw.size % 44:
            raise FormatError("coefficient section is not a whole number of 44-byte entries",
                              expected="multiple of 44 bytes", found=raw.size)
        ncoefs = raw.size // 44
        key = _Mirrors.key("coefs", coefs, domain_size)
        hit = self._mirrors.get(key) if _immutable(coefs) else None
        if hit is not None:
            return hit
        words = self.rt.upload(raw.view(np.uint32)).reshape(ncoefs, 11)
        matrix, row, signal = words[:, 0], words[:, 1], words[:, 2]
        value = xp.ascontiguousarray(words[:, 3:11]).view(xp.uint64)
        bad = (matrix > 1) | (row >= domain_size) | self._geq_r(value)
        if ncoefs and bool(bad.any()):
            i = int(xp.argmax(bad))
            m, c = int(matrix[i]), int(row[i])
            why = (f"matrix {m} is neither 0 (A) nor 1 (B)" if m > 1 else
                   f"constraint {c} is not below the domain size {domain_size}" if c >= domain_size else
                   "coefficient is not below r")
            raise FormatError(f"corrupt .zkey: section 4 (coefficients) entry {i}: {why}", found=i)
        order = xp.argsort(matrix.astype(xp.int64) * domain_size + row)
        sorted_rows = (matrix.astype(xp.int64) * domain_size + row)[order]
        row_start = xp.searchsorted(sorted_rows, xp.arange(2 * domain_size + 1, dtype=xp.int64)).astype(xp.uint32)
        result = (row_start, xp.ascontiguousarray(signal[order]), xp.ascontiguousarray(value[order]),
                  int(signal.max()) if ncoefs else -1)
        if _immutable(coefs):
            self._mirrors.put(key, coefs, result, row_start.nbytes + 36 * ncoefs)
        return result

    def _geq_r(self, words) -> Any:
        """Rows of an (m, 4) uint64 device array that are >= r."""
        xp = self.xp
        gt = xp.zeros(len(words), dtype=bool)
        eq = xp.ones(len(words), dtype=bool)
        for i in range(3, -1, -1):
            limb = np.uint64((self.curve.r >> (64 * i)) & 0xFFFFFFFFFFFFFFFF)
            gt |= eq & (words[:, i] > limb)
            eq &= words[:, i] == limb
        return gt | eq

    @_guarded
    def evaluate_ab(self, coefs: np.ndarray, witness_std: np.ndarray, domain_size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Evaluations of A and B on the domain (Montgomery form, shape (domain_size, 4)).

        Raises:
            FormatError: a coefficient entry names another matrix, a row outside the domain,
                a signal beyond the witness, or a value >= r.
        """
        witness = self._fr_array(witness_std, "witness")
        nvars = len(witness)
        row_start, signal, value, max_signal = self._coef_rows(coefs, domain_size)
        if max_signal >= nvars:
            i = int(self.xp.argmax(signal >= nvars))
            raise FormatError(f"corrupt .zkey: section 4 (coefficients): an entry names signal "
                              f"{int(signal[i])}, beyond the witness's {nvars} values", expected=f"< {nvars}",
                              found=int(signal[i]))
        rows = 2 * domain_size
        out = self.xp.empty((rows, 4), dtype=self.xp.uint64)
        self._launch("fr_evaluate_ab", rows, row_start, signal, value, self._input(witness, "witness"),
                     np.uint64(rows), out)
        return self._output(out[:domain_size]), self._output(out[domain_size:])

    # -- NTT ------------------------------------------------------------------------------

    @_guarded
    def ntt(self, values_mont: np.ndarray, *, inverse: bool = False, coset_shift: int | None = None
            ) -> np.ndarray:
        """Forward or inverse NTT over the size-n domain, natural order (see base.Backend.ntt).

        Kernels: ntt_bitrev (with the forward shift g^i), log2(n) x ntt_stage, and for the
        inverse fr_scale by n^-1 * g^-i.

        Raises:
            UnsupportedError: n is not a power of two or exceeds the field's 2-adicity.
        """
        curve, r = self.curve, self.curve.r
        values = self._fr_array(values_mont, "ntt values")
        n = len(values)
        k = n.bit_length() - 1
        if n == 0 or n & (n - 1) or k > curve.two_adicity:
            raise UnsupportedError(f"NTT size {n} is not a power of two up to 2^{curve.two_adicity}",
                                   expected=f"2^k, k <= {curve.two_adicity}", found=n)
        if coset_shift is not None and coset_shift % r == 0:
            raise InputError("NTT coset shift must be nonzero mod r", found=coset_shift)
        return self._output(self._ntt_device(self._input(values), k, inverse, coset_shift))

    def _ntt_device(self, x, k: int, inverse: bool, coset_shift: int | None):
        """The NTT of a device array of 2^k elements into a new device array (no transfers)."""
        curve, r, n = self.curve, self.curve.r, 1 << k
        out = self.xp.empty((n, 4), dtype=self.xp.uint64)
        if not inverse and coset_shift is not None:
            lo, hi, bits = self._table(coset_shift, 1, k)
            self._launch("ntt_bitrev", n, x, out, np.uint64(n), np.uint32(k), lo, hi, np.uint32(bits), np.uint32(1))
        else:
            self._launch("ntt_bitrev", n, x, out, np.uint64(n), np.uint32(k), self._dummy, self._dummy,
                         np.uint32(0), np.uint32(0))
        omega = curve.root_of_unity(k)
        if inverse:
            omega = pow(omega, -1, r)
        if k > 0:
            lo, hi, bits = self._table(omega, 1, k - 1)
            for log_h in range(k):
                self._launch("ntt_stage", n // 2, out, np.uint64(n), np.uint32(k), np.uint32(log_h), lo, hi,
                             np.uint32(bits))
        if inverse and n > 1:
            g_inv = pow(coset_shift, -1, r) if coset_shift is not None else 1
            lo, hi, bits = self._table(g_inv, pow(n, -1, r), k)
            self._launch("fr_scale", n, out, np.uint64(n), lo, hi, np.uint32(bits))
        return out

    # -- MSM ------------------------------------------------------------------------------

    @_guarded
    def msm_g1(self, points: np.ndarray, scalars_std: np.ndarray) -> bytes:
        """sum scalars[i] * points[i] on G1, as affine LEM bytes (zeros for infinity).

        Raises:
            InputError: a scalar is >= r, or the shapes disagree.
        """
        return self._msm("g1", points, scalars_std)

    @_guarded
    def msm_g2(self, points: np.ndarray, scalars_std: np.ndarray) -> bytes:
        """sum scalars[i] * points[i] on G2, as affine LEM bytes (zeros for infinity).

        Raises:
            InputError: a scalar is >= r, or the shapes disagree.
        """
        return self._msm("g2", points, scalars_std)

    def _msm(self, group: str, points: np.ndarray, scalars: np.ndarray) -> bytes:
        """msm.cu's steps 1-5; the points are fed in chunks of at most SORT_ENTRIES / windows."""
        xp = self.xp
        coord = self._q_words * (1 if group == "g1" else 2)  # words per coordinate
        points = as_words(points, 2 * coord, f"msm_{group} points")
        n = len(points)
        scalars = self._fr_array(scalars, f"msm_{group} scalars", n)
        if n == 0:
            return bytes(16 * coord)
        if n >= 1 << 31:
            raise UnsupportedError(f"msm_{group}: at most 2^31 - 1 points", found=n)
        pts = self._input(points, "points")
        sc = self._input(scalars)
        c = choose_window(n, self._scalar_bits)
        windows = -(-(self._scalar_bits + 1) // c)
        half = 1 << (c - 1)
        xyzz = 4 * coord
        buckets = xp.zeros((windows * half, xyzz), dtype=xp.uint64)
        bad = xp.full(1, U64_MAX, dtype=xp.uint64)
        chunk = max(1, SORT_ENTRIES // windows)
        for start in range(0, n, chunk):
            end = min(n, start + chunk)
            count = end - start
            counts = xp.zeros(windows * half, dtype=xp.uint32)
            self._launch("msm_count", count, sc[start:end], np.uint64(count), np.uint32(c), np.uint32(windows),
                         counts, bad)
            ends = xp.cumsum(counts, dtype=xp.uint64)
            m = int(ends[-1])
            bad_index = int(bad[0])
            if bad_index != int(U64_MAX):
                raise InputError(f"msm_{group}: scalar {start + bad_index} is not below r",
                                 expected=f"< {self.curve.r}", found=start + bad_index)
            if m == 0:
                continue
            cursor = (ends - counts).astype(xp.uint32)
            keys = xp.empty(m, dtype=xp.uint32)
            vals = xp.empty(m, dtype=xp.uint32)
            self._launch("msm_scatter", count, sc[start:end], np.uint64(count), np.uint32(c), np.uint32(windows),
                         cursor, keys, vals)
            del counts, cursor, ends
            self._reduce_levels(group, keys, pts[start:end], vals, m, buckets)
        groups = max(1, math.isqrt(2 * half))
        parts = xp.empty((windows * groups, xyzz), dtype=xp.uint64)
        self._launch(f"msm_window_parts_{group}", windows * groups, buckets, np.uint32(windows), np.uint32(c),
                     np.uint32(groups), parts)
        sums = xp.empty((windows, xyzz), dtype=xp.uint64)
        self._launch(f"msm_window_sums_{group}", windows, parts, np.uint32(windows), np.uint32(groups), sums)
        out = xp.empty((1, xyzz), dtype=xp.uint64)
        self._launch(f"msm_finish_{group}", 1, sums, np.uint32(windows), np.uint32(c), out, block=32)
        return self._xyzz_to_lem(group, self.rt.download(out)[0])

    def _reduce_levels(self, group: str, keys, pts, vals, m: int, buckets) -> None:
        """msm.cu step 3: levels of the segmented sum until one slice is left."""
        xp = self.xp
        xyzz = buckets.shape[1]
        kernel, inputs = f"msm_level_points_{group}", (keys, pts, vals)
        while True:
            slices = -(-m // LEVEL_SLICE)
            if slices == 1:
                self._launch(kernel, 1, *inputs, np.uint64(m), np.uint32(LEVEL_SLICE), self._dummy.view(xp.uint32),
                             self._dummy, buckets, block=32)
                return
            out_keys = xp.empty(2 * slices, dtype=xp.uint32)
            out_parts = xp.empty((2 * slices, xyzz), dtype=xp.uint64)
            self._launch(kernel, slices, *inputs, np.uint64(m), np.uint32(LEVEL_SLICE), out_keys, out_parts, buckets)
            kernel, inputs, m = f"msm_level_parts_{group}", (out_keys, out_parts), 2 * slices

    def _xyzz_to_lem(self, group: str, words: np.ndarray) -> bytes:
        """An XYZZ result (Montgomery words) as affine LEM bytes: x = X/ZZ, y = Y/ZZZ."""
        q, nw = self.curve.q, self._q_words
        r_inv = pow(pow(2, 64 * nw, q), -1, q)
        ints = [int.from_bytes(words[i * nw:(i + 1) * nw].tobytes(), "little") * r_inv % q
                for i in range(len(words) // nw)]
        if group == "g1":
            X, Y, ZZ, ZZZ = ints
            if ZZ == 0:
                return bytes(2 * self.curve.n8q)
            x, y = X * pow(ZZ, -1, q) % q, Y * pow(ZZZ, -1, q) % q
            return fq_to_lem(self.curve, x) + fq_to_lem(self.curve, y)
        X, Y, ZZ, ZZZ = ((ints[i], ints[i + 1]) for i in range(0, 8, 2))
        if ZZ == (0, 0):
            return bytes(4 * self.curve.n8q)
        x, y = _fq2_mul(X, _fq2_inv(ZZ, q), q), _fq2_mul(Y, _fq2_inv(ZZZ, q), q)
        return b"".join(fq_to_lem(self.curve, v) for v in (*x, *y))

    # -- point checks ---------------------------------------------------------------------

    @_guarded
    def check_g1(self, points: np.ndarray) -> None:
        """Checks that every point has coordinates < q and lies on G1's curve (zeros = infinity).

        The points stay cached on the device for the MSMs that follow.

        Raises:
            FormatError: naming the first bad point.
        """
        self._check("g1", points)

    @_guarded
    def check_g2(self, points: np.ndarray) -> None:
        """As check_g1 on G2's twist."""
        self._check("g2", points)

    def _check(self, group: str, points: np.ndarray) -> None:
        coord = self._q_words * (1 if group == "g1" else 2)
        points = as_words(points, 2 * coord, f"{group.upper()} point")
        n = len(points)
        if n == 0:
            return
        bad = self.xp.full(1, U64_MAX, dtype=self.xp.uint64)
        self._launch(f"check_{group}", n, self._input(points, "points"), np.uint64(n),
                     self._b1 if group == "g1" else self._b2, bad)
        code = int(bad[0])
        if code != int(U64_MAX):
            i, off_curve = code >> 1, code & 1
            why = "is not on the curve" if off_curve else "has a coordinate that is not below q"
            raise FormatError(f"point {i} {why}", found=i)

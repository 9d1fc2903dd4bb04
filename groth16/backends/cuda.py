"""CUDA backend: the kernels of groth16/kernels/*.cu on one pinned GPU, through CuPy.

How it is put together (a newcomer's map):
  * Sources: each curve's kernels form a few module units (UNITS: the scalar-field kernels,
    G1's MSM, G2's MSM), each one CUDA translation unit made by `module_source(curve,
    unit)`: its .cu files after a `#line 1 "<path>"` (so compiler errors name the real
    file and line), `#include`s resolved from groth16/kernels (the .cuh headers the CPU
    build shares). cuda_compile.py turns a unit into a cubin with NVRTC, cached on disk by
    the unit's text (which embeds the hash of every kernel source), the architecture and
    NVRTC's version; the units compile in parallel, and the GPU image compiles them at build.
  * Kernels are launched through a small `Runtime` (CuPy here; `cuda_emu.EmulatedRuntime`
    runs the same .cu files compiled by g++ as threads with their races checked, so the
    whole backend is tested on machines without a GPU). Everything uses `rt.xp` (cupy or numpy).
  * Residency: key sections (read-only memory maps of the .zkey: points, coefficients) are
    mirrored once in an LRU cache with a byte budget, so the next partition with the same
    key uploads only its witness. Nothing else is cached: a partition's witness and
    intermediates are freed with it. Arrays returned by the step-by-step methods are
    read-only and remembered, so handing them back costs no upload; `prove_whole`
    (cuda_prove.py) keeps every intermediate on the device and returns only the proof.
  * Errors are converted at the public methods, and only the device's: out of device memory
    (after freeing the caches and trying once more) is a retryable BackendError; any other
    CUDA runtime or driver error, an NVRTC or compile error, or a CUDA library that does not
    load is BackendUnavailable (not retryable on this device: a faulted CUDA context stays
    faulted). Everything else (InputError and its kind, and any other exception, which is a
    bug in this code) propagates unchanged, with its traceback. `cupy_error_kind` decides.

The algorithms are in the .cu files; cuda_msm.py, cuda_ntt.py and cuda_prove.py say which
kernels run in what order.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import weakref
import zipfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from ..curves import Curve
from .base import as_words
from .cuda_source import PRODUCTION_UNITS, source_hash, unit_of
from ..encoding import fq_to_lem
from ..errors import BackendError, BackendUnavailable, FormatError, InputError, UnsupportedError

log = logging.getLogger("zkqueue.backend.cuda")

BLOCK = 256                 # threads per block where occupancy does not decide
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


# ---- which errors are the device's ---------------------------------------------------------

CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY alike


def cupy_error_kind(exc: BaseException) -> str | None:
    """What CuPy raised, if it is the device's failure at all.

    Returns "oom" for device memory exhausted (CuPy's OutOfMemoryError, or a runtime or
    driver call that returned the out-of-memory status), "device" for any other CUDA
    runtime or driver error, an NVRTC error or a kernel that does not compile (CuPy's or
    cuda_compile's), and a CUDA library (libcuda, libnvrtc, ...) that does not load; None
    for everything else, which callers must let propagate. Looks only at classes of a CuPy
    already imported: with no CuPy loaded, nothing can be CuPy's.
    """
    compile_mod = sys.modules.get(f"{__package__}.cuda_compile")
    if compile_mod is not None and isinstance(exc, compile_mod.KernelCompileError):
        return "device"
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


# ---- the GPU runtime --------------------------------------------------------------------

def occupancy_block(num_regs: int, max_threads: int, *, regs_per_sm: int = 65536, threads_per_sm: int = 2048,
                    blocks_per_sm: int = 32) -> int:
    """The block size (a multiple of 64 up to max_threads) that keeps the most warps resident
    on a multiprocessor given the kernel's registers per thread; on a tie the one nearest 256
    (fewer blocks to schedule than 64, a shorter tail than 1024)."""
    regs_per_warp = -(-max(num_regs, 1) * 32 // 256) * 256     # allocated per warp, 256 at a time

    def resident_warps(size: int) -> int:
        warps = size // 32
        return min(regs_per_sm // (regs_per_warp * warps), threads_per_sm // size, blocks_per_sm) * warps

    sizes = range(64, max(64, min(max_threads, 1024)) + 1, 64)
    return max(sizes, key=lambda size: (resident_warps(size), -abs(size - 256)))


class CupyRuntime:
    """Launches the kernels of one curve on one CUDA device through CuPy (cubins from NVRTC)."""

    _modules: dict[tuple, Any] = {}
    _lock = threading.Lock()

    def __init__(self, curve: Curve, device_id: int):
        import cupy

        self.cp = cupy
        self.xp = cupy
        self.curve = curve
        self.device_id = device_id
        self.device = cupy.cuda.Device(device_id)
        with self.device:
            props = cupy.cuda.runtime.getDeviceProperties(device_id)
            self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            self.compute_capability = f"{props['major']}{props['minor']}"
            self.arch = f"sm_{self.compute_capability}"
            self._sm = {"regs_per_sm": int(props.get("regsPerMultiprocessor", 65536)),
                        "threads_per_sm": int(props.get("maxThreadsPerMultiProcessor", 2048))}
            self._kernels: dict[str, tuple[Any, int]] = {}
            self._copy_stream = cupy.cuda.Stream(non_blocking=True)
            self._pinned: list = []
            # Every production unit now, side by side: a compile error surfaces at start-up.
            with ThreadPoolExecutor(len(PRODUCTION_UNITS)) as pool:
                list(pool.map(self._module, PRODUCTION_UNITS))

    def _module(self, unit: str):
        from . import cuda_compile
        path, seconds = cuda_compile.cubin(self.curve, unit, self.arch)
        if seconds:
            log.info("compiled %s %s for %s in %.0f s", self.curve.name, unit, self.arch, seconds)
        key = (self.device_id, str(path))
        with self._lock:
            if key not in self._modules:
                with self.device:
                    self._modules[key] = self.cp.RawModule(path=str(path))
            return self._modules[key]

    def active(self):
        return self.device

    def kernel(self, name: str) -> tuple[Any, int]:
        """(function, block size chosen by occupancy)."""
        hit = self._kernels.get(name)
        if hit is None:
            fn = self._module(unit_of(name)).get_function(name)
            hit = self._kernels[name] = (fn, occupancy_block(fn.num_regs, fn.max_threads_per_block, **self._sm))
        return hit

    def launch(self, name: str, threads: int, args: tuple, *, block: int | None = None, grid: int | None = None,
               shared_bytes: int = 0) -> None:
        """Runs kernel `name` with at least `threads` threads (its loops are grid-stride), or
        exactly `grid` blocks; block size by occupancy unless given."""
        fn, best = self.kernel(name)
        size = block or best
        if grid is None:
            grid = max(1, min(-(-threads // size), 1 << 24))
        if shared_bytes > 48 << 10:
            fn.max_dynamic_shared_size_bytes = shared_bytes
        fn((grid,), (size,), args, shared_mem=shared_bytes)

    def stream(self):
        """A context in which launches go to a new non-blocking stream."""
        return self.cp.cuda.Stream(non_blocking=True)

    def current_stream(self):
        return self.cp.cuda.get_current_stream()

    def upload(self, host: np.ndarray):
        return self.cp.asarray(host)

    def upload_async(self, host: np.ndarray):
        """A device copy of `host` made on the copy stream through pinned memory, and the
        event that marks it done (wait for it with `wait`)."""
        host = np.ascontiguousarray(host)
        self._pinned = [(e, buf) for e, buf in self._pinned if not e.done]   # copies finished: free
        pinned = self.cp.cuda.alloc_pinned_memory(max(1, host.nbytes))
        staging = np.frombuffer(pinned, dtype=host.dtype, count=host.size).reshape(host.shape)
        np.copyto(staging, host)
        dev = self.cp.empty(host.shape, dtype=host.dtype)
        dev.set(staging, stream=self._copy_stream)
        event = self._copy_stream.record()
        self._pinned.append((event, pinned))   # the staging buffer lives until its copy is done
        return dev, event

    def wait(self, event) -> None:
        """The current stream waits for `event` (from upload_async or record)."""
        if event is not None:
            self.cp.cuda.get_current_stream().wait_event(event)

    def record(self):
        return self.cp.cuda.get_current_stream().record()

    def download(self, dev) -> np.ndarray:
        return self.cp.asnumpy(dev)

    def synchronize(self) -> None:
        self.device.synchronize()
        self._pinned.clear()

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
        return f"device {self.device_id}: {self.device_name} ({self.arch})"


# ---- host-side helpers ------------------------------------------------------------------

def mont_words(values: list[int], modulus: int, n_words: int) -> np.ndarray:
    """Integers -> Montgomery form (R = 2^(64*n_words)) as an (len, n_words) uint64 array."""
    r_mont = pow(2, 64 * n_words, modulus)
    data = b"".join((v * r_mont % modulus).to_bytes(8 * n_words, "little") for v in values)
    return np.frombuffer(data, dtype="<u8").reshape(len(values), n_words).copy()


_mont_words = mont_words  # the name tests and benches used


@functools.lru_cache(maxsize=64)
def geometric_tables(r: int, x: int, scale: int, log_count: int) -> tuple[np.ndarray, np.ndarray, int]:
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
    return mont_words(lo, r, 4), mont_words(hi, r, 4), lo_bits


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
    """Device copies of immutable host arrays (key sections), least recently used first out,
    within a budget.

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


class _Replayable:
    """An iterable over an iterator's items that can be iterated again: it keeps what it has
    taken, so a second pass gives those first, then goes on taking."""

    def __init__(self, items):
        self._it, self._seen = iter(items), []

    def __iter__(self):
        yield from self._seen
        for item in self._it:
            self._seen.append(item)
            yield item


# ---- settings (zkqueue.config reads them) ---------------------------------------------------

def cache_bytes_setting() -> int | None:
    """$ZKQUEUE_CUDA_CACHE_BYTES: device memory for key sections; None (unset or 0): half the device."""
    from zkqueue import config
    return config.process().cuda_cache_bytes or None


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
            from zkqueue import config
            device = config.process().cuda_device if device is None else device
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
            cache_bytes = cache_bytes_setting() or self.rt.memory()["device_total_bytes"] // 2
        self._mirrors = _Mirrors(cache_bytes)
        self._outputs: dict[int, tuple[weakref.ref, Any]] = {}
        self._tables: dict[tuple, Any] = {}
        self.q_words = curve.n8q // 8
        self.scalar_bits = curve.r.bit_length()
        with self.rt.active():  # allocations land on the pinned device
            self.dummy = self.xp.zeros(4, dtype=self.xp.uint64)
            self.b_g1 = self.rt.upload(mont_words([curve.b], curve.q, self.q_words))
            self.b_g2 = self.rt.upload(mont_words(list(curve.b2), curve.q, self.q_words))
        log.info("cuda backend on %s for %s, kernels %s", self.rt.describe(), curve.name, source_hash())

    # -- bookkeeping ------------------------------------------------------------------

    def fingerprint(self) -> dict[str, str]:
        """What produced a proof: backend, device and a hash of the kernel and host sources."""
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

    def remembered(self, arr: np.ndarray):
        """The device array behind a host array this backend returned, or None."""
        hit = self._outputs.get(id(arr))
        if hit is not None and hit[0]() is arr and not arr.flags.writeable:
            return hit[1]
        return None

    def input(self, arr: np.ndarray, tag: str = "in", *, key_section: bool = False):
        """The device copy of a host array: a remembered output, a cached key section, or a
        new upload. Only key sections (immutable arrays the caller names as such) are cached;
        a witness or an intermediate is uploaded for this call and freed with it."""
        dev = self.remembered(arr)
        if dev is not None:
            return dev
        arr = np.ascontiguousarray(arr)
        if key_section and _immutable(arr):
            key = _Mirrors.key(tag, arr)
            dev = self._mirrors.get(key)
            if dev is None:
                dev = self.rt.upload(arr)
                self._mirrors.put(key, arr, dev, arr.nbytes)
            return dev
        return self.rt.upload(arr)

    def key_section_async(self, arr: np.ndarray, tag: str):
        """(device copy, event) of a key section: cached ones at once (event None), others
        copied on the copy stream while the device computes (cuda_prove.py)."""
        arr = np.ascontiguousarray(arr)
        if not _immutable(arr):
            return self.rt.upload(arr), None
        key = _Mirrors.key(tag, arr)
        dev = self._mirrors.get(key)
        if dev is not None:
            return dev, None
        dev, event = self.rt.upload_async(arr)
        self._mirrors.put(key, arr, dev, arr.nbytes)
        return dev, event

    def output(self, dev) -> np.ndarray:
        """A device result as a read-only host array, remembered so that passing it back is free."""
        host = self.rt.download(dev)
        host.flags.writeable = False
        ident = id(host)
        self._outputs[ident] = (weakref.ref(host), dev)
        weakref.finalize(host, self._outputs.pop, ident, None)
        return host

    def launch(self, name: str, threads: int, *args, **kw) -> None:
        self.rt.launch(name, threads, args, **kw)

    def fr_array(self, arr: np.ndarray, what: str, n: int | None = None) -> np.ndarray:
        arr = as_words(arr, 4, what)
        if n is not None and len(arr) != n:
            raise InputError(f"{what}: {len(arr)} elements where {n} were expected", expected=n, found=len(arr))
        return arr

    def table(self, x: int, scale: int, log_count: int):
        """(lo, hi, lo_bits) on the device: scale * x^i for i < 2^log_count (ntt.cu)."""
        key = ("powers", x % self.curve.r, scale % self.curve.r, log_count)
        if key not in self._tables:
            lo, hi, bits = geometric_tables(self.curve.r, x % self.curve.r, scale, log_count)
            self._tables[key] = (self.rt.upload(lo), self.rt.upload(hi), bits)
        return self._tables[key]

    # -- pointwise ------------------------------------------------------------------------

    @_guarded
    def mul(self, a_mont: np.ndarray, b_mont: np.ndarray) -> np.ndarray:
        """Pointwise a * b (Montgomery form in and out)."""
        a = self.fr_array(a_mont, "mul a")
        n = len(a)
        b = self.fr_array(b_mont, "mul b", n)
        out = self.xp.empty((n, 4), dtype=self.xp.uint64)
        self.launch("fr_mul", n, self.input(a), self.input(b), out, np.uint64(n))
        return self.output(out)

    @_guarded
    def h_scalars(self, a_mont: np.ndarray, b_mont: np.ndarray, c_mont: np.ndarray) -> np.ndarray:
        """a*b - c pointwise, out of Montgomery form: the H MSM's scalars."""
        a = self.fr_array(a_mont, "h a")
        n = len(a)
        b, c = self.fr_array(b_mont, "h b", n), self.fr_array(c_mont, "h c", n)
        out = self.xp.empty((n, 4), dtype=self.xp.uint64)
        self.launch("fr_h_scalars", n, self.input(a), self.input(b), self.input(c), out, np.uint64(n))
        return self.output(out)

    # -- A and B from the key's coefficients ----------------------------------------------

    def coef_rows(self, coefs: np.ndarray, domain_size: int):
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

    @_guarded
    def resident_coefs(self, coefs: np.ndarray, domain_size: int, index_file=None) -> str:
        """Puts the key's coefficient index (coef_rows: validated, sorted by row) on the device
        now and keeps it there with the key's sections, so the key's first proof does not pay
        for it: a worker calls this when it loads a key.

        `index_file`: where the index is kept on disk between processes (a worker names it
        after the key's sha256, so the file belongs to exactly one key's bytes). Read when it
        exists and has the key's shape (then the validation and sort are skipped: they
        passed when it was written); written (atomically) when the index had to be built.

        Returns "resident" (on the device already), "disk" (read from `index_file`) or
        "built".

        Raises:
            FormatError: naming the first bad entry.
        """
        from pathlib import Path
        raw = np.ascontiguousarray(coefs).view(np.uint8).reshape(-1)
        ncoefs = raw.size // 44
        key = _Mirrors.key("coefs", coefs, domain_size)
        if _immutable(coefs) and self._mirrors.get(key) is not None:
            return "resident"
        path = Path(index_file) if index_file else None
        if path is not None and path.exists() and _immutable(coefs):
            try:
                with np.load(path, allow_pickle=False) as z:
                    row_start, signal, value = z["row_start"], z["signal"], z["value"]
                    max_signal = int(z["max_signal"])
                if (row_start.shape != (2 * domain_size + 1,) or signal.shape != (ncoefs,)
                        or value.shape != (ncoefs, 4) or row_start.dtype != np.uint32 or signal.dtype != np.uint32
                        or value.dtype != np.uint64):
                    raise ValueError(f"shapes {row_start.shape} {signal.shape} {value.shape} are not this key's")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                log.warning("coefficient index %s unusable (%s): building it again", path, exc)
            else:
                up = self.rt.upload
                self._mirrors.put(key, coefs, (up(row_start), up(signal), up(value), max_signal),
                                  row_start.nbytes + 36 * ncoefs)
                return "disk"
        row_start, signal, value, max_signal = self.coef_rows(coefs, domain_size)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
                with open(tmp, "wb") as f:
                    np.savez(f, row_start=self.rt.download(row_start), signal=self.rt.download(signal),
                             value=self.rt.download(value), max_signal=np.int64(max_signal))
                tmp.replace(path)     # whole or absent: a reader never sees half a file
            except OSError as exc:
                log.warning("coefficient index not kept at %s: %s", path, exc)
        return "built"

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

    def evaluate_ab_device(self, coefs: np.ndarray, witness_dev, nvars: int, domain_size: int):
        """A and B evaluations (one (2 * domain, 4) device array: A rows, then B rows).

        Raises FormatError as evaluate_ab."""
        row_start, signal, value, max_signal = self.coef_rows(coefs, domain_size)
        if max_signal >= nvars:
            i = int(self.xp.argmax(signal >= nvars))
            raise FormatError(f"corrupt .zkey: section 4 (coefficients): an entry names signal "
                              f"{int(signal[i])}, beyond the witness's {nvars} values", expected=f"< {nvars}",
                              found=int(signal[i]))
        rows = 2 * domain_size
        out = self.xp.empty((rows, 4), dtype=self.xp.uint64)
        self.launch("fr_evaluate_ab", rows, row_start, signal, value, witness_dev, np.uint64(rows), out)
        return out

    @_guarded
    def evaluate_ab(self, coefs: np.ndarray, witness_std: np.ndarray, domain_size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Evaluations of A and B on the domain (Montgomery form, shape (domain_size, 4)).

        Raises:
            FormatError: a coefficient entry names another matrix, a row outside the domain,
                a signal beyond the witness, or a value >= r.
        """
        witness = self.fr_array(witness_std, "witness")
        out = self.evaluate_ab_device(coefs, self.input(witness), len(witness), domain_size)
        return self.output(out[:domain_size]), self.output(out[domain_size:])

    # -- NTT ------------------------------------------------------------------------------

    @_guarded
    def ntt(self, values_mont: np.ndarray, *, inverse: bool = False, coset_shift: int | None = None
            ) -> np.ndarray:
        """Forward or inverse NTT over the size-n domain, natural order (see base.Backend.ntt).

        Raises:
            UnsupportedError: n is not a power of two or exceeds the field's 2-adicity.
        """
        from . import cuda_ntt
        curve = self.curve
        values = self.fr_array(values_mont, "ntt values")
        n = len(values)
        k = n.bit_length() - 1
        if n == 0 or n & (n - 1) or k > curve.two_adicity:
            raise UnsupportedError(f"NTT size {n} is not a power of two up to 2^{curve.two_adicity}",
                                   expected=f"2^k, k <= {curve.two_adicity}", found=n)
        if coset_shift is not None and coset_shift % curve.r == 0:
            raise InputError("NTT coset shift must be nonzero mod r", found=coset_shift)
        return self.output(cuda_ntt.natural(self, self.input(values), k, inverse, coset_shift))

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

    def coord_words(self, group: str) -> int:
        return self.q_words * (1 if group == "g1" else 2)

    def _msm(self, group: str, points: np.ndarray, scalars: np.ndarray) -> bytes:
        from . import cuda_msm
        coord = self.coord_words(group)
        points = as_words(points, 2 * coord, f"msm_{group} points")
        n = len(points)
        scalars = self.fr_array(scalars, f"msm_{group} scalars", n)
        if n == 0:
            return bytes(16 * coord)
        if n >= 1 << 31:
            raise UnsupportedError(f"msm_{group}: at most 2^31 - 1 points", found=n)
        sc = self.input(scalars)
        if n <= cuda_msm.SMALL_MSM:
            xyzz = self.rt.upload(cuda_msm.affine_to_xyzz(self, group, np.asarray(points)))
            out, bad = cuda_msm.small(self, group, xyzz, sc, groups=1, terms=n)
        else:
            out, bad = cuda_msm.msm(self, group, self.input(points, "points", key_section=True), sc, n)
        cuda_msm.raise_bad_scalar(self, group, bad)
        return self.xyzz_to_lem(group, self.rt.download(out)[0])

    def xyzz_to_lem(self, group: str, words: np.ndarray) -> bytes:
        """An XYZZ result (Montgomery words) as affine LEM bytes: x = X/ZZ, y = Y/ZZZ."""
        q, nw = self.curve.q, self.q_words
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

    # -- the whole proof ------------------------------------------------------------------

    @_guarded
    def prove_whole(self, zkey, witness_std: np.ndarray, r: int, s: int, *, cancel=None
                    ) -> tuple[bytes, bytes, bytes]:
        """The proof points (pi_a, pi_b, pi_c as affine LEM bytes) for blinding scalars r, s,
        with every intermediate on the device (cuda_prove.py); groth16.prover.prove calls it
        in place of the step-by-step kernels, for the same points.

        `cancel`: a ctypes c_int another thread may set to 1 to stop before the next step.

        Raises:
            FormatError: a bad coefficient entry.
            MismatchError: the witness length is not the key's.
            InputError: a witness value >= r.
            Cancelled: `cancel` was set.
        """
        from . import cuda_prove
        return cuda_prove.prove(self, zkey, witness_std, r, s, cancel=cancel)

    def prove_batch(self, zkey, witnesses, blinding: list[tuple[int, int]], *, cancel=None) -> list:
        """B proofs of one key in one pass over the device (cuda_prove.prove_batch): each item
        the proof points (pi_a, pi_b, pi_c as affine LEM bytes) or the InputError its own
        witness caused, so that a bad witness fails only its own proof.

        Raises:
            FormatError: a bad coefficient entry (the key's fault: every proof alike).
            Cancelled: `cancel` was set.
        """
        # Replayable: the out-of-memory retry (_guarded) starts over with the witnesses read so far.
        return self._prove_batch(zkey, _Replayable(witnesses), blinding, cancel=cancel)

    @_guarded
    def _prove_batch(self, zkey, witnesses, blinding, *, cancel=None) -> list:
        from . import cuda_prove
        return cuda_prove.prove_batch(self, zkey, witnesses, blinding, cancel=cancel)

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
        points = as_words(points, 2 * self.coord_words(group), f"{group.upper()} point")
        n = len(points)
        if n == 0:
            return
        bad = self.xp.full(1, U64_MAX, dtype=self.xp.uint64)
        self.launch(f"check_{group}", n, self.input(points, "points", key_section=True), np.uint64(n),
                    self.b_g1 if group == "g1" else self.b_g2, bad)
        code = int(bad[0])
        if code != int(U64_MAX):
            i, off_curve = code >> 1, code & 1
            why = "is not on the curve" if off_curve else "has a coordinate that is not below q"
            raise FormatError(f"point {i} {why}", found=i)


"""The CUDA kernels as machine code: NVRTC compiles each module unit to a cubin for one GPU
architecture, cached on disk by the unit's source hash, the architecture and NVRTC's version.

A worker's first partition would otherwise spend 30-80 s in NVRTC; the GPU image runs
`python -m zkqueue.groth16.backends.cuda_compile --arch sm_80 --arch sm_90` at build, so a
fresh container finds its cubins in the cache ($ZKQUEUE_CACHE_DIR/cuda-cubin). Compiling
needs NVRTC only, no GPU and no driver. NVRTC is loaded with ctypes (no CuPy needed):
$ZKQUEUE_NVRTC_LIB, else the nvidia-cuda-nvrtc wheel's library (CUDA 13 or 12), else what
cuda-pathfinder finds, else the one a loaded CuPy uses, else the system's.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import hashlib
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..curves import BLS12381, BN128, Curve
from . import cuda_source   # the sources; cuda.py launches what this compiles

PREBUILT_ARCHS = ("sm_80", "sm_90")   # A100, H100/H200: what the GPU image compiles at build

# CuPy's wheels, by the CUDA major version they are built for ("cupy" is a source build).
CUPY_DISTRIBUTIONS = {"cupy-cuda13x": 13, "cupy-cuda12x": 12, "cupy-cuda11x": 11, "cupy": None}


def cupy_distribution() -> tuple[str, str, int | None] | None:
    """(name, version, CUDA major or None) of the installed CuPy, found without importing it."""
    import importlib.metadata  # here, not at the top: it costs every `zkqueue prove` ~30 ms
    for name, major in CUPY_DISTRIBUTIONS.items():
        try:
            return name, importlib.metadata.version(name), major
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


class KernelCompileError(RuntimeError):
    """NVRTC refused a module (the log is in the message), or is not there at all."""


def nvrtc_lib_setting() -> str | None:
    """$ZKQUEUE_NVRTC_LIB (zkqueue.config): a libnvrtc path to use first (None when unset)."""
    from zkqueue import config
    return config.process().nvrtc_lib or None


def cache_dir() -> Path:
    """$ZKQUEUE_CACHE_DIR (zkqueue.config): the local cache directory."""
    from zkqueue import config
    return config.process().cache_path


def _candidates() -> list[str]:
    """Paths to try, best first. Among NVIDIA's wheels, the one for CuPy's CUDA major comes
    first: cubins from a newer CUDA than the driver's do not load (and the worker's
    fingerprint names the NVRTC of CuPy's major)."""
    dist = cupy_distribution()
    subs = ["cu13/lib", "cuda_nvrtc/lib"]   # CUDA 13's wheel, CUDA 12's
    if dist and dist[2] == 12:
        subs.reverse()
    paths = [nvrtc_lib_setting()]
    try:
        import nvidia  # type: ignore[import-not-found]  (namespace package of NVIDIA's wheels)
        for sub in subs:
            for root in map(Path, nvidia.__path__):
                paths += sorted((str(p) for p in (root / sub).glob("libnvrtc.so.*")), reverse=True)
    except ImportError:
        pass
    try:   # cuda-pathfinder (CuPy 14 finds NVRTC through it)
        from cuda.pathfinder import load_nvidia_dynamic_lib  # type: ignore[import-not-found]
        paths.append(getattr(load_nvidia_dynamic_lib("nvrtc"), "abs_path", None))
    except Exception:  # noqa: BLE001 - not installed, or it found nothing: other places follow
        pass
    if "cupy" in sys.modules:   # the library CuPy already loaded, if any
        try:
            maps = Path("/proc/self/maps").read_text().splitlines()
        except OSError:
            maps = []
        paths += sorted({m.split()[-1] for m in maps if "libnvrtc.so" in m and "builtins" not in m})
    paths.append(ctypes.util.find_library("nvrtc"))
    paths += [str(p) for p in sorted(Path("/usr/local/cuda/lib64").glob("libnvrtc.so*"), reverse=True)
              if "builtins" not in p.name]
    return [p for p in paths if p]


_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def nvrtc() -> ctypes.CDLL:
    """The NVRTC library (loaded once). Raises KernelCompileError when none loads."""
    global _lib
    with _lib_lock:
        if _lib is None:
            tried = []
            for path in _candidates():
                try:
                    _lib = ctypes.CDLL(path)
                    break
                except OSError as exc:
                    tried.append(f"{path}: {exc}")
            else:
                raise KernelCompileError("NVRTC is not installed (pip install nvidia-cuda-nvrtc, or set "
                                         "ZKQUEUE_NVRTC_LIB)" + (f"; tried {tried}" if tried else ""))
        return _lib


def nvrtc_version() -> str:
    """NVRTC's version, e.g. "13.0"."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _check(rc: int, what: str) -> None:
    if rc != 0:
        lib = nvrtc()
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise KernelCompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(rc).decode()}")


def compile_source(text: str, name: str, options: list[str]) -> tuple[bytes, str]:
    """(cubin, log) of one translation unit; options must name a real architecture
    (--gpu-architecture=sm_XX). Raises KernelCompileError with NVRTC's log."""
    lib = nvrtc()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), name.encode(), 0, None, None), "createProgram")
    try:
        argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.nvrtcGetProgramLog(prog, log)
        log_text = log.value.decode(errors="replace")
        if rc != 0:
            raise KernelCompileError(f"NVRTC could not compile {name} ({' '.join(options)}):\n{log_text[-6000:]}")
        _check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "getCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, cubin), "getCUBIN")
        return cubin.raw, log_text
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def options(arch: str) -> list[str]:
    return [*cuda_source.compile_options(), f"--gpu-architecture={arch}"]


def cubin_path(curve: Curve, unit: str, arch: str) -> Path:
    """Where the cubin of (curve, unit, arch) is cached: keyed by the module's text (which
    embeds the hash of every kernel source), the options and NVRTC's version."""
    key = hashlib.sha256("\0".join([cuda_source.module_source(curve, unit), *options(arch), nvrtc_version()]).encode())
    return cache_dir() / "cuda-cubin" / f"{curve.name}-{unit}-{arch}-{key.hexdigest()[:20]}.cubin"


def cubin(curve: Curve, unit: str, arch: str) -> tuple[Path, float]:
    """The cached cubin's path, compiling it first when absent; and the seconds spent compiling
    (0 on a hit). Raises KernelCompileError."""
    path = cubin_path(curve, unit, arch)
    if path.exists():
        return path, 0.0
    t0 = time.monotonic()
    data, _ = compile_source(cuda_source.module_source(curve, unit), f"zkq_{curve.name}_{unit}.cu", options(arch))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)    # an image built as root serves workers that may not run as root
    os.replace(tmp, path)   # atomic: two workers compiling at once both end with a whole file
    return path, time.monotonic() - t0


def prebuild(archs=PREBUILT_ARCHS, curves=(BN128, BLS12381), units=None, jobs: int | None = None
             ) -> list[tuple[str, str, str, float]]:
    """Compiles every (curve, unit, arch) into the cache, in parallel; returns
    (curve, unit, arch, seconds) per cubin. Raises KernelCompileError."""
    units = units or cuda_source.PRODUCTION_UNITS
    work = [(c, u, a) for c in curves for u in units for a in archs]
    with ThreadPoolExecutor(jobs or min(len(work), os.cpu_count() or 1)) as pool:
        done = list(pool.map(lambda w: cubin(*w)[1], work))
    return [(c.name, u, a, s) for (c, u, a), s in zip(work, done)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Compile zkqueue's CUDA kernels to cubins in the cache (no GPU needed)")
    p.add_argument("--arch", action="append", help=f"sm_XX (repeatable; default {' '.join(PREBUILT_ARCHS)})")
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--all-units", action="store_true", help="the test-only units too (selftest)")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    units = tuple(cuda_source.UNITS) if args.all_units else cuda_source.PRODUCTION_UNITS
    try:
        rows = prebuild(tuple(args.arch or PREBUILT_ARCHS), units=units, jobs=args.jobs)
    except KernelCompileError as exc:
        print(f"cuda_compile: {exc}", file=sys.stderr)
        return 1
    for curve, unit, arch, s in rows:
        print(f"  {curve:<9} {unit:<4} {arch}: {'cached' if s == 0 else f'{s:.0f} s'}")
    print(f"cuda_compile: {len(rows)} cubins in {cache_dir() / 'cuda-cubin'} (NVRTC {nvrtc_version()}, "
          f"{time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

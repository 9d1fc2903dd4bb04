"""Builds and loads the native CPU kernels (groth16/kernels/cpu/*.cpp) as one shared library.

The library is compiled with the host C++ compiler on first use and cached under
``$ZKQUEUE_CACHE_DIR`` (default ``~/.cache/zkqueue``) in a folder named by a hash of every
kernel source, the compiler (its resolved binary's path, size and mtime: no subprocess on
the hot path of every `zkqueue prove`), the flags and the CPU's feature flags, so an edited
header, an upgraded compiler or another machine never loads a stale build. Builds are atomic (compile into a
temporary folder, then rename), so concurrent workers starting together are safe.

Two arithmetic variants exist: "x86-adx" (Montgomery products in mulx/adcx/adox assembly,
kernels/cpu/mont_x86.hpp) and "portable" (plain C++). The CPU's features pick one at run
time (`default_variant`); ZKQUEUE_CPU_ARITH=portable forces the fallback, and the tests
load both.
"""

from __future__ import annotations

import ctypes
import os
from _thread import allocate_lock  # threading.Lock, without importing threading (~1 ms)

from .errors import NativeBuildError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path

try:
    # hashlib loads OpenSSL (about 3.7 MB of resident memory and 10 ms) before it hands out
    # even its built-in hashes; the CPU prove process hashes the kernel sources on every start
    # and uses no other hash. _blake2 is CPython's own module behind hashlib.blake2b.
    from _blake2 import blake2b as _hash
except ImportError:  # an interpreter without it
    from hashlib import blake2b as _hash

# Paths as strings, and os.path rather than pathlib on the way to a cached build: pathlib
# brings re, enum, fnmatch and urllib.parse, about 10 ms of every `zkqueue prove`'s start-up.
KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
CPU_DIR = os.path.join(KERNEL_DIR, "cpu")
LIB_NAME = "libzkq_cpu.so"
CXX_FLAGS = ["-O3", "-std=c++17", "-fPIC", "-pthread", "-march=native",
             "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]
# The C++ runtime linked in, its symbols kept private: loading libstdc++.so (and relocating
# it) took 1.1-1.6 ms of every process that loads the kernels, the library itself 0.2 ms.
LINK_FLAGS = ["-shared", "-pthread", "-static-libstdc++", "-static-libgcc", "-Wl,--exclude-libs,ALL"]

VARIANTS: dict[str, list[str]] = {"x86-adx": ["-DZKQ_X86_ASM"], "portable": []}

_lock = allocate_lock()
_libs: dict[str, ctypes.CDLL] = {}


def kernel_sources() -> list[Path]:
    """Every file the CPU library is built from (shared headers and CPU sources), sorted."""
    from pathlib import Path  # noqa: PLC0415 - see KERNEL_DIR
    return [Path(p) for p in _source_files()]


def _source_files() -> list[str]:
    """kernel_sources() as strings."""
    return _files(KERNEL_DIR, ".cuh") + _files(CPU_DIR, ".hpp") + _files(CPU_DIR, ".cpp")


def _files(folder: str, suffix: str) -> list[str]:
    """sorted(folder.glob("*" + suffix)) without glob's pattern matching (fnmatch compiles a
    regular expression for each pattern: 0.6 ms of every `zkqueue prove`, which hashes the
    sources to find its build)."""
    with os.scandir(folder) as entries:
        return sorted(os.path.join(folder, e.name) for e in entries if e.name.endswith(suffix))


def _machine() -> str:
    """platform.machine(), without importing platform."""
    return os.uname().machine


def _which(name: str) -> str | None:
    """shutil.which for a command name or path, without importing shutil (it brings bz2 and
    lzma: about 0.8 MB of resident memory in every one-shot prove, which only needs this)."""
    candidates = [name] if os.sep in name else [os.path.join(d, name) for d in os.get_exec_path()]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _compiler() -> str:
    from zkqueue import config  # noqa: PLC0415 - groth16 sits below zkqueue's packages
    cxx = config.compiler() or _which("g++") or _which("c++") or _which("clang++")
    if not cxx:
        raise NativeBuildError("no C++ compiler found (install g++ or set CXX)",
                               expected="g++, c++ or clang++ on PATH", found="none")
    return cxx


_memo: dict[tuple, str] = {}


def _once(key: tuple, compute) -> str:
    """compute(), remembered under `key`: functools.lru_cache's job, without importing
    functools (it brings collections, ~1 ms of `zkqueue prove`'s start-up)."""
    value = _memo.get(key)
    if value is None:
        value = _memo[key] = compute()
    return value


def _cpu_flags() -> str:
    return _once(("cpu_flags",), _read_cpu_flags)


def _read_cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:  # the first processor's flags line is all it takes
                if line.startswith("flags"):
                    return line.rstrip("\n")
    except OSError:
        pass
    import platform  # noqa: PLC0415 - no /proc/cpuinfo: rare; platform costs ~6 ms of start-up
    return platform.processor()


def default_variant() -> str:
    """The arithmetic variant for this CPU: "x86-adx" on x86-64 with BMI2 and ADX, else "portable".

    ZKQUEUE_CPU_ARITH=portable|x86-adx overrides the choice.

    Raises:
        NativeBuildError: ZKQUEUE_CPU_ARITH names no variant, or x86-adx on a CPU without it.
    """
    from zkqueue import config  # noqa: PLC0415
    forced = config.process().cpu_arith
    if forced:
        if forced not in VARIANTS:
            raise NativeBuildError("ZKQUEUE_CPU_ARITH names no arithmetic variant",
                                   expected=" or ".join(VARIANTS), found=forced)
        if forced == "x86-adx" and not has_adx():
            raise NativeBuildError("ZKQUEUE_CPU_ARITH=x86-adx but this CPU lacks BMI2/ADX",
                                   expected="bmi2 and adx in /proc/cpuinfo", found=_machine())
        return forced
    return "x86-adx" if has_adx() else "portable"


def has_adx() -> bool:
    """True on an x86-64 CPU with the BMI2 (mulx) and ADX (adcx/adox) instructions."""
    if _machine() not in ("x86_64", "AMD64"):
        return False
    flags = set(_cpu_flags().split())
    return {"bmi2", "adx"} <= flags


def source_hash() -> str:
    """Hash of the kernel sources alone: the part of a worker's fingerprint that names the code."""
    h = _hash(digest_size=16)
    for path in _source_files():
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()[:16]


def _compiler_identity(cxx: str) -> str:
    """What names the compiler in a build key: its resolved binary's path, size and mtime
    (an upgrade changes them); `--version` output only when CXX is not a plain binary."""
    return _once(("compiler", cxx), lambda: _read_compiler_identity(cxx))


def _read_compiler_identity(cxx: str) -> str:
    path = _which(cxx)
    if path:
        real = os.path.realpath(path)
        st = os.stat(real)
        return f"{real}:{st.st_size}:{st.st_mtime_ns}"
    import subprocess  # noqa: PLC0415 - rare path, kept off every process's start-up
    return subprocess.run(cxx.split() + ["--version"], capture_output=True, text=True).stdout


def _flags(variant: str) -> list[str]:
    if variant not in VARIANTS:
        raise NativeBuildError("unknown native arithmetic variant", expected=" or ".join(VARIANTS), found=variant)
    return CXX_FLAGS + VARIANTS[variant]


def build_key(variant: str | None = None) -> str:
    """Hash of sources, compiler version, flags, variant and CPU features: names one cached build."""
    variant = variant or default_variant()
    cxx = _compiler()
    version = _compiler_identity(cxx)
    h = _hash(digest_size=16)
    for part in (source_hash(), cxx, version, " ".join(_flags(variant) + LINK_FLAGS), _cpu_flags(), _machine()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def cache_dir() -> str:
    """The local cache directory ($ZKQUEUE_CACHE_DIR, zkqueue.config): builds go under native/."""
    from zkqueue import config  # noqa: PLC0415
    return config.process().cache_dir


def _compile(target: str, variant: str) -> None:
    # Build-only modules, imported here so that loading a cached build stays cheap.
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    target_dir = Path(target)
    cxx = _compiler()
    flags = _flags(variant)
    cpps = sorted(Path(CPU_DIR).glob("*.cpp"))
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=target_dir.parent))
    try:
        def one(src: Path) -> Path:
            obj = tmp / (src.stem + ".o")
            proc = subprocess.run([cxx, *flags, "-I", str(KERNEL_DIR), "-c", str(src), "-o", str(obj)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise NativeBuildError(f"compiling {src.name} failed:\n{proc.stderr[-4000:]}", path=src)
            return obj
        # One translation unit per source so both cores compile at once.
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            objs = list(pool.map(one, cpps))
        proc = subprocess.run([cxx, *LINK_FLAGS, *map(str, objs), "-o", str(tmp / LIB_NAME)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"linking {LIB_NAME} failed:\n{proc.stderr[-4000:]}")
        try:
            tmp.rename(target_dir)
        except OSError:
            if not (target_dir / LIB_NAME).exists():  # lost a race to another builder: fine
                raise
    finally:
        import shutil  # noqa: PLC0415 - the build path only
        shutil.rmtree(tmp, ignore_errors=True)


def library_path(variant: str | None = None) -> Path:
    """Path of the compiled library (default variant for this CPU), building it if no cached build matches."""
    from pathlib import Path  # noqa: PLC0415 - see KERNEL_DIR
    return Path(_library_file(variant))


def _library_file(variant: str | None) -> str:
    """library_path() as a string."""
    variant = variant or default_variant()
    target = os.path.join(cache_dir(), "native", build_key(variant))
    lib = os.path.join(target, LIB_NAME)
    if not os.path.exists(lib):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        _compile(target, variant)
    return lib


def load(variant: str | None = None) -> ctypes.CDLL:
    """The loaded native library of `variant` (default: `default_variant()`), built and cached on first call.

    Raises:
        NativeBuildError: no compiler, the sources do not compile, or an unknown variant.
    """
    variant = variant or default_variant()
    with _lock:
        lib = _libs.get(variant)
        if lib is None:
            lib = _libs[variant] = ctypes.CDLL(_library_file(variant))
        return lib

"""Builds and loads the native CPU kernels (groth16/kernels/cpu/*.cpp) as one shared library.

The library is compiled with the host C++ compiler on first use and cached under
``$ZKQUEUE_CACHE_DIR`` (default ``~/.cache/zkqueue``) in a folder named by a hash of every
kernel source, the compiler's version, the flags and the CPU's feature flags, so an edited
header or another machine never loads a stale build. Builds are atomic (compile into a
temporary folder, then rename), so concurrent workers starting together are safe.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .errors import NativeBuildError

KERNEL_DIR = Path(__file__).parent / "kernels"
CPU_DIR = KERNEL_DIR / "cpu"
LIB_NAME = "libzkq_cpu.so"
CXX_FLAGS = ["-O3", "-std=c++17", "-fPIC", "-pthread", "-march=native",
             "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def kernel_sources() -> list[Path]:
    """Every file the CPU library is built from (shared headers and CPU sources), sorted."""
    files = sorted(KERNEL_DIR.glob("*.cuh")) + sorted(CPU_DIR.glob("*.hpp")) + sorted(CPU_DIR.glob("*.cpp"))
    return files


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise NativeBuildError("no C++ compiler found (install g++ or set CXX)",
                               expected="g++, c++ or clang++ on PATH", found="none")
    return cxx


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def source_hash() -> str:
    """Hash of the kernel sources alone: the part of a worker's fingerprint that names the code."""
    h = hashlib.sha256()
    for path in kernel_sources():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_key() -> str:
    """Hash of sources, compiler version, flags and CPU features: names one cached build."""
    cxx = _compiler()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    h = hashlib.sha256()
    for part in (source_hash(), cxx, version, " ".join(CXX_FLAGS), _cpu_flags(), platform.machine()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def cache_dir() -> Path:
    return Path(os.environ.get("ZKQUEUE_CACHE_DIR", Path.home() / ".cache" / "zkqueue"))


def _compile(target_dir: Path) -> None:
    cxx = _compiler()
    cpps = sorted(CPU_DIR.glob("*.cpp"))
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=target_dir.parent))
    try:
        def one(src: Path) -> Path:
            obj = tmp / (src.stem + ".o")
            proc = subprocess.run([cxx, *CXX_FLAGS, "-I", str(KERNEL_DIR), "-c", str(src), "-o", str(obj)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise NativeBuildError(f"compiling {src.name} failed:\n{proc.stderr[-4000:]}", path=src)
            return obj
        # One translation unit per source so both cores compile at once.
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            objs = list(pool.map(one, cpps))
        proc = subprocess.run([cxx, "-shared", "-pthread", *map(str, objs), "-o", str(tmp / LIB_NAME)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(f"linking {LIB_NAME} failed:\n{proc.stderr[-4000:]}")
        try:
            tmp.rename(target_dir)
        except OSError:
            if not (target_dir / LIB_NAME).exists():  # lost a race to another builder: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def library_path() -> Path:
    """Path of the compiled library, building it first if no cached build matches."""
    target = cache_dir() / "native" / build_key()
    if not (target / LIB_NAME).exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        _compile(target)
    return target / LIB_NAME


def load() -> ctypes.CDLL:
    """The loaded native library (built and cached on first call).

    Raises:
        NativeBuildError: no compiler, or the sources do not compile.
    """
    global _lib
    with _lock:
        if _lib is None:
            _lib = ctypes.CDLL(str(library_path()))
        return _lib

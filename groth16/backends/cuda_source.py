"""The CUDA kernels' sources: which .cu files make each module unit, the translation unit
NVRTC compiles for a curve, and the hashes that name them (a compiled cubin's cache key, a
CUDA worker's fingerprint). Imports nothing of the backend, so that cuda.py (which launches
the kernels) and cuda_compile.py (which compiles them) both build on it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..curves import Curve

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
BACKEND_DIR = Path(__file__).resolve().parent
# Module units of one curve: (.cu files, extra defines). msm.cu makes G1's kernels with
# ZKQ_GROUPS=1 and G2's with 2, so the two compile side by side; "selftest" is built only
# when a test asks for it.
UNITS = {
    "fr": (("fr_ops.cu", "ntt.cu"), ""),
    "g1": (("msm.cu",), "#define ZKQ_GROUPS 1\n"),
    "g2": (("msm.cu",), "#define ZKQ_GROUPS 2\n"),
    "selftest": (("selftest.cu",), ""),
}
PRODUCTION_UNITS = ("fr", "g1", "g2")
# The Python files that decide what the GPU computes (window widths, splits, passes, the
# order of kernels, compile options): part of the source hash a worker's fingerprint names.
HOST_SOURCES = ("cuda.py", "cuda_source.py", "cuda_compile.py", "cuda_msm.py", "cuda_ntt.py", "cuda_prove.py")
NVRTC_OPTIONS = ("-std=c++17",)



# ---- sources ---------------------------------------------------------------------------

def kernel_sources() -> list[Path]:
    """Every file the CUDA modules are built from: the .cu files and all shared headers."""
    cu = sorted({f for files, _ in UNITS.values() for f in files})
    return sorted(KERNEL_DIR.glob("*.cuh")) + [KERNEL_DIR / f for f in cu]


def host_sources() -> list[Path]:
    """The backend's Python modules that decide what the GPU computes."""
    return [BACKEND_DIR / name for name in HOST_SOURCES]


def _hash(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def kernel_hash() -> str:
    """Hash of the kernel sources alone (what a compiled module depends on)."""
    return _hash(kernel_sources())


def source_hash() -> str:
    """Hash of everything that decides what a CUDA worker computes: the kernel sources and
    the host modules that drive them. The code part of a worker's fingerprint."""
    return _hash(kernel_sources() + host_sources())


def unit_of(kernel: str) -> str:
    """The module unit a kernel lives in."""
    if kernel.startswith("selftest_"):
        return "selftest"
    if kernel.startswith("msm_"):
        return "g2" if kernel.endswith("_g2") else "g1"
    return "fr"


def module_source(curve: Curve, unit: str) -> str:
    """One CUDA translation unit of a curve (see the module docstring)."""
    files, defines = UNITS[unit]
    parts = [f"// zkqueue CUDA kernels for {curve.name}, unit {unit}, sources {kernel_hash()}\n",
             f"#define ZKQ_CURVE {curve.native_id}\n", defines]
    for name in files:
        path = KERNEL_DIR / name
        parts.append(f'#line 1 "{path}"\n{path.read_text()}\n')
    return "".join(parts)


def kernel_names(unit: str) -> list[str]:
    """The kernels a unit defines, read from its sources (ZKQ_KERNEL declarations, and the
    per-group kernels of msm.cu's ZKQ_MSM_KERNELS)."""
    import re  # noqa: PLC0415 - tests and tools only
    files, defines = UNITS[unit]
    names = []
    for name in files:
        text = (KERNEL_DIR / name).read_text()
        for kernel, per_group in re.findall(r"ZKQ_KERNEL(?:_BOUNDED)?\((\w+)(##G)?", text):
            if per_group:
                names += [kernel + g for g in {"g1": ["g1"], "g2": ["g2"]}.get(unit, ["g1", "g2"])]
            elif kernel != "name":
                names.append(kernel)
    return sorted(set(names))


def compile_options() -> tuple[str, ...]:
    return (*NVRTC_OPTIONS, f"-I{KERNEL_DIR}")

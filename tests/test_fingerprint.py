"""A worker's fingerprint names the code that runs on its device.

A CUDA worker's kernel hash covers the .cu files, the .cuh headers and the backend modules
that drive them (cuda*.py); a CPU worker's the headers and the C++ sources. Edits are made to a copy of groth16/kernels that both loaders
are pointed at (their KERNEL_DIR), never to the real files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zkqueue.groth16 import native
from zkqueue.groth16.backends import cuda_source
from zkqueue.workers import fingerprint as fp
from zkqueue.workers.devices import Device

GPU = Device("cuda", 0, "NVIDIA H200", "580.159.03", "GPU-0000")
OTHER_GPU = Device("cuda", 0, "NVIDIA H100 80GB HBM3", "580.159.03", "GPU-0001")
CPU = Device("cpu", 0, "Test CPU", "6.1")


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A copy of groth16/kernels that the CUDA and CPU loaders read instead of the real one."""
    copy = tmp_path / "kernels"
    shutil.copytree(native.KERNEL_DIR, copy)
    monkeypatch.setattr(cuda_source, "KERNEL_DIR", copy)
    monkeypatch.setattr(native, "KERNEL_DIR", copy)
    monkeypatch.setattr(native, "CPU_DIR", copy / "cpu")
    fp._hashes.cache_clear()
    yield copy
    fp._hashes.cache_clear()


def hashes() -> dict[str, tuple[str, str]]:
    fp._hashes.cache_clear()
    out = {}
    for name, device, backend in (("cuda", GPU, "cuda"), ("cpu", CPU, "cpu")):
        f = fp.fingerprint("w", device, backend)
        out[name] = (f["kernel_hash"], f["build"])
    return out


def edit(path) -> None:
    path.write_text(path.read_text() + "\n// an edit\n")


def test_cuda_source_changes_only_cuda_workers(kernels):
    before = hashes()
    edit(kernels / "msm.cu")
    after = hashes()
    assert after["cuda"][0] != before["cuda"][0] and after["cuda"][1] != before["cuda"][1]
    assert after["cpu"] == before["cpu"]


@pytest.mark.parametrize("module", cuda_source.HOST_SOURCES)
def test_cuda_host_module_changes_only_cuda_workers(kernels, tmp_path, monkeypatch, module):
    """The backend's Python modules decide what the GPU computes too (window width, unit
    splits, NTT passes, kernel order): editing one changes CUDA workers' hashes only."""
    copy = tmp_path / "backends"
    copy.mkdir()
    for name in cuda_source.HOST_SOURCES:
        shutil.copy(cuda_source.BACKEND_DIR / name, copy / name)
    monkeypatch.setattr(cuda_source, "BACKEND_DIR", copy)
    before = hashes()
    edit(copy / module)
    after = hashes()
    assert after["cuda"][0] != before["cuda"][0] and after["cuda"][1] != before["cuda"][1]
    assert after["cpu"] == before["cpu"]


def test_cuda_hash_covers_the_backend_modules_that_drive_the_kernels():
    """Every cuda*.py of the backend but the emulation (which runs no GPU) is hashed."""
    drivers = {p.name for p in cuda_source.BACKEND_DIR.glob("cuda*.py")} - {"cuda_emu.py"}
    assert drivers == {p.name for p in cuda_source.host_sources()}


def test_cpu_source_changes_only_cpu_workers(kernels):
    before = hashes()
    edit(kernels / "cpu" / "msm_g1.cpp")
    after = hashes()
    assert after["cpu"][0] != before["cpu"][0] and after["cpu"][1] != before["cpu"][1]
    assert after["cuda"] == before["cuda"]


def test_shared_header_changes_both(kernels):
    before = hashes()
    edit(kernels / "field.cuh")
    after = hashes()
    for name in ("cuda", "cpu"):
        assert after[name][0] != before[name][0] and after[name][1] != before[name][1]


def test_cuda_hash_covers_every_file_the_module_is_built_from(tmp_path):
    """Every file of groth16/kernels that a CUDA translation unit pulls in, as the
    preprocessor sees it for a CUDA compile and for the emulation's (g++ -M with and without
    __CUDACC__ defined), is hashed, for every unit."""
    from zkqueue.groth16 import curves
    kernel_dir = cuda_source.KERNEL_DIR.resolve()
    hashed = {p.relative_to(kernel_dir).as_posix() for p in (q.resolve() for q in cuda_source.kernel_sources())}
    for unit, (files, _) in cuda_source.UNITS.items():
        src = tmp_path / f"{unit}.cu"
        src.write_text(cuda_source.module_source(curves.BN128, unit))
        for flags in (["-D__CUDACC__"], []):
            proc = subprocess.run(["g++", "-M", "-MG", "-x", "c++", *flags, f"-I{cuda_source.KERNEL_DIR}", str(src)],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            deps = {Path(d).resolve() for d in proc.stdout.replace("\\\n", " ").split()[1:]}
            used = {d.relative_to(kernel_dir).as_posix() for d in deps if d.is_relative_to(kernel_dir)}
            assert "device.cuh" in used and "field.cuh" in used
            assert used <= hashed, used - hashed
        assert set(files) <= hashed


def test_cuda_build_names_device_and_toolchain():
    fp._hashes.cache_clear()
    a, b = fp.fingerprint("w", GPU, "cuda"), fp.fingerprint("w", OTHER_GPU, "cuda")
    assert a["kernel_hash"] == b["kernel_hash"] == cuda_source.source_hash()
    assert a["build"] != b["build"]            # same sources, another device: another build
    assert a["device_name"] == "NVIDIA H200" and a["driver"] == "580.159.03"
    assert "NVRTC" in a["toolchain"] and "toolchain" not in fp.fingerprint("w", CPU, "cpu")
    assert fp.fingerprint("w", CPU, "cpu")["build"] == native.build_key()


def test_fingerprint_does_not_touch_cuda():
    """The Celery parent publishes the fingerprint, so computing it must not import CuPy."""
    code = ("import sys; from zkqueue.workers.fingerprint import fingerprint; from zkqueue.workers.devices import Device; "
            "f = fingerprint('w', Device('cuda', 0, 'GPU', '580'), 'cuda'); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'cupy_backends', 'cuda')); "
            "assert not bad, bad; print(f['toolchain'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(native.KERNEL_DIR).parents[1])
    assert proc.returncode == 0, proc.stderr
    assert "NVRTC" in proc.stdout

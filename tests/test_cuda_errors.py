"""The CUDA backend's error boundary: only the device's failures become backend errors.

Out of device memory frees the caches and retries once, then is a retryable BackendError;
any other device error (CUDA runtime or driver, NVRTC) is BackendUnavailable; bad input
stays InputError; and anything else, a bug in the backend's own code, propagates as itself
with its traceback, so it fails one attempt instead of excluding a healthy GPU.

The backend runs on the host emulation (cuda_emu), whose EmulatedDeviceError stands for a
device error. The tests marked `cupy` take CuPy's real exception classes (CuPy imports and
builds its errors without a GPU) and skip only where CuPy is not installed.
"""

from __future__ import annotations

import traceback

import pytest

from zkqueue.groth16 import curves
from zkqueue.groth16.backends import cuda
from zkqueue.groth16.backends.cuda import CudaBackend, cupy_error_kind
from zkqueue.groth16.backends.cuda_emu import EmulatedDeviceError, EmulatedRuntime
from zkqueue.groth16.errors import BackendError, BackendUnavailable, InputError

CURVE = curves.BN128


def mont(values):
    return cuda._mont_words([v % CURVE.r for v in values], CURVE.r, 4)


def from_mont(rows):
    r_inv = pow(2, -256, CURVE.r)
    return [int.from_bytes(row.tobytes(), "little") * r_inv % CURVE.r for row in rows]


class FlakyRuntime:
    """Wraps a runtime; the first `fails` launches raise `exc`. `kinds` classifies errors
    as a CuPy runtime does (default: the wrapped runtime's own classification)."""

    def __init__(self, inner, exc, fails, kinds=None):
        self.inner, self.exc, self.fails, self.freed = inner, exc, fails, 0
        self.xp = inner.xp
        self.kinds = kinds

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def error_kind(self, exc):
        return (self.kinds or self.inner.error_kind)(exc)

    def launch(self, *args, **kwargs):
        if self.fails:
            self.fails -= 1
            raise self.exc
        return self.inner.launch(*args, **kwargs)

    def free_pool(self):
        self.freed += 1


@pytest.fixture(scope="module")
def emu_runtime():
    return EmulatedRuntime(CURVE)


def test_out_of_memory_frees_and_retries_once(emu_runtime):
    rt = FlakyRuntime(emu_runtime, MemoryError("device full"), fails=1)
    be = CudaBackend(CURVE, runtime=rt)
    x = mont([1, 2, 3, 4])
    assert from_mont(be.mul(x, x)) == [1, 4, 9, 16]
    assert rt.freed == 1
    rt.fails = 2
    with pytest.raises(BackendError) as info:
        be.mul(x, x)
    assert info.value.retryable and "out of device memory" in str(info.value)
    assert not isinstance(info.value, BackendUnavailable)


def test_device_error_makes_the_backend_unavailable(emu_runtime):
    rt = FlakyRuntime(emu_runtime, EmulatedDeviceError("cudaErrorIllegalAddress"), fails=1)
    be = CudaBackend(CURVE, runtime=rt)
    with pytest.raises(BackendUnavailable) as info:
        be.ntt(mont([1, 2]))
    assert not info.value.retryable and "cudaErrorIllegalAddress" in str(info.value)
    assert isinstance(info.value.__cause__, EmulatedDeviceError)
    assert rt.freed == 0  # not an out-of-memory: no retry


@pytest.mark.parametrize("bug", [TypeError("unsupported operand"), KeyError("fr_mul"),
                                 AttributeError("'NoneType' object has no attribute 'ptr'"),
                                 # looks like CUDA, is not CuPy's: a message proves nothing
                                 RuntimeError("cudaErrorIllegalAddress")],
                         ids=lambda e: type(e).__name__)
def test_a_bug_under_launch_propagates_as_itself(emu_runtime, bug):
    rt = FlakyRuntime(emu_runtime, bug, fails=1)
    be = CudaBackend(CURVE, runtime=rt)
    x = mont([3, 5])
    with pytest.raises(type(bug)) as info:
        be.mul(x, x)
    assert info.value is bug and not isinstance(info.value, BackendError)
    assert rt.freed == 0
    # The backend was not written off: the next call works.
    assert from_mont(be.mul(x, x)) == [9, 25]


def test_a_bug_in_the_backends_own_code_keeps_its_traceback(emu_runtime, monkeypatch):
    """A real defect inside the MSM's plan (a window width of 0) surfaces as the
    ZeroDivisionError it is, with the frame that raised it, not as BackendUnavailable."""
    import numpy as np

    from zkqueue.groth16.backends import cuda_msm

    be = CudaBackend(CURVE, runtime=emu_runtime)
    monkeypatch.setattr(cuda_msm, "choose_window", lambda n, bits: 0)
    points = np.zeros((40, 8), dtype=np.uint64)   # more than the small path's terms: a window is chosen
    scalars = mont(list(range(40)))
    with pytest.raises(ZeroDivisionError) as info:
        be.msm_g1(points, scalars)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "_msm" in frames and "plan" in frames
    monkeypatch.undo()
    assert be.msm_g1(points, scalars) == bytes(64)  # all points at infinity


def test_bad_input_stays_input_error(emu_runtime):
    be = CudaBackend(CURVE, runtime=emu_runtime)
    with pytest.raises(InputError, match="2 elements where 3 were expected"):
        be.mul(mont([1, 2, 3]), mont([1, 2]))


def test_nothing_is_cupys_without_cupy_loaded(monkeypatch):
    import sys
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert cupy_error_kind(RuntimeError("cudaErrorIllegalAddress")) is None
    assert cupy_error_kind(MemoryError()) is None  # host memory: not the device's
    assert cupy_error_kind(ValueError("x")) is None
    # A CUDA library that does not load is the device's, whoever reports it.
    assert cupy_error_kind(RuntimeError("CuPy failed to load libnvrtc.so.12: OSError: ...")) == "device"


# ---- with CuPy's own exception classes (no GPU needed) ------------------------------------

@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy", reason="CuPy is not installed (its error classes need no GPU)")


def test_cupy_errors_are_classified(cupy):
    from cupy.cuda import memory, runtime
    assert cupy_error_kind(runtime.CUDARuntimeError(700)) == "device"        # cudaErrorIllegalAddress
    assert cupy_error_kind(runtime.CUDARuntimeError(2)) == "oom"             # cudaErrorMemoryAllocation
    assert cupy_error_kind(memory.OutOfMemoryError(1 << 30, 0, 0)) == "oom"
    assert cupy_error_kind(cupy.cuda.compiler.CompileException("error: x", "src", "zkq", ())) == "device"
    assert cupy_error_kind(TypeError("x")) is None
    assert cupy_error_kind(MemoryError()) is None


@pytest.mark.parametrize("exc_kind", ["device", "oom", "bug"])
def test_backend_with_cupy_errors(cupy, emu_runtime, exc_kind):
    from cupy.cuda import memory, runtime
    exc = {"device": runtime.CUDARuntimeError(700), "oom": memory.OutOfMemoryError(1 << 30, 0, 0),
           "bug": IndexError("index 4 is out of bounds")}[exc_kind]
    rt = FlakyRuntime(emu_runtime, exc, fails=2, kinds=cupy_error_kind)
    be = CudaBackend(CURVE, runtime=rt)
    x = mont([1, 2])
    expected = {"device": BackendUnavailable, "oom": BackendError, "bug": IndexError}[exc_kind]
    with pytest.raises(expected) as info:
        be.mul(x, x)
    assert type(info.value) is expected
    assert rt.freed == (1 if exc_kind == "oom" else 0)


def test_no_device_is_backend_unavailable(cupy):
    """A real CuPy on a machine without a usable GPU: the backend is unavailable, with CuPy's reason."""
    from zkqueue.groth16.backends import cuda_status
    ok, why = cuda_status()
    if ok:
        pytest.skip(f"a GPU is usable here: {why}")
    with pytest.raises(BackendUnavailable, match="cannot run on device 0"):
        CudaBackend(CURVE, device=0)

"""The GPU worker's parent process never initialises CUDA: only the pool child that proves does.

A process that has initialised CUDA cannot fork a child that uses it, so the Celery parent
(`python -m zkqueue.tasks.main --device cuda:0`), which forks the prefork pool child, may touch NVML
and package metadata only. This starts that parent for real, on real Redis, until it has
forked its pool child and published its heartbeat (fingerprint included), and checks that
CuPy was never imported in it.

No GPU is needed, and two stand-ins on PYTHONPATH make that possible, both said plainly:
  * `pynvml`: an NVML reporting one GPU, as the real one would on a GPU machine;
  * `cupy` (with a cupy-cuda12x distribution record): an observer, not a CuPy. Importing it
    appends the importing process's pid and stack to a log, then fails as a missing CuPy
    would. It stands in for nothing the parent may use; it only makes an import visible.
The first test shows the observer catches the call the parent used to make (cuda_status()).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from queue_support import ROOT, queue, wait_until  # noqa: F401  (queue is a fixture)

GPU_NAME = "NVIDIA H200 (stand-in NVML)"

STAND_IN_NVML = f'''"""Stand-in NVML (tests/test_gpu_worker_parent.py): one GPU, driver 580, CUDA 13.0.
Each nvmlInit and nvmlShutdown appends "init PID" or "shutdown PID" to $ZKQ_TEST_NVML_LOG."""
import os
from types import SimpleNamespace

def _log(what):
    path = os.environ.get("ZKQ_TEST_NVML_LOG")
    if path:
        with open(path, "a") as f:
            f.write("%s %d\\n" % (what, os.getpid()))

def nvmlInit(): _log("init")
def nvmlShutdown(): _log("shutdown")
def nvmlSystemGetDriverVersion(): return "580.159.03"
def nvmlSystemGetCudaDriverVersion(): return 13000
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i):
    if i != 0:
        raise RuntimeError("NVML: invalid device index %d" % i)
    return i
def nvmlDeviceGetName(h): return b"{GPU_NAME}"
def nvmlDeviceGetUUID(h): return "GPU-00000000-0000-0000-0000-000000000000"
def nvmlDeviceGetMemoryInfo(h): return SimpleNamespace(total=141 << 30, free=140 << 30, used=1 << 30)
'''

CUPY_OBSERVER = '''"""Import observer standing in for CuPy (tests/test_gpu_worker_parent.py): records who imports it."""
import os, sys, traceback
with open(os.environ["ZKQ_TEST_CUPY_IMPORT_LOG"], "a") as log:
    log.write("pid %d (%s) imported cupy:\\n%s\\n" % (os.getpid(), " ".join(sys.argv),
                                                    "".join(traceback.format_stack()[:-1])))
raise ImportError("stand-in CuPy (an import observer): there is no CuPy here")
'''


@pytest.fixture
def stand_ins(tmp_path) -> tuple[Path, Path]:
    """(folder to put first on PYTHONPATH, the import log the observer writes)."""
    d = tmp_path / "stand_ins"
    (d / "cupy").mkdir(parents=True)
    (d / "pynvml.py").write_text(STAND_IN_NVML)
    (d / "cupy" / "__init__.py").write_text(CUPY_OBSERVER)
    dist = d / "cupy_cuda12x-14.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cupy-cuda12x\nVersion: 14.0.0\n")
    return d, tmp_path / "cupy_imports.log"


def stand_in_env(stand_ins, base: dict | None = None) -> dict:
    folder, log = stand_ins
    env = dict(base or os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT), env.get("PYTHONPATH", "")])
    env["ZKQ_TEST_CUPY_IMPORT_LOG"] = str(log)
    env["ZKQ_TEST_NVML_LOG"] = str(log.with_name("nvml.log"))
    return env


def test_the_observer_sees_a_cuda_status_call(stand_ins):
    """cuda_status() (what the parent used to call) imports CuPy, and the observer records it."""
    _, log = stand_ins
    code = "from zkqueue.groth16.backends import cuda_status; print(cuda_status())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=stand_in_env(stand_ins),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert log.exists() and "cuda_status" in log.read_text()


def test_preflight_finds_cupy_without_importing_it(stand_ins):
    _, log = stand_ins
    code = ("from zkqueue.groth16.backends import cuda_preflight; from zkqueue.workers.devices import cuda_driver_version; "
            "print(cuda_preflight(cuda_driver_version()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=stand_in_env(stand_ins),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "(True, 'cupy-cuda12x 14.0.0, driver for CUDA 13.0')" in proc.stdout
    assert not log.exists()


def test_gpu_worker_parent_forks_its_pool_without_initialising_cuda(queue, stand_ins):  # noqa: F811
    _, log = stand_ins
    worker_id = "fork-safety-cuda0"
    env = stand_in_env(stand_ins, queue.env())
    env.pop("CUDA_VISIBLE_DEVICES", None)
    # No canary: its proof needs a real CuPy, which this machine has not (the observer above
    # fails as a missing CuPy would); the canary runs in a process of its own anyway.
    env["ZKQUEUE_CANARY"] = "0"
    out = queue.tmp / "worker.log"
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "zkqueue.tasks.main", "--device", "cuda:0", "--backend", "cuda",
                                 "--worker-id", worker_id, "--loglevel", "INFO"], cwd=ROOT, env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def ready():
            if proc.poll() is not None:
                pytest.fail(f"the worker parent exited with {proc.returncode} before it was ready:\n"
                            f"{out.read_text(errors='replace')[-4000:]}\n"
                            f"CuPy imports: {log.read_text() if log.exists() else 'none'}")
            beats = [b for b in queue.heartbeats() if b.get("worker") == worker_id]
            return beats[0] if beats and beats[0].get("children") else None

        beat = wait_until(ready, 60, "the GPU worker to fork its pool child and publish its heartbeat")
        assert beat["pid"] == proc.pid
        assert beat["children"], "the prefork pool child was not started"
        fp = beat["fingerprint"]
        assert fp["backend"] == "cuda" and fp["device_name"] == GPU_NAME and fp["driver"] == "580.159.03"
        assert fp["toolchain"].startswith("cupy-cuda12x 14.0.0")
        from zkqueue.groth16.backends import cuda_source
        assert fp["kernel_hash"] == cuda_source.source_hash()
        # The observer writes the importing pid; the parent (and, before any task, the child) is absent.
        imports = log.read_text() if log.exists() else ""
        assert f"pid {proc.pid} " not in imports, f"the worker parent imported CuPy:\n{imports}"
        assert imports == "", f"a worker process imported CuPy before any task:\n{imports}"
        # The parent used NVML (devices, driver, free memory) and shut it down every time
        # before its pool child was forked: nothing of NVML's state is inherited.
        calls = log.with_name("nvml.log").read_text().split("\n")
        parent = [c.split()[0] for c in calls if c.endswith(f" {proc.pid}")]
        assert parent.count("init") >= 1 and parent.count("init") == parent.count("shutdown"), calls
        assert all(parent[i] == ("init" if i % 2 == 0 else "shutdown") for i in range(len(parent))), parent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def test_worker_refuses_a_cupy_newer_than_the_driver(stand_ins, tmp_path):
    """A CuPy built for CUDA 13 on a driver for CUDA 12.4 is refused before the pool forks
    (exit status 2, the reason named), from NVML and package metadata alone."""
    folder, log = stand_ins
    (folder / "pynvml.py").write_text(STAND_IN_NVML.replace("return 13000", "return 12040"))
    (folder / "cupy_cuda12x-14.0.0.dist-info").rename(folder / "cupy_cuda13x-14.0.0.dist-info")
    meta = folder / "cupy_cuda13x-14.0.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("cupy-cuda12x", "cupy-cuda13x"))
    env = stand_in_env(stand_ins)
    env.update(ZKQUEUE_REDIS_URL="redis://127.0.0.1:6379/13", ZKQUEUE_STORE_URL=str(tmp_path / "store"))
    proc = subprocess.run([sys.executable, "-m", "zkqueue.tasks.main", "--device", "cuda:0", "--backend", "cuda",
                           "--worker-id", "too-new-cupy"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "cupy-cuda13x 14.0.0 needs a driver for CUDA 13" in proc.stderr and "12.4" in proc.stderr
    assert not log.exists()

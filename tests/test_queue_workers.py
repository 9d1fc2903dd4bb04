"""The worker runtime's parts on their own: device discovery (with a stand-in pynvml),
per-device spawning, the key cache budget, faults and leases."""

from __future__ import annotations

import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from queue_support import ROOT

from zkqueue.workers import devices, faults, spawn
from zkqueue.workers.keycache import KeyCache
from zkqueue.workers.lease import LeaseKeeper


@pytest.fixture
def fake_nvml(monkeypatch):
    """A pynvml that reports two GPUs."""
    m = types.ModuleType("pynvml")
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: "550.54"
    m.nvmlDeviceGetCount = lambda: 2
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100"
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}"
    monkeypatch.setitem(sys.modules, "pynvml", m)
    return m


def test_one_worker_process_per_gpu_each_seeing_only_its_own(fake_nvml, monkeypatch):
    found, why = devices.plan(None)
    assert [(d.spec, d.name, d.driver, d.uuid) for d in found] == [
        ("cuda:0", "NVIDIA H100", "550.54", "GPU-0000"), ("cuda:1", "NVIDIA H100", "550.54", "GPU-0001")]
    started = []
    monkeypatch.setattr(spawn.subprocess, "Popen", lambda cmd, env: started.append((cmd, env)) or types.SimpleNamespace(pid=1))
    sup = spawn.Supervisor(found, threads=None, backend=None)
    for c in sup.children:
        sup._start(c)
    for (cmd, env), d in zip(started, found):
        assert cmd[1:3] == ["-m", "zkqueue.tasks.main"] and cmd[cmd.index("--device") + 1] == d.spec
        assert cmd[cmd.index("--backend") + 1] == "cuda"
        assert env["CUDA_VISIBLE_DEVICES"] == d.uuid and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert len({c.worker_id for c in sup.children}) == 2


def test_cpu_workers_see_no_gpu(monkeypatch):
    found, _ = devices.plan(3)
    assert [d.spec for d in found] == ["cpu:0", "cpu:1", "cpu:2"]
    started = []
    monkeypatch.setattr(spawn.subprocess, "Popen", lambda cmd, env: started.append(env) or types.SimpleNamespace(pid=1))
    sup = spawn.Supervisor(found, threads=1, backend=None)
    sup._start(sup.children[0])
    assert started[0]["CUDA_VISIBLE_DEVICES"] == ""


def test_worker_without_gpu_or_cpu_flag_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)      # import fails: not installed
    assert devices.plan(None) == ([], "pynvml is not installed (pip install 'zkqueue[gpu]')")
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['pynvml'] = None; "
                           "from zkqueue.cli import main; sys.exit(main(['worker']))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--cpu N" in proc.stderr


def test_key_cache_keeps_within_its_budget():
    cache = KeyCache(budget_bytes=100)
    loads = []

    def loader(name, size):
        return lambda: (loads.append(name) or name, size)

    assert cache.get("a", loader("a", 60)) == ("a", False)
    assert cache.get("a", loader("a", 60)) == ("a", True)
    cache.get("b", loader("b", 30))
    cache.get("a", loader("a", 60))                        # a is now the most recent
    cache.get("c", loader("c", 40))                        # evicts b (least recent), not a
    assert cache.used_bytes == 100 and loads == ["a", "b", "c"]
    assert cache.get("b", loader("b", 30))[1] is False
    assert cache.get("huge", loader("huge", 1000)) == ("huge", False)   # used, never kept
    assert cache.used_bytes <= 100


def test_faults_parse_and_apply():
    f = faults.parse("slow:0.5, slow-first:2,corrupt,msm-wrong,hang-first")
    assert (f.slow_s, f.slow_first_s, f.corrupt, f.msm_wrong, f.hang, f.hang_first) == (0.5, 2.0, True, True, False, True)
    assert f.hangs(1) and not f.hangs(2)
    assert faults.parse("") == faults.Faults() and not faults.Faults().any
    with pytest.raises(ValueError, match="unknown fault"):
        faults.parse("explode")
    stop = threading.Event()
    stop.set()
    faults.parse("slow:60").delay(1, stop)                 # returns at once when stopped


def test_lease_keeper_stops_the_prover_when_the_lease_is_lost():
    verdicts = iter(["ok", "ok", "lost"])
    stuck = threading.Event()
    with LeaseKeeper(lambda: next(verdicts), interval_s=0.01, on_stuck=stuck.set) as lease:
        assert lease.stop.wait(5)
    assert lease.reason == "lost" and not stuck.is_set()    # it came back in time: nothing killed


def test_lease_keeper_restarts_an_attempt_stuck_in_a_kernel_after_it_is_stopped():
    stuck = threading.Event()
    with LeaseKeeper(lambda: "overdue", interval_s=0.01, stop_grace_s=0.2, on_stuck=stuck.set) as lease:
        assert lease.stop.wait(5) and lease.reason == "overdue"
        assert stuck.wait(5)              # the attempt never came back from its "kernel"


def test_key_cache_budget_shrinks_to_the_memory_there_is():
    import psutil

    from zkqueue.workers.process import fit_key_cache
    # Free memory moves between our read and fit_key_cache's: bound it by the larger of two reads.
    before = psutil.virtual_memory().available
    fitted = fit_key_cache(1 << 60, "cpu:0")
    assert fitted <= max(before, psutil.virtual_memory().available) // 2
    assert fit_key_cache(64 << 20, "cpu:0") == 64 << 20


def test_a_wrong_msm_is_a_valid_point_that_is_not_the_right_one():
    from zkqueue.groth16.backends import get_backend
    from zkqueue.groth16.formats.zkey import read_zkey
    from queue_support import CHAIN
    key = read_zkey(CHAIN / "circuit_final.zkey")
    backend = get_backend("cpu", key.curve, threads=1)
    points = key.a_query[:8]
    scalars = np.zeros((8, 4), dtype=np.uint64)
    scalars[:, 0] = np.arange(1, 9)
    right = backend.msm_g1(points, scalars)
    wrong = faults.wrong_msm(backend.msm_g1, points, scalars)
    assert wrong != right
    backend.check_g1(np.frombuffer(wrong, dtype="<u8").reshape(1, -1))   # on the curve: raises if not


def test_a_worker_that_cannot_start_is_not_restarted_and_its_supervisor_exits_saying_why():
    """The exit-code table on both sides: a CPU device asked to prove with CUDA fails its
    start-up check, the worker exits ExitCode.CONFIG, and its supervisor reads that as
    "a restart cannot help": it does not restart it and exits with that status itself."""
    from zkqueue.workers.exit_codes import ExitCode
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "worker", "--cpu", "1", "--backend", "cuda"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == ExitCode.CONFIG == 2, proc.stderr[-3000:]
    assert "backend 'cuda' cannot run" in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.count("exited with status 2 (bad configuration); not restarting") == 1, proc.stderr[-3000:]

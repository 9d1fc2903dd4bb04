"""`zkqueue worker`: one Celery worker process per device, supervised.

Each device gets its own process (`python -m zkqueue.tasks.main --device cuda:N`), started with
CUDA_VISIBLE_DEVICES naming only its GPU, so CuPy (imported later, in the pool child)
sees exactly one device. CPU workers get an empty CUDA_VISIBLE_DEVICES. A worker process
that dies or stops answering is started again (with a fresh worker id), with backoff when
it dies right after starting. SIGTERM/SIGINT stop every worker (Celery's warm shutdown:
the running partition finishes first).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from zkqueue import config

from .deaths import DeathWatch
from .devices import Device, plan
from .exit_codes import ExitCode

log = logging.getLogger("zkqueue.spawn")

START_GRACE_S = 30.0        # a worker that dies sooner than this after starting is backed off
BACKOFF_MAX_S = 60.0        # the longest wait before restarting such a worker
STARTUP_TIMEOUT_S = 180.0   # a worker not alive (no liveness touch) this long after start is hung
SILENT_AFTER_S = 10.0       # a running worker whose liveness file is older than this is hung
STOP_GRACE_S = 30.0
POLL_S = 0.2


def new_worker_id(device: Device) -> str:
    host = socket.gethostname().split(".")[0].replace("|", "-")
    return f"{host}-{device.kind}{device.index}-{os.urandom(3).hex()}"


@dataclass
class Child:
    device: Device
    proc: subprocess.Popen | None = None
    worker_id: str = ""
    started_at: float = 0.0
    quick_deaths: int = 0          # deaths in a row, each within START_GRACE_S of its start
    restart_at: float | None = None
    alive_file: str = ""
    watch: DeathWatch | None = None   # the OOM-kill counters at its start, to name its death


class Supervisor:
    """Starts and watches one worker process per device.

    A worker that exits is started again (a fresh worker id), at once if it had been up a
    while, with exponential backoff if it died soon after starting (an out-of-memory kill
    at start must not become a hot restart loop). A worker that is alive but silent (its
    main process stopped touching its liveness file) is killed and restarted. The loop only
    polls, so no exit can be missed while it waits.
    """

    def __init__(self, devices: list[Device], *, threads: int | None, backend: str | None,
                 extra_args: list[str] | None = None, restart: bool = True, env: dict | None = None,
                 metrics_port: int = 0):
        """`env`: the workers' environment (default: this process's, with its settings);
        `metrics_port`: worker i serves /metrics on metrics_port + i (0: none)."""
        self.children = [Child(d) for d in devices]
        self.env = env if env is not None else config.child_environ()
        self.metrics_port = metrics_port
        self.threads = threads
        self.backend = backend
        self.extra_args = extra_args or []
        self.restart = restart
        self.stopping = False
        self.run_dir = tempfile.mkdtemp(prefix="zkqueue-workers-")

    def _start(self, child: Child) -> None:
        d = child.device
        child.worker_id = new_worker_id(d)
        child.alive_file = os.path.join(self.run_dir, f"{child.worker_id}.alive")
        env = dict(self.env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"       # CUDA's numbering = NVML's
        env["CUDA_VISIBLE_DEVICES"] = (d.uuid or str(d.index)) if d.kind == "cuda" else ""
        env["ZKQUEUE_ALIVE_FILE"] = child.alive_file
        # One /metrics port per worker process: base, base + 1, ...
        env["ZKQUEUE_METRICS_PORT"] = str(self.metrics_port + self.children.index(child) if self.metrics_port else 0)
        cmd = [sys.executable, "-m", "zkqueue.tasks.main", "--device", d.spec, "--worker-id", child.worker_id,
               "--backend", self.backend or d.kind, *self.extra_args]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        child.proc = subprocess.Popen(cmd, env=env)
        child.watch = DeathWatch(child.proc.pid)
        child.started_at = time.monotonic()
        child.restart_at = None
        log.info("started worker %s on %s (%s), pid %d", child.worker_id, d.spec, d.name, child.proc.pid)

    def _on_signal(self, signum, _frame) -> None:
        self.stopping = True

    def _silent_for(self, child: Child, now: float) -> float:
        """Seconds since the worker last showed life (its start, before the first touch)."""
        try:
            with open(child.alive_file) as f:
                touched = float(f.read())       # the worker's time.monotonic(): one clock for both
        except (OSError, ValueError):
            # Not touched yet: starting up (imports, a kernel build) may take a while.
            return (now - child.started_at) * (SILENT_AFTER_S / STARTUP_TIMEOUT_S)
        return max(0.0, now - touched)

    def _kill_tree(self, child: Child) -> None:
        import psutil
        try:
            procs = [psutil.Process(child.proc.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.Error:
            return
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass

    def _check(self, c: Child, now: float) -> tuple[bool, int]:
        """Looks after one child; returns (still counts as alive, exit status to report)."""
        if c.proc is None and c.restart_at is None:
            return False, ExitCode.OK
        if c.proc is None:
            if now >= c.restart_at:
                self._start(c)
            return True, ExitCode.OK
        rc = c.proc.poll()
        if rc is None:
            if self._silent_for(c, now) > SILENT_AFTER_S:
                log.error("worker %s (pid %d) stopped answering; killing it", c.worker_id, c.proc.pid)
                self._kill_tree(c)
            return True, ExitCode.OK
        uptime = now - c.started_at
        death = c.watch.explain(rc)     # why, in words: "died of memory: killed by the kernel's OOM killer (...)"
        c.proc = None
        if not death.restart:
            log.error("worker %s %s; not restarting", c.worker_id, death.how)
            return False, death.status
        if not self.restart:
            log.error("worker %s %s", c.worker_id, death.how)
            return False, ExitCode.FAILED
        if uptime < START_GRACE_S:
            c.quick_deaths += 1
            delay = min(BACKOFF_MAX_S, 2.0 ** (c.quick_deaths - 1))
            log.error("worker %s %s %.1f s after start; restarting in %.0f s", c.worker_id, death.how, uptime, delay)
        else:
            c.quick_deaths, delay = 0, 0.0
            log.warning("worker %s %s after %.0f s; restarting", c.worker_id, death.how, uptime)
        c.restart_at = now + delay
        return True, ExitCode.OK

    def run(self) -> int:
        """Runs until signalled or every worker is gone for good; returns an exit status."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for c in self.children:
            self._start(c)
        status = ExitCode.OK
        while not self.stopping:
            now = time.monotonic()
            alive = 0
            for c in self.children:
                counts, rc = self._check(c, now)
                alive += counts
                status = status or rc
            if alive == 0:
                return status or ExitCode.FAILED
            time.sleep(POLL_S)
        self.stop()
        return status

    def stop(self) -> None:
        """SIGTERM every worker, then SIGKILL what is left after STOP_GRACE_S."""
        procs = [c.proc for c in self.children if c.proc and c.proc.poll() is None]
        for p in procs:
            p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.run_dir, ignore_errors=True)


def run(cpu_workers: int | None, *, threads: int | None = None, backend: str | None = None,
        extra_args: list[str] | None = None, env: dict | None = None, metrics_port: int = 0) -> int:
    """Starts `cpu_workers` CPU workers, or one worker per GPU, and supervises them; `env`
    and `metrics_port` as for Supervisor.

    Raises:
        LookupError: no GPU found and no CPU workers asked for.
    """
    devices, why = plan(cpu_workers)
    if not devices:
        raise LookupError(f"no GPU found ({why}); start CPU workers with --cpu N")
    if threads is None and cpu_workers:
        threads = max(1, (os.cpu_count() or 1) // cpu_workers)
    return Supervisor(devices, threads=threads, backend=backend, extra_args=extra_args, env=env,
                      metrics_port=metrics_port).run()

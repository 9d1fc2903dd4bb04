"""`zkqueue worker`: one Celery worker process per device, supervised.

Each device gets its own process (`python -m tasks.main --device cuda:N`), started with
CUDA_VISIBLE_DEVICES naming only its GPU, so CuPy (imported later, in the pool child)
sees exactly one device. CPU workers get an empty CUDA_VISIBLE_DEVICES. A worker process
that dies is started again (with a fresh worker id) unless it keeps dying. SIGTERM/SIGINT
stop every worker (Celery's warm shutdown: the running partition finishes first).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from .devices import Device, plan

log = logging.getLogger("zkqueue.spawn")

RESTART_WINDOW_S = 60.0
MAX_RESTARTS_PER_WINDOW = 5
STOP_GRACE_S = 30.0


def new_worker_id(device: Device) -> str:
    host = socket.gethostname().split(".")[0].replace("|", "-")
    return f"{host}-{device.kind}{device.index}-{os.urandom(3).hex()}"


@dataclass
class Child:
    device: Device
    proc: subprocess.Popen | None = None
    worker_id: str = ""
    restarts: list[float] = field(default_factory=list)


class Supervisor:
    """Starts and watches one worker process per device."""

    def __init__(self, devices: list[Device], *, threads: int | None, backend: str | None,
                 extra_args: list[str] | None = None, restart: bool = True):
        self.children = [Child(d) for d in devices]
        self.threads = threads
        self.backend = backend
        self.extra_args = extra_args or []
        self.restart = restart
        self.stopping = False

    def _start(self, child: Child) -> None:
        d = child.device
        child.worker_id = new_worker_id(d)
        env = dict(os.environ)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"       # CUDA's numbering = NVML's
        env["CUDA_VISIBLE_DEVICES"] = (d.uuid or str(d.index)) if d.kind == "cuda" else ""
        base_port = int(os.environ.get("ZKQUEUE_METRICS_PORT") or 0)
        if base_port:   # one /metrics port per worker process: base, base + 1, ...
            env["ZKQUEUE_METRICS_PORT"] = str(base_port + self.children.index(child))
        cmd = [sys.executable, "-m", "tasks.main", "--device", d.spec, "--worker-id", child.worker_id,
               "--backend", self.backend or d.kind, *self.extra_args]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        child.proc = subprocess.Popen(cmd, env=env)
        log.info("started worker %s on %s (%s), pid %d", child.worker_id, d.spec, d.name, child.proc.pid)

    def _on_signal(self, signum, _frame) -> None:
        self.stopping = True

    def run(self) -> int:
        """Runs until signalled or every worker is gone for good; returns an exit status."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for c in self.children:
            self._start(c)
        status = 0
        while not self.stopping:
            alive = 0
            for c in self.children:
                if c.proc is None:
                    continue
                rc = c.proc.poll()
                if rc is None:
                    alive += 1
                    continue
                now = time.monotonic()
                c.restarts = [t for t in c.restarts if now - t < RESTART_WINDOW_S]
                if rc == 2:      # configuration or start-up check failed: restarting cannot help
                    log.error("worker %s exited with status 2 (bad configuration); not restarting",
                              c.worker_id)
                    c.proc, status = None, 2
                elif self.restart and len(c.restarts) < MAX_RESTARTS_PER_WINDOW:
                    log.warning("worker %s exited with status %s; restarting", c.worker_id, rc)
                    c.restarts.append(now)
                    self._start(c)
                    alive += 1
                else:
                    log.error("worker %s exited with status %s; giving up on %s", c.worker_id, rc,
                              c.device.spec)
                    c.proc, status = None, status or 1
            if alive == 0:
                return status or 1
            time.sleep(0.2)
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


def run(cpu_workers: int | None, *, threads: int | None = None, backend: str | None = None,
        extra_args: list[str] | None = None) -> int:
    """Starts `cpu_workers` CPU workers, or one worker per GPU, and supervises them.

    Raises:
        LookupError: no GPU found and no CPU workers asked for.
    """
    devices, why = plan(cpu_workers)
    if not devices:
        raise LookupError(f"no GPU found ({why}); start CPU workers with --cpu N")
    if threads is None and cpu_workers:
        threads = max(1, (os.cpu_count() or 1) // cpu_workers)
    return Supervisor(devices, threads=threads, backend=backend, extra_args=extra_args).run()

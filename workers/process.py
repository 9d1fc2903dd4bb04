"""The runtime of one worker's main process (`python -m zkqueue.tasks.main`), beside Celery.

tasks/main.py parses the flags, checks the start-up (`fit_key_cache`, `check_backend`) and
hands a `WorkerRuntime` to Celery's signals before it starts the worker. From Celery's
`worker_ready` to its `worker_shutdown` the runtime runs, in threads of this process:

- the heartbeat (workers/heartbeat.py) that registers this worker with the fleet;
- the liveness beat: it touches the file its supervisor (workers/spawn.py) watches, checks
  that supervisor is still there (`SupervisorWatch`) and that the broker consumer still
  takes work (workers/consumer_watch.py); either failing stops this worker warm;
- the reaper thread (one active across the fleet, through a Redis lock).

This package never imports the queue's modules (coordinator/): what the runtime needs of
the queue, the entry point passes in as a `QueueLink` of plain callables.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable

from zkqueue.config import ConfigError, ProcessSettings, Settings

from .consumer_watch import ConsumerWatch
from .deaths import PoolWatch
from .heartbeat import Heartbeat

log = logging.getLogger("zkqueue.worker")

MIN_KEY_CACHE_BYTES = 64 << 20   # below this a worker cannot hold a proving key worth caching


def stop_warm(why: str) -> None:
    """A warm shutdown: SIGTERM to itself, so Celery finishes the partition in hand (if any)
    and exits; a supervisor, or the service manager, starts a fresh worker."""
    log.warning("%s: stopping this worker", why)
    os.kill(os.getpid(), signal.SIGTERM)


class SupervisorWatch:
    """Stops this worker when the `zkqueue worker` that started it is gone (killed: the OOM
    killer, SIGKILL of its pid alone), as that supervisor would have stopped it: a warm
    shutdown (SIGTERM to itself; Celery finishes the partition in hand). Otherwise the
    orphan would prove on unwatched beside the workers a restarted supervisor starts."""

    def __init__(self, supervisor_pid: int, stop: Callable[[str], None] = stop_warm):
        self.supervisor_pid = supervisor_pid
        self.stop = stop
        self.stopping = False

    def check(self) -> None:
        """Called every liveness beat: re-parented means the supervisor died."""
        if self.stopping or os.getppid() == self.supervisor_pid:
            return
        self.stopping = True
        self.stop(f"supervisor (pid {self.supervisor_pid}) is gone")


def fit_key_cache(budget_bytes: int, device: str) -> int:
    """The key-cache budget this worker can actually hold: at most half the memory available
    now under the limit that applies to it (its cgroup's, else the host's: workers/memory.py;
    and on its GPU, for cuda:N), logged when it has to shrink.

    Raises:
        ConfigError: less than 64 MiB would be left for keys.
    """
    from .memory import process_limit
    limit = process_limit()
    limits = {f"memory available ({limit.source})": limit.available_bytes}
    if device.startswith("cuda:"):
        try:   # NVML only: CUDA must not be initialised in this (parent) process
            import pynvml
            pynvml.nvmlInit()
            try:   # and shut down again: the pool child is forked from this process
                handle = pynvml.nvmlDeviceGetHandleByIndex(int(device.partition(":")[2]))
                limits["GPU memory free"] = pynvml.nvmlDeviceGetMemoryInfo(handle).free
            finally:
                pynvml.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - no NVML: the host limit still applies
            log.warning("cannot read GPU memory through NVML: %s", exc)
    what, available = min(limits.items(), key=lambda kv: kv[1])
    fit = available // 2
    if fit < MIN_KEY_CACHE_BYTES:
        raise ConfigError(f"only {available >> 20} MiB of {what}: not enough to hold proving keys",
                          expected=">= 128 MiB", found=f"{available >> 20} MiB")
    if budget_bytes > fit:
        log.warning("key cache budget %d MiB does not fit: %s is %d MiB; using %d MiB (half of it)",
                    budget_bytes >> 20, what, available >> 20, fit >> 20)
        return fit
    return budget_bytes


def check_backend(kind: str) -> None:
    """Raises groth16 BackendUnavailable / NativeBuildError when this device cannot prove."""
    if kind == "cpu":
        from zkqueue.groth16 import native
        native.library_path()          # compiles now (cached), not in the middle of a partition
    else:
        # NVML and package metadata only: this parent forks the pool child that proves, and
        # CUDA initialised here would be unusable there. The child runs cuda_status().
        from zkqueue.groth16.backends import cuda_preflight
        from zkqueue.groth16.errors import BackendUnavailable

        from .devices import cuda_driver_version
        usable, why = cuda_preflight(cuda_driver_version())
        if not usable:
            raise BackendUnavailable(f"backend 'cuda' cannot run: {why}", expected="a usable GPU", found=why)


def touch_alive(path: str) -> None:
    """Shows the supervisor this process is alive (independently of Redis being reachable):
    writes the system-wide monotonic clock, which no wall-clock error can move."""
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(repr(time.monotonic()))
        os.replace(tmp, path)


def pool_children() -> set[int]:
    """The pids of this process's live children (Celery's pool): a killed one not reaped yet
    (a zombie) counts as gone."""
    import psutil
    out = set()
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return out
    for c in children:
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.add(c.pid)
        except psutil.Error:
            pass
    return out


def connected_holding_no_task(consumer) -> bool:
    """Celery's consumer (in this process) holds a broker connection, which it gives up while
    it reconnects, and no message of this worker's is reserved, running or scheduled."""
    from celery.worker import state
    return consumer.connection is not None and not (
        state.reserved_requests or state.active_requests or state.scheduled_requests)


@dataclass(frozen=True)
class QueueLink:
    """What the runtime needs of the queue, as plain callables (built by the entry point,
    which may import coordinator/; this package does not)."""

    beat: Callable[[dict], None]                     # publish this worker's heartbeat record
    leave: Callable[[], None]                        # take this worker out of the registry
    waiting: Callable[[], int]                       # messages waiting on the queues it consumes
    start_reaper: Callable[[], Callable[[], None]]   # start the reaper thread; returns its stop
    died_of_memory: Callable[[Callable[[int], bool], str], list]  # pool children OOM-killed: (is_gone, how) -> attempts


class WorkerRuntime:
    """The threads of a worker's main process, started on Celery's `worker_ready` and stopped
    on its `worker_shutdown` (`connect_signals` wires them).

    `describe()` adds what the entry point knows to every heartbeat (its queue, whether it
    synthesizes, its fingerprint); `link()` is called once the worker is ready (after the pool
    forked: no Redis socket is shared with the child).
    """

    def __init__(self, settings: Settings, proc: ProcessSettings, *, worker_id: str, device: str,
                 supervisor_pid: int, describe: Callable[[], dict], link: Callable[[], QueueLink]):
        self.settings, self.proc = settings, proc
        self.worker_id, self.device, self.supervisor_pid = worker_id, device, supervisor_pid
        self.describe, self.link = describe, link
        self.started_at = 0.0
        self.queue: QueueLink | None = None
        self.heartbeat: Heartbeat | None = None
        self.alive: Heartbeat | None = None
        self.stop_reaper: Callable[[], None] | None = None
        self.idle_used_bytes: int | None = None     # the memory in use when it became ready
        self.supervisor_watch: SupervisorWatch | None = None
        self.consumer_watch: ConsumerWatch | None = None
        self.pool_watch: PoolWatch | None = None

    def connect_signals(self) -> None:
        """Hands this runtime to Celery: call before the worker starts."""
        from celery import signals
        signals.worker_process_init.connect(self.on_child_init, weak=False)
        signals.worker_ready.connect(self.on_ready, weak=False)
        signals.worker_shutdown.connect(self.on_shutdown, weak=False)

    def on_child_init(self, **_) -> None:
        """In the pool child: proving happens there, so its counters are the ones to serve."""
        if self.proc.metrics_port:
            from . import metrics
            metrics.start_server(self.proc.metrics_port, self.device)

    def info(self) -> dict:
        """This worker's heartbeat record."""
        import psutil
        try:
            children = [c.pid for c in psutil.Process().children()]
        except psutil.Error:
            children = []
        return {"worker": self.worker_id, "pid": os.getpid(), "pgid": os.getpgid(0), "children": children,
                **self.describe(), "started_at": self.started_at, "memory": self.memory()}

    def memory(self) -> dict:
        """What this worker has: the memory limit that applies to it (its cgroup's, or the
        host's RAM), what is in use, and its capacity for keys (the limit less what it used
        when it became ready, holding no key); on a GPU, the device's memory (NVML)."""
        from .memory import device_memory, process_limit
        m = process_limit()
        if self.idle_used_bytes is None:
            self.idle_used_bytes = m.used_bytes
        out = {"limit_bytes": m.limit_bytes, "used_bytes": m.used_bytes, "source": m.source,
               "capacity_bytes": max(0, m.limit_bytes - self.idle_used_bytes)}
        if self.device.startswith("cuda:"):
            device = device_memory(int(self.device.partition(":")[2]))
            if device:
                out["device_total_bytes"], out["device_free_bytes"] = device
        return out

    def on_ready(self, sender=None, **_) -> None:
        """Celery's consumer is up (`sender`): start the heartbeat, the liveness beat and the reaper."""
        self.started_at = time.time()
        self.queue = queue = self.link()
        self.heartbeat = Heartbeat(queue.beat, self.info, self.settings.heartbeat_interval_s)
        self.heartbeat.start()
        # A supervisor (workers/spawn.py) watches this process through its liveness file,
        # and this process watches the supervisor back ...
        self.supervisor_watch = SupervisorWatch(self.supervisor_pid) if self.proc.alive_file else None
        # ... and its own consumer: one that stopped taking work is replaced the same way.
        self.consumer_watch = ConsumerWatch(idle=lambda: connected_holding_no_task(sender), waiting=queue.waiting,
                                            stall_s=self.settings.consumer_stall_s, stop=stop_warm)
        # ... and its pool children: one the OOM killer took is reported (the queue refunds the
        # attempt it was making and keeps its key from this worker).
        self.pool_watch = PoolWatch(pool_children)
        self.alive = Heartbeat(self.alive_beat, dict, self.settings.heartbeat_interval_s)
        self.alive.start()
        self.stop_reaper = queue.start_reaper()
        log.info("worker %s ready", self.worker_id)

    def alive_beat(self, _info: dict) -> None:
        """Every heartbeat interval, independently of Redis: show life, watch the supervisor and
        the consumer."""
        touch_alive(self.proc.alive_file)
        if self.supervisor_watch:
            self.supervisor_watch.check()
        self.consumer_watch.check()
        how = self.pool_watch.check()
        if how:
            try:
                found = self.queue.died_of_memory(self.pool_watch.is_gone, how)
            except Exception as exc:  # noqa: BLE001 - Redis down: the reaper requeues it (an attempt spent)
                log.warning("cannot report an OOM kill of a pool child (%s): %s", how, exc)
                found = []
            for job_id, slot, _ in found:
                log.error("worker %s: its pool child proving %s/%s died of memory: killed by the kernel's OOM killer (%s)",
                          self.worker_id, job_id, slot, how)
            self.pool_watch.settled(bool(found))

    def on_shutdown(self, **_) -> None:
        """Celery is stopping: stop the threads and leave the registry (nothing, if never ready)."""
        if self.heartbeat is None:
            return
        self.heartbeat.stop()
        self.alive.stop()
        self.stop_reaper()
        self.queue.leave()

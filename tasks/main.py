"""The Celery worker entry point of one device: `python -m zkqueue.tasks.main --device cpu:0 ...`.

Started by `zkqueue worker` (workers/spawn.py), one process per device. Checks the
configuration and the backend before Celery starts (exit status 2 when either fails), then
runs a prefork worker with one pool child that consumes this worker's own queue first and
the shared queue. The parent process publishes the heartbeat and runs a reaper (a Redis
lock keeps one reaper active across all processes).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time

EXIT_CONFIG = 2

log = logging.getLogger("zkqueue.worker")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m zkqueue.tasks.main", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu:0", help="cpu:N or cuda:N (NVML index)")
    p.add_argument("--backend", choices=("cpu", "cuda"), default=None,
                   help="proving backend (default: the device's kind)")
    p.add_argument("--worker-id", default=None)
    p.add_argument("--threads", type=int, default=None, help="backend threads (CPU)")
    p.add_argument("--loglevel", default=None, help="log level (default $ZKQUEUE_LOGLEVEL, INFO)")
    p.add_argument("--batch", type=int, default=None, metavar="B",
                   help="claim up to B partitions of one small key at once (default: 16 on a GPU, 1 on a CPU)")
    p.add_argument("--preload", nargs="+", default=[], metavar="KEY",
                   help="proving keys (sha256 in the store, or .zkey files) to load at start")
    p.add_argument("--synthesize", action=argparse.BooleanOptionalAction, default=None,
                   help="also take witness synthesis (zkq.synth); default: on for CPU devices, off for GPUs")
    return p.parse_args(argv)


def queues(worker_id: str, device: str, synthesize: bool | None) -> list[str]:
    """The queues this worker consumes, in the order it prefers them at equal priority: its
    own, the shared proving queue, then synthesis (a witness already computed is proved
    before the next is computed, so proofs come out while synthesis goes on)."""
    from zkqueue.coordinator.keys import SHARED_QUEUE, SYNTH_QUEUE, worker_queue
    if synthesize is None:
        synthesize = not device.startswith("cuda:")     # GPUs prove; CPUs also synthesize
    return [worker_queue(worker_id), SHARED_QUEUE] + ([SYNTH_QUEUE] if synthesize else [])


def _check_backend(kind: str) -> None:
    """Raises groth16 BackendUnavailable / NativeBuildError when this device cannot prove."""
    if kind == "cpu":
        from zkqueue.groth16 import native
        native.library_path()          # compiles now (cached), not in the middle of a partition
    else:
        # NVML and package metadata only: this parent forks the pool child that proves, and
        # CUDA initialised here would be unusable there. The child runs cuda_status().
        from zkqueue.groth16.backends import cuda_preflight
        from zkqueue.groth16.errors import BackendUnavailable
        from zkqueue.workers.devices import cuda_driver_version
        usable, why = cuda_preflight(cuda_driver_version())
        if not usable:
            raise BackendUnavailable(f"backend 'cuda' cannot run: {why}", expected="a usable GPU", found=why)


def _touch(path: str) -> None:
    """Shows the supervisor this process is alive (independently of Redis being reachable):
    writes the system-wide monotonic clock, which no wall-clock error can move."""
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(repr(time.monotonic()))
        os.replace(tmp, path)


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

    def __init__(self, supervisor_pid: int):
        self.supervisor_pid = supervisor_pid
        self.stopping = False

    def check(self) -> None:
        """Called every liveness beat: re-parented means the supervisor died."""
        if self.stopping or os.getppid() == self.supervisor_pid:
            return
        self.stopping = True
        stop_warm(f"supervisor (pid {self.supervisor_pid}) is gone")


def fit_key_cache(budget_bytes: int, device: str) -> int:
    """The key-cache budget this worker can actually hold: at most half the memory available
    now on the host (and on its GPU, for cuda:N), logged when it has to shrink.

    Raises:
        ConfigError: less than 64 MiB would be left for keys.
    """
    import psutil

    from zkqueue.coordinator.errors import ConfigError
    limits = {"host memory available": psutil.virtual_memory().available}
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
    if fit < 64 << 20:
        raise ConfigError(f"only {available >> 20} MiB of {what}: not enough to hold proving keys",
                          expected=">= 128 MiB", found=f"{available >> 20} MiB")
    if budget_bytes > fit:
        log.warning("key cache budget %d MiB does not fit: %s is %d MiB; using %d MiB (half of it)",
                    budget_bytes >> 20, what, available >> 20, fit >> 20)
        return fit
    return budget_bytes


def _batch(value: int | None) -> int | None:
    """`--batch B`, checked.

    Raises:
        ValueError: B below 1.
    """
    if value is not None and value < 1:
        raise ValueError(f"--batch {value}: a batch holds at least 1 partition")
    return value


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from zkqueue import config
    from zkqueue.coordinator.errors import ConfigError
    from zkqueue.groth16.errors import Groth16Error
    from zkqueue.workers import faults
    from zkqueue.workers.devices import device_from_spec

    from . import context

    try:
        proc = config.process()
        settings = config.fleet()
    except ConfigError as exc:
        print(f"zkqueue worker: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(level=(args.loglevel or proc.loglevel).upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kind = args.device.partition(":")[0]
    backend = args.backend or kind
    worker_id = args.worker_id or f"{socket.gethostname()}-{args.device.replace(':', '')}-{os.getpid()}"
    try:
        device = device_from_spec(args.device)
        identity = context.Identity(worker_id=worker_id, device=device, backend=backend,
                                    threads=args.threads or proc.threads or None,
                                    key_cache_bytes=fit_key_cache(proc.key_cache_bytes, args.device),
                                    batch=_batch(args.batch), preload=tuple(args.preload))
        from .app import configure
        app = configure(settings, proc)
        fault = faults.parse(proc.fault)
        _check_backend(backend)
    except (ConfigError, Groth16Error, ValueError) as exc:
        print(f"zkqueue worker: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if fault.any:
        log.warning("TEST FAULT ACTIVE on worker %s: %s", worker_id, fault)
    # The pool child inherits these at fork: its identity is a value, not the environment.
    context.configure(settings, proc, identity)

    from . import finalize, partition, synthesize  # noqa: F401  (registers the tasks before the pool forks)
    consumed = queues(worker_id, args.device, args.synthesize)
    _install_signals(settings, proc, worker_id, args.device, consumed, supervisor_pid=os.getppid())
    app.worker_main(argv=[
        "worker", "--pool=prefork", "--concurrency=1", f"--hostname={worker_id}@%h",
        f"--queues={','.join(consumed)}", f"--loglevel={(args.loglevel or proc.loglevel).upper()}",
        "--without-mingle", "--without-gossip", "--prefetch-multiplier=1",
        # Celery's event heartbeat only feeds monitors (Flower); liveness is our own heartbeat.
        *([] if proc.task_events else ["--without-heartbeat"]),
    ])
    return 0


def _install_signals(settings, proc, worker_id: str, device: str, consumed: list[str], *,
                     supervisor_pid: int) -> None:
    from celery import signals

    from zkqueue.coordinator.broker import queue_depths
    from zkqueue.coordinator.keys import SYNTH_QUEUE, worker_queue
    from zkqueue.coordinator.reaper import Reaper
    from zkqueue.coordinator.scheduler import Scheduler
    from zkqueue.workers.consumer_watch import ConsumerWatch
    from zkqueue.workers.heartbeat import Heartbeat

    from . import context

    state: dict = {}

    @signals.worker_process_init.connect(weak=False)
    def _child_init(**_):
        # Proving happens in the pool child, so its counters are the ones to serve.
        if proc.metrics_port:
            from zkqueue.workers import metrics
            metrics.start_server(proc.metrics_port, device)
        # ... and its keys are loaded there (`--preload`), on a thread: Celery gives this hook seconds.
        from . import preload
        preload.start(context.get())

    def info() -> dict:
        import psutil
        ctx = context.get()
        try:
            children = [c.pid for c in psutil.Process().children()]
        except psutil.Error:
            children = []
        return {"worker": worker_id, "pid": os.getpid(), "pgid": os.getpgid(0), "children": children,
                "queue": worker_queue(worker_id), "synthesizes": SYNTH_QUEUE in consumed,
                "fingerprint": ctx.fingerprint, "started_at": state["t0"]}

    @signals.worker_ready.connect(weak=False)
    def _ready(sender=None, **_):
        state["t0"] = time.time()
        sched = Scheduler(settings)
        state["sched"] = sched
        state["heartbeat"] = hb = Heartbeat(lambda i: sched.registry.beat(worker_id, i), info,
                                            settings.heartbeat_interval_s)
        hb.start()
        # A supervisor (workers/spawn.py) watches this process through its liveness file,
        # and this process watches the supervisor back.
        watch = SupervisorWatch(supervisor_pid) if proc.alive_file else None
        # ... and its own consumer: one that stopped taking work is replaced the same way.
        consumer = ConsumerWatch(idle=lambda: _connected_holding_no_task(sender),
                                 waiting=lambda: sum(queue_depths(sched.r, consumed).values()),
                                 stall_s=settings.consumer_stall_s, stop=stop_warm)

        def alive(_):
            _touch(proc.alive_file)
            if watch:
                watch.check()
            consumer.check()
        state["alive"] = Heartbeat(alive, dict, settings.heartbeat_interval_s)
        state["alive"].start()
        state["reaper"] = Reaper(sched, owner=worker_id).start_thread()
        log.info("worker %s ready", worker_id)

    @signals.worker_shutdown.connect(weak=False)
    def _shutdown(**_):
        if "heartbeat" in state:
            state["heartbeat"].stop()
            state["alive"].stop()
            _, stop = state["reaper"]
            stop.set()
            state["sched"].registry.remove(worker_id)


def _connected_holding_no_task(consumer) -> bool:
    """Celery's consumer (in this process) holds a broker connection, which it gives up while
    it reconnects, and no message of this worker's is reserved, running or scheduled."""
    from celery.worker import state
    return consumer.connection is not None and not (
        state.reserved_requests or state.active_requests or state.scheduled_requests)


if __name__ == "__main__":
    sys.exit(main())

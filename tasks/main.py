"""The Celery worker entry point of one device: `python -m zkqueue.tasks.main --device cpu:0 ...`.

Started by `zkqueue worker` (workers/spawn.py), one process per device. Parses its flags,
checks the configuration and the backend before Celery starts (exit status
ExitCode.CONFIG, workers/exit_codes.py, when either fails), proves the start-up canary
(ExitCode.CANARY when it fails: workers/canary.py), then runs a prefork worker with
one pool child that consumes this worker's own queue first and the shared queue. What runs
beside Celery in this parent process (heartbeat, liveness, the watches, the reaper) is the
worker runtime, workers/process.py.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

log = logging.getLogger("zkqueue.worker")

# Seconds between Celery's worker-heartbeat events (Flower's worker list; Celery's default is
# 2): a killed worker shows offline in Flower 2 * this after its last one. Below the broker
# connections' health-check interval (coordinator/connections.py's HEALTH_CHECK_S, 10 s):
# a connection silent that long sends a PING before its next command.
CELERY_HEARTBEAT_S = 8


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
    from zkqueue.coordinator.keys import SYNTH_QUEUE, worker_queue
    from zkqueue.groth16.errors import Groth16Error
    from zkqueue.workers import faults
    from zkqueue.workers.devices import device_from_spec
    from zkqueue.workers.exit_codes import ExitCode
    from zkqueue.workers.process import WorkerRuntime, check_backend, fit_key_cache

    from . import context

    try:
        proc = config.process()
        settings = config.fleet()
    except ConfigError as exc:
        print(f"zkqueue worker: error: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
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
        check_backend(backend)
    except (ConfigError, Groth16Error, ValueError) as exc:
        print(f"zkqueue worker: error: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
    if fault.any:
        log.warning("TEST FAULT ACTIVE on worker %s: %s", worker_id, fault)
    # The pool child inherits these at fork: its identity is a value, not the environment.
    context.configure(settings, proc, identity)
    if proc.canary:
        verdict = _canary(context.get(), args.threads or proc.threads or None)
        if verdict is not None:
            return verdict

    from . import finalize, partition, synthesize  # noqa: F401  (registers the tasks before the pool forks)
    consumed = queues(worker_id, args.device, args.synthesize)
    runtime = WorkerRuntime(
        settings, proc, worker_id=worker_id, device=args.device, supervisor_pid=os.getppid(),
        describe=lambda: {"queue": worker_queue(worker_id), "synthesizes": SYNTH_QUEUE in consumed,
                          "fingerprint": context.get().fingerprint},
        link=lambda: _queue_link(settings, worker_id, consumed))
    runtime.connect_signals()
    if identity.preload:
        _preload_in_the_pool_child()
    app.worker_main(argv=[
        "worker", "--pool=prefork", "--concurrency=1", f"--hostname={worker_id}@%h",
        f"--queues={','.join(consumed)}", f"--loglevel={(args.loglevel or proc.loglevel).upper()}",
        "--without-mingle", "--without-gossip", "--prefetch-multiplier=1",
        # Celery's event heartbeat only feeds monitors (Flower); liveness is our own heartbeat.
        # Every CELERY_HEARTBEAT_S, not Celery's 2 s (a PUBLISH each): Flower's "online"
        # window follows the interval each heartbeat carries (twice it).
        *([f"--heartbeat-interval={CELERY_HEARTBEAT_S}"] if proc.task_events else ["--without-heartbeat"]),
    ])
    return ExitCode.OK


def _canary(ctx, threads: int | None) -> int | None:
    """Proves the bundled canary circuits on this worker's backend (workers/canary.py, in a
    process of its own) before the worker takes any work; records a failure (or clears an old
    one of this fingerprint) where `zkqueue status` and the metrics show it. Returns None when
    it passed, else this worker's exit status: CANARY for a wrong proof, FAILED when the canary
    could not run (its process killed: the supervisor names an OOM kill and backs off)."""
    from zkqueue.coordinator import canary as canary_record
    from zkqueue.workers import canary
    from zkqueue.workers.exit_codes import ExitCode

    import redis

    result = canary.run(ctx.identity.backend, threads)
    if result.crashed:
        log.error("worker %s: %s; stopping", ctx.worker_id, result.reason)
        return ExitCode.FAILED
    if result.ok:
        log.info("worker %s passed its canary in %.2f s", ctx.worker_id, result.seconds)
    else:
        log.error("worker %s (build %s, fingerprint %s) FAILED its canary: %s; it takes no work",
                  ctx.worker_id, ctx.fingerprint.get("build"), ctx.fingerprint["id"], result.reason)
    try:
        if result.ok:
            canary_record.record_pass(ctx.scheduler.r, ctx.fingerprint["id"])
        else:
            canary_record.record_failure(ctx.scheduler.r, ctx.fingerprint, ctx.worker_id, result.reason, result.seconds)
    except redis.RedisError as exc:     # the verdict stands; only its record waits for Redis
        log.warning("cannot record the canary's result in Redis: %s", exc)
    return None if result.ok else ExitCode.CANARY


def _preload_in_the_pool_child() -> None:
    """`--preload`: the keys are loaded in the pool child (CUDA lives there), on a thread:
    Celery gives its process-init hook seconds."""
    from celery import signals

    from . import context, preload
    signals.worker_process_init.connect(lambda **_: preload.start(context.get()), weak=False)


def _queue_link(settings, worker_id: str, consumed: list[str]):
    """What the worker runtime (workers/process.py) needs of the queue, built on this side of
    the arrows: workers/ never imports coordinator/."""
    from zkqueue.coordinator.broker import messages_waiting
    from zkqueue.coordinator.reaper import Reaper
    from zkqueue.coordinator.registry import Beat
    from zkqueue.coordinator.scheduler import Scheduler
    from zkqueue.workers.process import QueueLink

    sched = Scheduler(settings)
    # A heartbeat is mostly one PEXPIRE (Beat), carrying the reaper standby's look at the lock
    # when one is due; the consumer watch's look one EXISTS.
    reaper = Reaper(sched, owner=worker_id, looks_carried=True)
    return QueueLink(beat=Beat(sched.registry, worker_id, lock_watch=reaper),
                     leave=lambda: sched.registry.remove(worker_id),
                     waiting=lambda: messages_waiting(sched.r, consumed),
                     start_reaper=reaper.start_thread,
                     died_of_memory=lambda is_gone, how: sched.died_of_memory(worker_id, is_gone, how))


if __name__ == "__main__":
    sys.exit(main())

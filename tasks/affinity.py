"""Key affinity, the task's side (coordinator/affinity.py explains the model): a partition of
a key this worker does not hold goes, without an attempt spent, to a worker that holds the
key and is free soon enough; and around each partition this worker publishes what its key
cache holds, so that others can do the same for it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis

from . import context

log = logging.getLogger("zkqueue.task")


def hand_to_holder(ctx: context.Context, job_id: str, index: int, token: int, zkey_sha: str) -> str | None:
    """None when this worker should prove the partition itself (affinity off, it holds the
    key, or no holder is free soon enough); else what happened when it handed the partition
    to a holder's own queue."""
    if not ctx.settings.key_affinity or ctx.prover.has_key(zkey_sha):
        return None
    s = ctx.scheduler
    prove_s, load_s = s.measured_runtime(f"{zkey_sha}|{ctx.device_class}")
    kept = _held_once_loaded(ctx, zkey_sha)
    evicts = any(k not in kept for k in ctx.prover.cache.held())
    holder = s.holder_for(job_id, index, zkey_sha, ctx.worker_id, prove_s=prove_s, load_s=load_s, evicts=evicts)
    if not holder:
        return None
    out = s.reroute(job_id, index, token, states="queued sending", event="rerouted", affinity=True,
                    route_to=holder, reason=f"worker {holder} holds its key loaded (worker {ctx.worker_id} does not)")
    if out.kind != "send":      # stale, taken, over: the claim says so and does nothing
        return None
    log.info("job %s partition %d: to worker %s, which holds key %s", job_id, index, holder, zkey_sha[:12])
    return f"to key holder {holder}"


@contextlib.contextmanager
def holding_published(ctx: context.Context, zkey_sha: str):
    """Around the proving of a partition of `zkey_sha`: publishes this worker as busy, holding
    that key (it loads it now if it does not hold it: the others must not all load it too),
    then, when the block ends, idle with the keys it holds then (IDLE_AFTER_S later, unless
    another partition has started by then). A Redis error here only costs affinity: logged,
    not raised."""
    if not ctx.settings.key_affinity or not zkey_sha:
        yield
        return
    _publish(ctx, busy=True, held=_held_once_loaded(ctx, zkey_sha))
    try:
        yield
    finally:
        _publish(ctx, busy=False, held=ctx.prover.cache.held(), after_s=IDLE_AFTER_S)


def _held_once_loaded(ctx: context.Context, zkey_sha: str) -> list[str]:
    """The keys this worker will hold once `zkey_sha` is loaded: the key, and those it holds
    now unless loading it may evict them (its size, from its recorded shape, beyond the key
    cache's free budget; unknown size: it may)."""
    cache = ctx.prover.cache
    held = cache.held()
    if zkey_sha in held:
        return held
    shape = ctx.key_shape(zkey_sha)
    kept = held if shape is not None and shape.zkey_bytes <= cache.free_bytes else []
    return [zkey_sha, *kept]


# A worker proving partitions back to back would write its holding record twice a partition
# (busy, then idle), about 2 of a partition's 50 Redis commands: the idle record is written
# only if no partition has started IDLE_AFTER_S after one ended, and a record that says what
# the last one said is not written again (until REWRITE_S: the record expires after a day).
IDLE_AFTER_S = 0.5
REWRITE_S = 3600.0

_lock = threading.Lock()      # one write at a time per process: a late idle record never lands after a busy one
_last: dict[str, tuple[tuple[str, ...], bool, float]] = {}    # worker -> (keys, busy, written at)
_pending: dict[str, threading.Timer] = {}                      # worker -> its idle record, not yet written
_generation: dict[str, int] = {}                               # worker -> publishes so far


def _publish(ctx: context.Context, *, busy: bool, held: list[str], after_s: float = 0.0) -> None:
    worker, record = ctx.worker_id, tuple(sorted(held))
    with _lock:
        timer = _pending.pop(worker, None)
        if timer is not None:
            timer.cancel()
        generation = _generation[worker] = _generation.get(worker, 0) + 1
        if after_s <= 0:
            _write(ctx, record, busy)
            return
        timer = _pending[worker] = threading.Timer(after_s, _write_later, (ctx, record, busy, generation))
        timer.daemon = True
        timer.start()


def _write_later(ctx: context.Context, record: tuple[str, ...], busy: bool, generation: int) -> None:
    with _lock:
        if _generation.get(ctx.worker_id) == generation:      # nothing published since
            _pending.pop(ctx.worker_id, None)
            _write(ctx, record, busy)


def _write(ctx: context.Context, record: tuple[str, ...], busy: bool) -> None:
    """Writes the record unless it says what the last write said (the caller holds _lock)."""
    worker = ctx.worker_id
    last = _last.get(worker)
    if last and last[:2] == (record, busy) and time.monotonic() - last[2] < REWRITE_S:
        return
    try:
        ctx.scheduler.publish_holding(worker, list(record), busy=busy)
        _last[worker] = (record, busy, time.monotonic())
    except redis.RedisError as exc:
        _last.pop(worker, None)      # written again next time
        log.warning("cannot publish the keys this worker holds: %s", exc)

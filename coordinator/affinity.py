"""Key affinity: which workers hold which proving keys loaded, and whether a partition should
wait for one of them rather than have its key loaded by the worker that took it.

A worker keeps its recently used keys loaded (workers/keycache.py); loading one costs seconds
on a GPU at 2^24. Partitions go to whichever worker takes the shared queue first, so with
several keys in flight every worker would end up loading every key, evicting the others.
So each worker's pool child publishes what its key cache holds and whether it is proving
now (`publish`, zkq:holding:{worker}); a worker that takes a partition of a key it does not
hold asks `holders` who does, and `choose` says whether the best of them is free soon
enough: its backlog (its own queue, and the partition it proves now) takes no longer to
clear than loading the key here would. Then the partition goes to that worker's own queue
(tasks/affinity.py), once: a slot is handed on for affinity only if it never moved before,
and one not taken within affinity_wait_s goes back to the shared queue (coordinator/reaper.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis

from . import keys
from .broker import queue_depths

# How long a holding record outlives its last write: liveness comes from the heartbeats
# (coordinator/registry.py), so this only bounds what a worker gone for good leaves behind.
HOLDING_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Holder:
    """A live worker that holds a key loaded: whether it proves now, and how many messages
    wait on its own queue."""

    worker: str
    busy: bool
    queued: int

    def wait_s(self, prove_s: float) -> float:
        """How long until it could start one more partition: what it proves now and what
        waits on its own queue, each taking `prove_s`."""
        return (self.queued + int(self.busy)) * prove_s


def publish(r: redis.Redis, worker_id: str, held: list[str], *, busy: bool) -> None:
    """Records the keys (sha256) `worker_id`'s key cache holds and whether it proves now.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    r.set(keys.holding(worker_id), json.dumps({"keys": sorted(held), "busy": bool(busy)}),
          ex=HOLDING_TTL_S)


def holding(r: redis.Redis, worker_ids: list[str]) -> dict[str, dict]:
    """The holding records of `worker_ids` that exist: worker -> {"keys": [...], "busy": bool}."""
    if not worker_ids:
        return {}
    records = r.mget([keys.holding(w) for w in worker_ids])
    return {w: json.loads(rec) for w, rec in zip(worker_ids, records) if rec}


def holders(r: redis.Redis, candidates: list[str], zkey_sha: str, *, me: str = "") -> tuple[list[Holder], int]:
    """Those of `candidates` (live, eligible workers) whose key cache holds `zkey_sha`, with
    their backlogs, and how many messages wait on `me`'s own queue; two round trips whatever
    the fleet's size.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    held = {w: rec for w, rec in holding(r, candidates).items() if zkey_sha in rec.get("keys", ())}
    if not held:
        return [], 0
    depths = queue_depths(r, [keys.worker_queue(w) for w in [*held, *([me] if me else [])]])
    found = [Holder(w, bool(rec.get("busy")), depths[keys.worker_queue(w)]) for w, rec in held.items()]
    return found, depths.get(keys.worker_queue(me), 0) if me else 0


def choose(found: list[Holder], *, prove_s: float | None, load_s: float | None, max_wait_s: float,
           evicts_needed_key: bool = False) -> Holder | None:
    """The holder a partition should wait for, or None (load the key here).

    The holder that frees soonest is chosen when its wait is no longer than what loading the
    key here costs (`load_s`, measured on this device class; twice that when the load evicts
    a key this worker has work queued for, which it then loads again) and than `max_wait_s`.
    With nothing measured yet, only a holder that is free now (idle, nothing queued) is worth
    it.
    """
    if not found:
        return None
    if prove_s is None:
        idle = [h for h in found if not h.busy and h.queued == 0]
        return idle[0] if idle else None
    cost_here = (load_s or 0.0) * (2 if evicts_needed_key else 1)
    best = min(found, key=lambda h: h.wait_s(prove_s))
    return best if best.wait_s(prove_s) <= min(cost_here, max_wait_s) else None

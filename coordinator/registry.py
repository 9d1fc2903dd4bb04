"""Live workers: heartbeats with a TTL, and the fingerprint each one published.

Times are Redis's (TIME), so a worker whose clock is off neither looks dead nor keeps a
dead one alive.

A heartbeat costs one command (`Beat`): a PEXPIRE of the worker's record, which keeps the
record's TTL, and so the time a dead worker takes to be noticed, what it was (the worker's
reaper standby's look at the lock rides in the same request when due: Registry.renew). The
record is written in full (TIME, then SET with the TTL and ZADD of zkq:workers:
Registry.beat) only when what it says changed, or every FULL_EVERY beats: the zkq:workers scores feed dead()
alone, whose cutoff is a minute or more, and live() lists every member whatever its score.
"""

from __future__ import annotations

import json

import redis

from . import keys

# A worker's record is written in full at least every FULL_EVERY heartbeats (10 s at the
# default interval of 1 s): its memory figures and zkq:workers score are that fresh. The
# reaper forgets a worker whose score is max(60, 10 * heartbeat_ttl_s) s old (and whose record
# expired); heartbeat_interval_s < heartbeat_ttl_s (config), so 10 beats are always less.
FULL_EVERY = 10
# Memory figures that move with every beat (what the worker uses now, the GPU's free memory):
# shown by `zkqueue status`, read by no decision, so a change in them alone waits for the
# next full write. Everything else in the record (the pool's pids, the queue, the
# fingerprint, the key capacity admission reads) is written the beat it changes.
VOLATILE_MEMORY = ("used_bytes", "device_free_bytes")


def redis_time(r: redis.Redis) -> float:
    """The Redis server's clock, in seconds since the epoch."""
    seconds, micros = r.time()
    return seconds + micros / 1e6


class Registry:
    """Reads and writes worker heartbeats (zkq:worker:{id}, zkq:workers)."""

    def __init__(self, client: redis.Redis, *, ttl_s: float):
        self.r = client
        self.ttl_s = ttl_s

    def beat(self, worker_id: str, info: dict) -> None:
        """Publishes that `worker_id` is alive, with `info` (fingerprint, pids, queue): the
        record in full. A worker's heartbeat thread uses `Beat`, which mostly only renews it.

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        now = redis_time(self.r)
        with self.r.pipeline(transaction=False) as p:     # two independent writes: no MULTI/EXEC
            # "beat_at": when the record was last written in full (at least every FULL_EVERY beats).
            p.set(keys.worker(worker_id), json.dumps({**info, "beat_at": now}), px=self._ttl_ms())
            p.zadd(keys.workers(), {worker_id: now})
            p.execute()

    def renew(self, worker_id: str, lock_watch=None) -> bool:
        """Gives `worker_id`'s record its full TTL again, as a beat does; False when there is
        no record to renew (it expired, Redis lost it, or the worker left). `lock_watch` (the
        worker's reaper standby: look_due, saw_lock): when a look at the reaper lock is due,
        its PTTL goes in the same request.

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        if lock_watch is None or not lock_watch.look_due():
            return bool(self.r.pexpire(keys.worker(worker_id), self._ttl_ms()))
        with self.r.pipeline(transaction=False) as p:
            p.pexpire(keys.worker(worker_id), self._ttl_ms())
            p.pttl(keys.reaper_lock())
            renewed, left_ms = p.execute()
        lock_watch.saw_lock(int(left_ms))
        return bool(renewed)

    def _ttl_ms(self) -> int:
        return int(self.ttl_s * 1000)

    def remove(self, worker_id: str) -> None:
        """Forgets a worker that is shutting down cleanly."""
        with self.r.pipeline() as p:
            p.delete(keys.worker(worker_id))
            p.zrem(keys.workers(), worker_id)
            p.execute()

    def alive(self, worker_id: str) -> bool:
        return bool(self.r.exists(keys.worker(worker_id)))

    def live(self) -> list[dict]:
        """Heartbeats of the workers alive now (each has "worker" and "fingerprint")."""
        ids = [w.decode() if isinstance(w, bytes) else w for w in self.r.zrange(keys.workers(), 0, -1)]
        if not ids:
            return []
        beats = self.r.mget([keys.worker(w) for w in ids])
        return [json.loads(b) for b in beats if b]

    def dead(self, older_than_s: float, *, now: float | None = None) -> list[str]:
        """Workers whose last full heartbeat is older than `older_than_s` (at least a minute:
        scores are refreshed every FULL_EVERY beats) and whose key expired. `now`: Redis's
        time, when the caller has it (else one TIME)."""
        cutoff = (redis_time(self.r) if now is None else now) - older_than_s
        ids = [w.decode() if isinstance(w, bytes) else w
               for w in self.r.zrangebyscore(keys.workers(), "-inf", cutoff)]
        return [w for w in ids if not self.alive(w)]


class Beat:
    """One worker's heartbeats, from its main process's heartbeat thread: each call renews
    its record (one PEXPIRE), and writes it in full (Registry.beat: TIME, SET, ZADD) when
    what it says changed, when it is gone (expired while the worker stood still, Redis
    restarted, the reaper forgot the worker), or FULL_EVERY beats after the last full write.
    A renewal carries the worker's reaper standby's look at the lock when one is due
    (`lock_watch`: Registry.renew), so that the two cost one request.
    """

    def __init__(self, registry: Registry, worker_id: str, *, full_every: int = FULL_EVERY, lock_watch=None):
        self.registry, self.worker_id, self.full_every = registry, worker_id, full_every
        self.lock_watch = lock_watch
        self._written: dict | None = None    # the last record written in full, less VOLATILE_MEMORY
        self._renewed = 0                    # beats since that write

    def __call__(self, info: dict) -> None:
        """One heartbeat with `info`, this worker's record now.

        Raises:
            redis.RedisError: Redis cannot be reached (the next beat writes in full).
        """
        steady = _steady(info)
        if (steady == self._written and self._renewed + 1 < self.full_every
                and self.registry.renew(self.worker_id, self.lock_watch)):
            self._renewed += 1
            return
        self._written = None                 # a failed write is retried in full
        self.registry.beat(self.worker_id, info)
        self._written, self._renewed = steady, 0


def _steady(info: dict) -> dict:
    """A heartbeat record without the figures that move with every beat (VOLATILE_MEMORY)."""
    memory = info.get("memory")
    if not isinstance(memory, dict):
        return info
    return {**info, "memory": {k: v for k, v in memory.items() if k not in VOLATILE_MEMORY}}

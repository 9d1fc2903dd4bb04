"""Live workers: heartbeats with a TTL, and the fingerprint each one published.

Times are Redis's (TIME), so a worker whose clock is off neither looks dead nor keeps a
dead one alive.
"""

from __future__ import annotations

import json

import redis

from . import keys


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
        """Publishes that `worker_id` is alive, with `info` (fingerprint, pids, queue).

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        now = redis_time(self.r)
        with self.r.pipeline(transaction=False) as p:     # two independent writes: no MULTI/EXEC
            p.set(keys.worker(worker_id), json.dumps({**info, "beat_at": now}), px=int(self.ttl_s * 1000))
            p.zadd(keys.workers(), {worker_id: now})
            p.execute()

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

    def dead(self, older_than_s: float) -> list[str]:
        """Workers whose last heartbeat is older than `older_than_s` and whose key expired."""
        cutoff = redis_time(self.r) - older_than_s
        ids = [w.decode() if isinstance(w, bytes) else w
               for w in self.r.zrangebyscore(keys.workers(), "-inf", cutoff)]
        return [w for w in ids if not self.alive(w)]

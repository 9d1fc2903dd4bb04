"""The dead-letter list: messages taken off a queue because no worker could ever run them.

Something on a queue list that is not a message of ours - bytes that are not JSON, JSON that
is not a kombu envelope, a refused content type (pickle), a task no worker has, arguments
that do not parse, a job that does not exist - must not stop a consumer: the broker guard
(coordinator/transport.py) takes it off the queue and records it here, with the reason, the
queue and the time, on a bounded list (the newest MAX_KEPT), and counts it.
"""

from __future__ import annotations

import base64
import json

import redis

from . import keys

MAX_KEPT = 1000                 # the newest dead letters kept; older ones are dropped
MAX_KEPT_BYTES = 4096           # of each message's raw bytes (for a person to look at)


def record(r: redis.Redis, *, queue: str, reason: str, raw: bytes, at: float) -> None:
    """Keeps one dead letter (the newest first) and counts it.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    entry = {"queue": queue, "reason": reason, "at": at, "bytes": len(raw),
             "raw_b64": base64.b64encode(raw[:MAX_KEPT_BYTES]).decode()}
    with r.pipeline() as p:
        p.lpush(keys.dead_letters(), json.dumps(entry))
        p.ltrim(keys.dead_letters(), 0, MAX_KEPT - 1)
        p.incr(keys.dead_letter_count())
        p.execute()


def count(r: redis.Redis) -> int:
    """Dead letters recorded since the list was last cleared (also those dropped for space)."""
    return int(r.get(keys.dead_letter_count()) or 0)


def listing(r: redis.Redis, limit: int = 100) -> list[dict]:
    """The newest `limit` dead letters: queue, reason, at, bytes, raw_b64 (the first bytes).
    An entry that is not readable JSON is shown as such rather than raising."""
    out = []
    for raw in r.lrange(keys.dead_letters(), 0, limit - 1):
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = None
        out.append(entry if isinstance(entry, dict) else {"reason": "unreadable dead-letter entry"})
    return out


def clear(r: redis.Redis) -> int:
    """Empties the list and resets the count; returns how many were counted."""
    with r.pipeline() as p:
        p.get(keys.dead_letter_count())
        p.delete(keys.dead_letters(), keys.dead_letter_count())
        counted, _ = p.execute()
    return int(counted or 0)

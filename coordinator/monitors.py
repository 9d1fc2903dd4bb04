"""Whether a monitor (Flower) watches the fleet: Celery task events only while one does.

A task event is a PUBLISH per task and per stage (received, started, succeeded): three
Redis commands per partition that nobody reads unless Flower runs. So a worker sends them
only when asked: `zkqueue flower` keeps zkq:flower set (renewed every FLOWER_RENEW_S, gone
FLOWER_TTL_S after it stops), and a worker starting while it is set sends task events from
its start; a worker started earlier gets Flower's own periodic `enable_events` broadcast
(every 5 s). Celery's worker heartbeat events, which Flower's worker list needs, stay on, every
tasks/main.py's CELERY_HEARTBEAT_S (8 s, not Celery's 2).
"""

from __future__ import annotations

import logging
import threading

import redis

from . import keys

log = logging.getLogger("zkqueue.monitors")

FLOWER_TTL_S = 30
FLOWER_RENEW_S = 10


def flower_watching(r: redis.Redis) -> bool:
    """True while a `zkqueue flower` runs on this Redis; False when none does or Redis
    cannot be reached (Flower's enable_events broadcast turns events on later)."""
    try:
        return bool(r.exists(keys.flower()))
    except redis.RedisError as exc:
        log.warning("could not tell whether Flower runs (%s): task events off until it asks", exc)
        return False


def announce_flower(r: redis.Redis) -> threading.Thread:
    """Sets zkq:flower now and renews it from a daemon thread for as long as this process
    runs (Flower's own process: `zkqueue flower`)."""
    def renew() -> None:
        while True:
            try:
                r.set(keys.flower(), "1", ex=FLOWER_TTL_S)
            except redis.RedisError as exc:
                log.warning("could not announce Flower to the workers: %s", exc)
            stop.wait(FLOWER_RENEW_S)

    stop = threading.Event()
    r.set(keys.flower(), "1", ex=FLOWER_TTL_S)
    thread = threading.Thread(target=renew, name="zkqueue-flower-announce", daemon=True)
    thread.start()
    return thread

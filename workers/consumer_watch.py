"""Notices a worker whose broker consumer has stopped taking work, so that it is replaced.

A worker's heartbeats come from threads of their own, so they go on when its Celery
consumer no longer takes messages: after a `celery control cancel_consumer`, or a consumer
whose prefetch credit was never given back. Partitions routed to it then wait for ever, and
a fleet of one stops.

The symptom needs no theory of the cause: a connected worker with nothing in hand leaves
messages on the queues it consumes. A live consumer takes a waiting message within
milliseconds (BRPOP returns as soon as a list has one). So when that lasts `stall_s` the
worker stops itself warm, and its supervisor (workers/spawn.py) starts a fresh one.

Not covered: an event loop frozen inside a blocking call with a task still on its books
(Celery's records never show the worker idle). The one such freeze seen, kombu's blocking
pub/sub read after a Redis restart, is fixed where it happens (coordinator/transport.py).
"""

from __future__ import annotations

import time
from typing import Callable

import redis


class ConsumerWatch:
    """Calls `stop(reason)` once, when `idle()` has held and `waiting()` has been above zero
    at every check for at least `stall_s`. Called from the worker's liveness beat.

    `idle()`: the consumer is connected and the worker holds no task. `waiting()` counts the
    messages on the worker's queues; Redis errors from it count as "nothing waiting". While
    Redis is unreachable, or the consumer is reconnecting, Celery's own retries are in charge.
    """

    def __init__(self, *, idle: Callable[[], bool], waiting: Callable[[], int], stall_s: float,
                 stop: Callable[[str], None]):
        self.idle, self.waiting, self.stall_s, self.stop = idle, waiting, stall_s, stop
        self.stalled_since: float | None = None
        self.stopped = False

    def check(self) -> None:
        """One look; resets the clock whenever the worker holds work or nothing waits."""
        if self.stopped:
            return
        try:
            waiting = self.waiting() if self.idle() else 0
        except redis.RedisError:
            waiting = 0
        now = time.monotonic()
        if not waiting:
            self.stalled_since = None
            return
        if self.stalled_since is None:
            self.stalled_since = now
            return
        if now - self.stalled_since >= self.stall_s:
            self.stopped = True
            self.stop(f"{waiting} message(s) waited {now - self.stalled_since:.0f} s on this worker's queues "
                      "while it held no task: its broker consumer stopped taking work")

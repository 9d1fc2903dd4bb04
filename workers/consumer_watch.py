"""Notices a worker whose broker consumer has stopped taking work, so that it is replaced.

Celery's consumer can lose its place after a Redis blip without noticing: seen when Redis
restarted while the worker's one slot was busy. The worker logged no lost connection,
finished its partition and never took another message. Its heartbeats went on, so no other
check replaced it: partitions routed to it waited for ever, and a fleet of one stopped.

The symptom needs no theory of the cause: a worker with nothing in hand leaves messages on
the queues it consumes. A live consumer takes a waiting message within milliseconds (BRPOP
returns as soon as a list has one). So when that lasts `stall_s` the worker stops itself
warm, and its supervisor (workers/spawn.py) starts a fresh one.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger("zkqueue.worker")


class ConsumerWatch:
    """Calls `stop(reason)` once, when `idle()` has held and `waiting()` has been above zero
    at every check for at least `stall_s`. Called from the worker's liveness beat.

    `idle()`: the consumer is connected and the worker holds no task. `waiting()` counts the
    messages on the worker's queues; Redis errors from it count as "nothing waiting". While
    Redis is unreachable, or the consumer is reconnecting, Celery's own retries are in charge.
    """

    def __init__(self, *, idle: Callable[[], bool], waiting: Callable[[], int], stall_s: float,
                 stop: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.idle, self.waiting, self.stall_s, self.stop, self.clock = idle, waiting, stall_s, stop, clock
        self.stalled_since: float | None = None
        self.stopped = False

    def check(self) -> None:
        """One look; resets the clock whenever the worker holds work or nothing waits."""
        if self.stopped:
            return
        import redis
        try:
            waiting = self.waiting() if self.idle() else 0
        except redis.RedisError:
            waiting = 0
        now = self.clock()
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

"""Notices a worker whose broker consumer has stopped taking work, so that it is replaced.

A worker's heartbeats come from threads of their own, so they go on when its Celery
consumer no longer takes messages: after a `celery control cancel_consumer`, or a consumer
whose prefetch credit was never given back. Partitions routed to it then wait for ever, and
a fleet of one stops.

The symptom needs no theory of the cause: a connected worker with nothing in hand leaves
messages on the queues it consumes. A live consumer takes a waiting message within
milliseconds (BRPOP returns as soon as a list has one). So when that lasts `stall_s` the
worker stops itself warm, and its supervisor (workers/spawn.py) starts a fresh one. The
queues are looked at a few times per `stall_s` of idleness, not at every beat: an idle
worker then costs Redis one command every few seconds.

Not covered: an event loop frozen inside a blocking call with a task still on its books
(Celery's records never show the worker idle). The one such freeze seen, kombu's blocking
pub/sub read after a Redis restart, is fixed where it happens (coordinator/transport.py).
"""

from __future__ import annotations

import time
from typing import Callable

import redis

LOOKS_PER_STALL = 4     # looks at the queues per consumer_stall_s of idleness


class ConsumerWatch:
    """Calls `stop(reason)` once, when `idle()` has held at every check and `waiting()` has
    been above zero at every look for at least `stall_s`. Called from the worker's liveness
    beat; `idle()` is asked at every check, `waiting()` (Redis) once every `look_every_s`
    (stall_s / 4 unless given) of unbroken idleness, so a stall is acted on between `stall_s`
    and `stall_s + 2 * (look_every_s + a beat)` after it began.

    `idle()`: the consumer is connected and the worker holds no task. `waiting()` counts the
    messages on the worker's queues; Redis errors from it count as "nothing waiting". While
    Redis is unreachable, or the consumer is reconnecting, Celery's own retries are in charge.
    """

    def __init__(self, *, idle: Callable[[], bool], waiting: Callable[[], int], stall_s: float,
                 stop: Callable[[str], None], look_every_s: float | None = None):
        self.idle, self.waiting, self.stall_s, self.stop = idle, waiting, stall_s, stop
        # The queues are looked at every look_every_s of idleness, not every beat: an idle
        # worker looked every second (an LLEN per priority list of each queue it consumes),
        # to act on a stall of 15 s.
        self.look_every_s = stall_s / LOOKS_PER_STALL if look_every_s is None else look_every_s
        self.idle_since: float | None = None       # held no task at every check since then
        self.looked_at: float | None = None        # the last look at the queues, in this idle spell
        self.stalled_since: float | None = None    # messages waited at every look since then
        self.stopped = False

    def check(self) -> None:
        """One check: whether the worker holds work (no Redis), and, every look_every_s of
        idleness, whether messages wait; resets the clocks whenever it holds work or nothing
        waits."""
        if self.stopped:
            return
        now = time.monotonic()
        if not self.idle():
            self.idle_since = self.looked_at = self.stalled_since = None
            return
        if self.idle_since is None:
            self.idle_since = now
        if now - (self.looked_at if self.looked_at is not None else self.idle_since) < self.look_every_s:
            return
        self.looked_at = now
        try:
            waiting = self.waiting()
        except redis.RedisError:
            waiting = 0
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

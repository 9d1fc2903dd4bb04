"""Barrier transitions followed by the messages they call for, in one place.

Used by the client (submit), the tasks (retry, finalize) and the reaper. Each method first
commits the transition (slot -> `sending`, new token), then sends, then marks the slot
queued; a crash in between leaves a `sending` deadline the reaper acts on.
"""

from __future__ import annotations

import logging
import random

import redis

from . import keys
from .barrier import Barrier, Outcome
from .broker import RETRY_PRIORITY, Sender
from .jobs import Priority
from .keys import FINALIZE_SLOT
from .registry import Registry
from .settings import Settings

log = logging.getLogger("zkqueue.scheduler")


def connect(settings: Settings) -> redis.Redis:
    """A Redis client for `settings.redis_url` (socket timeouts so a dead Redis is an error,
    not a hang)."""
    return redis.Redis.from_url(settings.redis_url, socket_timeout=30, socket_connect_timeout=10,
                                health_check_interval=30)


class Scheduler:
    """The barrier, the sender and the worker registry over one Redis."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None):
        self.settings = settings
        self.r = client or connect(settings)
        self.barrier = Barrier(self.r, settings)
        self.registry = Registry(self.r, ttl_s=settings.heartbeat_ttl_s)
        self._sender: Sender | None = None

    @property
    def sender(self) -> Sender:
        if self._sender is None:
            self._sender = Sender(self.settings)
        return self._sender

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()
        self.r.close()

    def priority_of(self, job_id: str) -> int:
        raw = self.r.hget(keys.job(job_id), "priority")
        return Priority(raw.decode() if raw else "normal").broker_priority

    def send(self, job_id: str, slot, token: int, *, route_to: str = "", priority: int | None = None) -> None:
        """Sends the message of (slot, token) and marks it queued.

        Raises:
            kombu.exceptions.OperationalError, redis.RedisError: the broker is unreachable
                (the slot stays `sending` and the reaper sends it later).
        """
        if str(slot) == FINALIZE_SLOT:
            self.sender.send_finalize(job_id, token, route_to=route_to)
        else:
            if priority is None:
                priority = self.priority_of(job_id)
            self.sender.send_partition(job_id, int(slot), token, priority=priority, route_to=route_to)
        self.barrier.mark_sent(job_id, slot, token)

    def requeue(self, job_id: str, slot, **kw) -> Outcome:
        """barrier.requeue, then the new message when it says "send"."""
        out = self.barrier.requeue(job_id, slot, **kw)
        if out.kind == "send":
            # A retry goes ahead of fresh work: it has waited its turn once already, and its
            # job's other partitions may all be done.
            self.send(job_id, slot, int(out.detail[0]), route_to=kw.get("route_to", ""), priority=RETRY_PRIORITY)
        return out

    def eligible_workers(self, excluded: set[str]) -> list[str]:
        """Live workers outside `excluded` whose fingerprint is not quarantined."""
        quarantined = {q.decode() for q in self.r.hkeys(keys.quarantine())}
        return [b["worker"] for b in self.registry.live()
                if b.get("worker") not in excluded and (b.get("fingerprint") or {}).get("id") not in quarantined]

    def pick_route(self, excluded: set[str]) -> str:
        """A live, healthy worker outside `excluded` to route a re-proof to ("" = the shared
        queue, when no worker is excluded or none other is eligible)."""
        if not excluded:
            return ""
        others = self.eligible_workers(excluded)
        return random.choice(others) if others else ""

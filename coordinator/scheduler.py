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
from .broker import Sender
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
        self.barrier = Barrier(self.r, lease_ttl_s=settings.lease_ttl_s, max_attempts=settings.max_attempts,
                               send_grace_s=settings.send_grace_s, max_bounces=settings.max_bounces)
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
            self.send(job_id, slot, int(out.detail[0]), route_to=kw.get("route_to", ""))
        elif out.kind == "failed":
            self.expire_job(job_id)
        return out

    def pick_route(self, excluded: set[str]) -> str:
        """A live worker outside `excluded` to route a re-proof to ("" = the shared queue,
        when no worker is excluded or none other is alive)."""
        if not excluded:
            return ""
        others = [b["worker"] for b in self.registry.live() if b.get("worker") not in excluded]
        return random.choice(others) if others else ""

    def expire_job(self, job_id: str) -> None:
        """Lets an ended job's keys expire after result_ttl_s (best effort)."""
        try:
            n = int(self.r.hget(keys.job(job_id), "n") or 0)
            ttl = int(self.settings.result_ttl_s)
            with self.r.pipeline(transaction=False) as p:
                for k in keys.all_job_keys(job_id, n):
                    p.expire(k, ttl)
                req = self.r.hget(keys.job(job_id), "request_id")
                if req:
                    p.expire(keys.request(req.decode()), ttl)
                p.execute()
        except redis.RedisError as exc:
            log.warning("could not set the expiry of job %s: %s", job_id, exc)

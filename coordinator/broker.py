"""The Celery side both ends must agree on: task names, serializers, transport options,
and the sender the coordinator and the reaper enqueue with (by task name: nothing here
imports `tasks`).
"""

from __future__ import annotations

import base64
import json
from typing import Iterator

import msgpack
import redis
from celery import Celery

from . import connections, keys
from zkqueue.config import Settings

TASK_PROVE = "zkqueue.prove_partition"
TASK_FINALIZE = "zkqueue.finalize"
TASK_SYNTH = "zkqueue.synthesize"
PRIORITY_STEPS = [0, 3, 6, 9]      # Priority.broker_priority values; 0 is served first
FINALIZE_PRIORITY = 0              # cheap and gates a result: ahead of any partition
RETRY_PRIORITY = 0                 # a partition sent again after a lost or failed attempt
# kombu's default separator between a queue's name and its priority level (and within its
# binding records); spelled out because queue_lists() rebuilds the names.
PRIORITY_SEP = "\x06\x16"
# Where kombu's Redis transport keeps delivered, unacknowledged messages (its defaults):
# delivery tag -> JSON [message, exchange, routing key], and delivery tag -> delivered at.
UNACKED_HASH = "unacked"
UNACKED_INDEX = "unacked_index"


def queue_lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps a queue in, one per priority level (highest first)."""
    return [queue] + [f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS[1:]]


def celery_config(settings: Settings) -> dict:
    """Configuration shared by senders and workers (tasks/config.py adds the worker side).
    How to reach the broker (URL, TLS, Sentinel, timeouts) is coordinator/connections.py's."""
    broker = connections.celery_broker(settings)
    return {
        "broker_url": broker["broker_url"],
        **({"broker_use_ssl": broker["broker_use_ssl"]} if "broker_use_ssl" in broker else {}),
        "broker_connection_retry_on_startup": True,
        # Messages carry ids and hashes only; pickle is never accepted (it runs code).
        "task_serializer": "msgpack",
        "accept_content": ["msgpack", "json"],
        "result_accept_content": ["msgpack", "json"],
        "event_serializer": "json",
        "result_serializer": "json",
        "task_ignore_result": True,
        "task_create_missing_queues": True,
        "task_default_queue": keys.SHARED_QUEUE,
        "broker_transport_options": {
            **broker["broker_transport_options"],
            "visibility_timeout": settings.visibility_timeout_s,
            "priority_steps": PRIORITY_STEPS,
            "sep": PRIORITY_SEP,
            # A worker's own queue (listed first) before the shared one at equal priority.
            "queue_order_strategy": "priority",
        },
    }


class Sender:
    """Enqueues prove_partition and finalize messages."""

    def __init__(self, settings: Settings):
        self.app = Celery("zkqueue-sender", set_as_current=False)
        self.app.conf.update(celery_config(settings))

    def send_partition(self, job_id: str, index: int, token: int, *, priority: int, route_to: str = "") -> None:
        """Enqueues prove_partition(job, index, token) on the shared queue or one worker's own.

        Raises:
            kombu.exceptions.OperationalError: the broker cannot be reached.
        """
        queue = keys.worker_queue(route_to) if route_to else keys.SHARED_QUEUE
        self.app.send_task(TASK_PROVE, args=(job_id, index, token), queue=queue, routing_key=queue,
                           priority=priority, task_id=f"{job_id}:{index}",
                           argsrepr=f"job={job_id} partition={index} attempt_token={token}")

    def send_synthesis(self, job_id: str, index: int, token: int, *, priority: int) -> None:
        """Enqueues synthesize(job, index, token) on the synthesis queue.

        Raises:
            kombu.exceptions.OperationalError: the broker cannot be reached.
        """
        self.app.send_task(TASK_SYNTH, args=(job_id, index, token), queue=keys.SYNTH_QUEUE,
                           routing_key=keys.SYNTH_QUEUE, priority=priority, task_id=f"{job_id}:s{index}",
                           argsrepr=f"job={job_id} synthesize={index} attempt_token={token}")

    def send_finalize(self, job_id: str, token: int, *, route_to: str = "") -> None:
        """Enqueues finalize(job, token), ahead of every partition."""
        queue = keys.worker_queue(route_to) if route_to else keys.SHARED_QUEUE
        self.app.send_task(TASK_FINALIZE, args=(job_id, token), queue=queue, routing_key=queue,
                           priority=FINALIZE_PRIORITY, task_id=f"{job_id}:finalize",
                           argsrepr=f"job={job_id} finalize attempt_token={token}")

    def close(self) -> None:
        self.app.close()


def task_slot(envelope: dict) -> tuple[str, str, int] | None:
    """(job, slot, token) of a zkqueue task message (a kombu envelope), None for anything else.

    Only msgpack and JSON bodies are decoded; any other content type is left unread.
    """
    headers = envelope.get("headers") or {}
    task = headers.get("task")
    if task not in (TASK_PROVE, TASK_FINALIZE, TASK_SYNTH):
        return None
    try:
        raw = base64.b64decode(envelope["body"])
        ctype = envelope.get("content-type")
        if ctype == "application/x-msgpack":
            args = msgpack.unpackb(raw, raw=False)[0]
        elif ctype == "application/json":
            args = json.loads(raw)[0]
        else:
            return None
        if task == TASK_PROVE:
            return str(args[0]), str(int(args[1])), int(args[2])
        if task == TASK_SYNTH:
            return str(args[0]), keys.synth_slot(int(args[1])), int(args[2])
        return str(args[0]), keys.FINALIZE_SLOT, int(args[1])
    except (KeyError, IndexError, TypeError, ValueError, msgpack.UnpackException):
        return None


def queue_names(r: redis.Redis) -> list[str]:
    """The shared queue, the synthesis queue and the own queue of every worker the registry
    knows (zkq:workers keeps a worker until the reaper forgets it and deletes its queue).
    No SCAN: the worker and client roles may not list the keyspace (deploy/redis/users.acl).

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    names = {keys.SHARED_QUEUE, keys.SYNTH_QUEUE}
    names.update(keys.worker_queue(w.decode()) for w in r.zrange(keys.workers(), 0, -1))
    return sorted(names)


def waiting_slots(r: redis.Redis) -> set[tuple[str, str, int]]:
    """(job, slot, token) of every zkqueue message waiting on a queue.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    found = set()
    for q in queue_names(r):
        for lst in queue_lists(q):
            for raw in r.lrange(lst, 0, -1):
                try:
                    slot = task_slot(json.loads(raw))
                except ValueError:
                    continue
                if slot:
                    found.add(slot)
    return found


def unacked_slots(r: redis.Redis) -> Iterator[tuple[str, tuple[str, str, int]]]:
    """(delivery tag, (job, slot, token)) of every zkqueue message delivered to a consumer and
    not yet acknowledged.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    for tag, raw in r.hgetall(UNACKED_HASH).items():
        try:
            slot = task_slot(json.loads(raw)[0])
        except (ValueError, IndexError, TypeError):
            continue
        if slot:
            yield tag.decode(), slot

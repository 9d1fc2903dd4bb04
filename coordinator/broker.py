"""The Celery side both ends must agree on: task names, serializers, transport options,
and the sender the coordinator and the reaper enqueue with (by task name: nothing here
imports `tasks`).
"""

from __future__ import annotations

from celery import Celery

from . import keys
from .settings import Settings

TASK_PROVE = "zkqueue.prove_partition"
TASK_FINALIZE = "zkqueue.finalize"
PRIORITY_STEPS = [0, 3, 6, 9]      # Priority.broker_priority values; 0 is served first
FINALIZE_PRIORITY = 0              # cheap and gates a result: ahead of any partition
# kombu's default separator between a queue's name and its priority level (and within its
# binding records); spelled out because queue_lists() rebuilds the names.
PRIORITY_SEP = "\x06\x16"


def queue_lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps a queue in, one per priority level (highest first)."""
    return [queue] + [f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS[1:]]


def celery_config(settings: Settings) -> dict:
    """Configuration shared by senders and workers (tasks/config.py adds the worker side)."""
    return {
        "broker_url": settings.redis_url,
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

    def send_finalize(self, job_id: str, token: int, *, route_to: str = "") -> None:
        """Enqueues finalize(job, token), ahead of every partition."""
        queue = keys.worker_queue(route_to) if route_to else keys.SHARED_QUEUE
        self.app.send_task(TASK_FINALIZE, args=(job_id, token), queue=queue, routing_key=queue,
                           priority=FINALIZE_PRIORITY, task_id=f"{job_id}:finalize",
                           argsrepr=f"job={job_id} finalize attempt_token={token}")

    def close(self) -> None:
        self.app.close()

"""The Celery side both ends must agree on: task names, serializers, transport options,
and the sender the coordinator and the reaper enqueue with (by task name: nothing here
imports `tasks`).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import msgpack
import redis
from celery import Celery

from . import connections, keys
from zkqueue.config import Settings

TASK_PROVE = "zkqueue.prove_partition"
# One message for `count` consecutive partitions of one job, all sent under one token (a
# submit's batches: Scheduler.send_all with batch > 1). Its worker claims whichever of them
# are still queued under that token in one transition (claim_batch.lua's range mode).
TASK_PROVE_BATCH = "zkqueue.prove_batch"
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


def queue_depths(r: redis.Redis, queues) -> dict[str, int]:
    """The messages waiting on each of `queues`, every priority level, in one round trip.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    queues = list(queues)
    with r.pipeline(transaction=False) as pipe:
        for q in queues:
            for lst in queue_lists(q):
                pipe.llen(lst)
        lengths = iter(pipe.execute())
    return {q: sum(next(lengths) for _ in PRIORITY_STEPS) for q in queues}


def messages_waiting(r: redis.Redis, queues) -> int:
    """How many messages wait on `queues` (every priority list of each): one EXISTS when
    none does (Redis keeps no empty list), the common answer for an idle worker's consumer
    watch; the lengths (queue_depths) only when some list has messages.

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    queues = list(queues)
    if not r.exists(*(lst for q in queues for lst in queue_lists(q))):
        return 0
    return sum(queue_depths(r, queues).values())


def celery_config(settings: Settings) -> dict:
    """Configuration shared by senders and workers (tasks/config.py adds the worker side).
    How to reach the broker (URL, TLS, Sentinel, timeouts) is coordinator/connections.py's."""
    broker = connections.celery_broker(settings)
    return {
        "broker_url": broker["broker_url"],
        **({"broker_use_ssl": broker["broker_use_ssl"]} if "broker_use_ssl" in broker else {}),
        # kombu's Redis (or Sentinel) transport behind a guard: junk on a queue goes to the
        # dead-letter list instead of taking the consumer down (coordinator/transport.py).
        "broker_transport": "zkqueue.coordinator.transport:" + (
            "GuardedSentinelTransport" if connections.parse(settings.redis_url).sentinel else "GuardedTransport"),
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


# Messages a held send (Sender.held) keeps before pushing them in one pipeline.
HELD_MAX = 1000


class Sender:
    """Enqueues prove_partition and finalize messages."""

    def __init__(self, settings: Settings):
        self.app = Celery("zkqueue-sender", set_as_current=False)
        self.app.conf.update(celery_config(settings))
        self._local = threading.local()      # this thread's held producer (held())

    @contextmanager
    def held(self) -> Iterator[Callable[[], None]]:
        """Messages this thread sends inside the block are held and pushed together, one
        pipeline per HELD_MAX (kombu's publish batch), not a request each; the block gets a
        flush() that pushes what is held so far. Leaving the block pushes the rest, or drops
        it when the block raised: the caller's slots must be ones the reaper sends again
        when their message is on no queue (a submit's queued checks).

        Raises (from flush() and the block's end):
            kombu.exceptions.OperationalError, redis.RedisError: the broker cannot be reached.
        """
        with self.app.producer_or_acquire() as producer, producer.batch(max_size=HELD_MAX) as batch:
            self._local.producer = producer
            try:
                yield batch.flush
            finally:
                self._local.producer = None

    def _send(self, name: str, **options) -> None:
        # Inside held(): through the held producer; otherwise Celery's, a request each.
        self.app.send_task(name, producer=getattr(self._local, "producer", None), **options)

    def send_partition(self, job_id: str, index: int, token: int, *, priority: int, route_to: str = "") -> None:
        """Enqueues prove_partition(job, index, token) on the shared queue or one worker's own.

        Raises:
            kombu.exceptions.OperationalError: the broker cannot be reached.
        """
        queue = keys.worker_queue(route_to) if route_to else keys.SHARED_QUEUE
        self._send(TASK_PROVE, args=(job_id, index, token), queue=queue, routing_key=queue,
                           priority=priority, task_id=f"{job_id}:{index}",
                           argsrepr=f"job={job_id} partition={index} attempt_token={token}")

    def send_batch(self, job_id: str, index: int, count: int, token: int, *, priority: int) -> None:
        """Enqueues prove_batch(job, index, count, token) on the shared queue: partitions
        index .. index + count - 1, one message for all of them.

        Raises:
            kombu.exceptions.OperationalError: the broker cannot be reached.
        """
        self._send(TASK_PROVE_BATCH, args=(job_id, index, count, token), queue=keys.SHARED_QUEUE,
                           routing_key=keys.SHARED_QUEUE, priority=priority, task_id=f"{job_id}:{index}+{count}",
                           argsrepr=f"job={job_id} partitions={index}..{index + count - 1} attempt_token={token}")

    def send_synthesis(self, job_id: str, index: int, token: int, *, priority: int) -> None:
        """Enqueues synthesize(job, index, token) on the synthesis queue.

        Raises:
            kombu.exceptions.OperationalError: the broker cannot be reached.
        """
        self._send(TASK_SYNTH, args=(job_id, index, token), queue=keys.SYNTH_QUEUE,
                           routing_key=keys.SYNTH_QUEUE, priority=priority, task_id=f"{job_id}:s{index}",
                           argsrepr=f"job={job_id} synthesize={index} attempt_token={token}")

    def send_finalize(self, job_id: str, token: int, *, route_to: str = "") -> None:
        """Enqueues finalize(job, token), ahead of every partition."""
        queue = keys.worker_queue(route_to) if route_to else keys.SHARED_QUEUE
        self._send(TASK_FINALIZE, args=(job_id, token), queue=queue, routing_key=queue,
                           priority=FINALIZE_PRIORITY, task_id=f"{job_id}:finalize",
                           argsrepr=f"job={job_id} finalize attempt_token={token}")

    def close(self) -> None:
        self.app.close()


TASKS = {TASK_PROVE: ("job", "index", "token"), TASK_PROVE_BATCH: ("job", "index", "count", "token"),
         TASK_SYNTH: ("job", "index", "token"),
         TASK_FINALIZE: ("job", "token")}
ACCEPTED_CONTENT = ("application/x-msgpack", "application/json")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class TaskMessage:
    """A zkqueue task message, checked: which task, on which slot of which job, with which token
    (a prove_batch message: `count` partitions from `slot` on, all under `token`)."""

    task: str
    job_id: str
    slot: str
    token: int
    count: int = 1

    @property
    def slots(self) -> tuple[str, ...]:
        """Every slot the message stands for (one, but for a prove_batch message)."""
        if self.count == 1:
            return (self.slot,)
        first = int(self.slot)
        return tuple(str(first + i) for i in range(self.count))


def decode_task(envelope) -> TaskMessage:
    """The task a kombu envelope (already JSON-decoded) carries, checked to the last field.

    Only msgpack and JSON bodies are decoded (never pickle: a message must not run code).

    Raises:
        ValueError: with the reason: not an envelope, a refused content type, a task no
            worker has, or arguments that do not parse.
    """
    if not isinstance(envelope, dict):
        raise ValueError(f"not a kombu envelope: a JSON {type(envelope).__name__}, not an object")
    props, headers, body = envelope.get("properties"), envelope.get("headers"), envelope.get("body")
    if not (isinstance(props, dict) and isinstance(headers, dict) and isinstance(body, str)
            and isinstance(props.get("delivery_tag"), str)):
        raise ValueError("not a kombu envelope: properties (with a delivery_tag), headers and body are required")
    task = headers.get("task")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: no zkqueue worker runs it")
    ctype = envelope.get("content-type")
    if ctype not in ACCEPTED_CONTENT:
        raise ValueError(f"refused content type {ctype!r}: only msgpack and JSON are accepted")
    try:
        raw = base64.b64decode(body, validate=True) if props.get("body_encoding") == "base64" else body.encode()
        decoded = msgpack.unpackb(raw, raw=False) if ctype == ACCEPTED_CONTENT[0] else json.loads(raw)
    except (ValueError, msgpack.UnpackException) as exc:
        raise ValueError(f"a {task} body that does not decode: {exc}") from None
    # Celery's message protocol 2: [args, kwargs, embed].
    if not (isinstance(decoded, (list, tuple)) and len(decoded) == 3 and isinstance(decoded[0], (list, tuple))
            and not decoded[1]):
        raise ValueError(f"a {task} body that is not [args, {{}}, embed]")
    args, names = decoded[0], TASKS[task]
    if len(args) != len(names):
        raise ValueError(f"{task} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    values = dict(zip(names, args))
    if not (isinstance(values["job"], str) and JOB_ID.match(values["job"])):
        raise ValueError(f"{task}: job {values['job']!r} is not a job id (32 hex digits)")
    for name in names[1:]:
        lowest = 1 if name in ("token", "count") else 0
        if type(values[name]) is not int or values[name] < lowest:
            raise ValueError(f"{task}: {name} {values[name]!r} is not an integer >= {lowest}")
    if task == TASK_FINALIZE:
        slot = keys.FINALIZE_SLOT
    else:
        slot = keys.synth_slot(values["index"]) if task == TASK_SYNTH else str(values["index"])
    return TaskMessage(task, values["job"], slot, values["token"], values.get("count", 1))


def task_slot(envelope) -> tuple[str, str, int] | None:
    """(job, slot, token) of a zkqueue task message (a prove_batch message: its first
    partition), None for anything else (never raises)."""
    try:
        msg = decode_task(envelope)
    except ValueError:
        return None
    return msg.job_id, msg.slot, msg.token


def task_slots(envelope) -> tuple[tuple[str, str, int], ...]:
    """(job, slot, token) of every slot a zkqueue task message stands for (a prove_batch
    message: each of its partitions), () for anything else (never raises)."""
    try:
        msg = decode_task(envelope)
    except ValueError:
        return ()
    return tuple((msg.job_id, slot, msg.token) for slot in msg.slots)


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
                found.update(task_slots(_json(raw)))
    return found


def unacked_slots(r: redis.Redis) -> Iterator[tuple[str, tuple[str, str, int]]]:
    """(delivery tag, (job, slot, token)) of every zkqueue message delivered to a consumer and
    not yet acknowledged (a prove_batch message: one pair per partition, under its one tag).

    Raises:
        redis.RedisError: Redis cannot be reached.
    """
    yield from unacked_slots_in(r.hgetall(UNACKED_HASH))


def unacked_slots_in(entries: dict) -> Iterator[tuple[str, tuple[str, str, int]]]:
    """unacked_slots() of the unacknowledged hash's `entries` as read (tag -> entry, bytes)."""
    for tag, raw in entries.items():
        entry = _json(raw)        # [envelope, exchange, routing key]
        for slot in (task_slots(entry[0]) if isinstance(entry, list) and entry else ()):
            yield tag.decode(errors="replace"), slot


def _json(raw: bytes):
    """Decoded JSON, or None for anything that is not (a list may hold anything)."""
    try:
        return json.loads(raw)
    except ValueError:      # includes UnicodeDecodeError
        return None

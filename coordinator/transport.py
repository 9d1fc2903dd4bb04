"""The Redis broker transport with a guard: nothing on a queue list can stop a consumer, and
no Redis restart can freeze it.

kombu's Redis channel takes a message off a list (BRPOP, or RPOP when polling), decodes it
as JSON and builds a kombu Message from it; bytes that are not JSON, or JSON that is not an
envelope, raise inside the consumer and take the worker process down, and the next such
message the next worker. Every message passes through `_brpop_read` or `_get` here, which
admit only a zkqueue task message that decodes completely (coordinator/broker.py's
decode_task: an envelope, an accepted content type, a known task, arguments that parse)
for a job that exists. Anything else is recorded on the dead-letter list
(coordinator/deadletter.py) with its reason, logged once as one line, and never delivered.

The channel's pub/sub reads (remote control) never block, nor send a second health-check
PING: see _receive_one and _NonBlockingPubSub.

Fewer requests for Redis to wake for: an acknowledgement's HDEL goes in the same write as
the consumer's next BRPOP (defer_ack, _brpop_start), and a sender may pipeline its publishes
(supports_batch_publish: coordinator/broker.py's Sender.held).

Celery uses these classes through `broker_transport` (coordinator/broker.py's
celery_config). Written against kombu 5.7's Redis channel, whose two read methods and whose
BRPOP start these replace; tests/test_queue_poison.py puts every kind of junk on every queue
a worker consumes and checks that no worker goes down, and tests/test_queue_requests.py
watches the acknowledgements ride.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from queue import Empty

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.transport import virtual
from kombu.utils.json import dumps, loads

from . import deadletter, keys
from .broker import decode_task

log = logging.getLogger("zkqueue.broker")


class _KnownJobs:
    """Jobs this process found in Redis lately, with their partition count (which never
    changes): a consumer takes a job's messages one after another, and looks the job up once
    per KNOWN_JOB_S rather than once per message. A job that expired meanwhile gets its
    message delivered; the claim then finds the job over and the message is acknowledged, so
    the lookup may be old: a minute's keeps a fleet's lookups to one per worker and minute."""

    def __init__(self, ttl_s: float, size: int = 256):
        self.ttl_s, self.size = ttl_s, size
        self._seen: dict[str, tuple[float, bytes]] = {}

    def get(self, job_id: str):
        hit = self._seen.get(job_id)
        if hit is None or time.monotonic() - hit[0] > self.ttl_s:
            return None
        return hit[1]

    def put(self, job_id: str, n) -> None:
        if len(self._seen) >= self.size:
            self._seen.clear()
        self._seen[job_id] = (time.monotonic(), n)


KNOWN_JOB_S = 60.0
_known_jobs = _KnownJobs(KNOWN_JOB_S)


class _Guard:
    """The guard, mixed into kombu's Redis channel and its Sentinel channel alike: admits
    only messages a zkqueue worker can run."""

    def _admit(self, raw: bytes, queue: str) -> dict | None:
        """The envelope of `raw`, or None when it went to the dead-letter list instead. Only
        zkqueue's own queues are guarded: Celery's control replies (Flower's inspect, on
        "*.reply.celery.pidbox" lists) are not tasks, and pass as kombu reads them."""
        if not queue.startswith(keys.QUEUE_PREFIX):
            return loads(bytes_to_str(raw))
        try:
            envelope = loads(bytes_to_str(raw))
        except (ValueError, TypeError):
            return self._dead(raw, queue, "not JSON: not a kombu message")
        try:
            msg = decode_task(envelope)
        except ValueError as exc:
            return self._dead(raw, queue, str(exc))
        n = _known_jobs.get(msg.job_id)
        if n is None:
            try:
                with self.conn_or_acquire() as client:
                    n = client.hget(keys.job(msg.job_id), "n")
            except redis.RedisError:
                # Redis unreachable for a moment (the message is already off its list): deliver it
                # and let the task's claim decide, rather than lose it here.
                return envelope
            if n is not None:
                _known_jobs.put(msg.job_id, n)
        if n is None:
            return self._dead(raw, queue, f"{msg.task}: no job {msg.job_id} (never submitted, expired, or lost "
                                          "with Redis's data)")
        index = keys.partition_of(msg.slot)
        if index != keys.FINALIZE_SLOT and int(index) + msg.count > int(n):
            return self._dead(raw, queue, f"{msg.task}: job {msg.job_id} has {int(n)} partitions, "
                                          f"not {int(index) + msg.count}")
        return envelope

    @property
    def supports_batch_publish(self) -> bool:
        """Publishes may be pipelined (Sender.held) even with retry_on_timeout: kombu refuses
        that because a replayed pipeline may push a message twice, and a copy of a zkqueue
        message is harmless (it carries its slot's token: the copy finds its slot busy or
        done, and is acknowledged)."""
        return True

    def _dead(self, raw: bytes, queue: str, reason: str) -> None:
        log.error("dead letter from queue %s: %s (%d bytes; `zkqueue dead-letters list`)", queue, reason, len(raw))
        try:
            with self.conn_or_acquire() as client:
                deadletter.record(client, queue=queue, reason=reason, raw=raw, at=_redis_time(client))
        except Exception as exc:   # noqa: BLE001 - never let the record of a bad message stop the consumer
            log.error("could not record the dead letter: %s", exc)
        return None

    # Acknowledgements ride on the next BRPOP: a worker acknowledges a partition and at once
    # asks for the next one, so the HDEL of kombu's unacked hash is sent in the same write as
    # that BRPOP (one request for Redis to wake for, not two). `_acks_due`: delivery tags
    # acknowledged, their HDEL not sent yet; `_acks_sent_on`: the socket an HDEL went out on
    # ahead of the BRPOP in flight, whose reply comes first.
    _acks_due: list | None = None
    _acks_sent_on = None

    def defer_ack(self, delivery_tag: str) -> bool:
        """Keeps `delivery_tag`'s HDEL for the next BRPOP; False (delete it now) while a BRPOP
        is in flight already, or under a global key prefix (kombu prefixes the BRPOP only)."""
        if self._in_poll or self.global_keyprefix or self._closing:
            return False
        if self._acks_due is None:
            self._acks_due = []
        self._acks_due.append(delivery_tag)
        return True

    def _delete_acked(self, tags: list) -> None:
        if tags:
            with self.conn_or_acquire() as client:
                client.hdel(self.unacked_key, *tags)

    def close(self):
        acks, self._acks_due = self._acks_due or [], None
        try:
            self._delete_acked(acks)
        except Exception as exc:   # noqa: BLE001 - the reaper drops what is left (see _read_ack_reply)
            log.warning("could not delete %d acknowledged messages' entries: %s", len(acks), exc)
        super().close()

    def _brpop_start(self, timeout=None):
        # kombu's, with the acknowledgements due sent ahead of the BRPOP in one write.
        acks, self._acks_due = self._acks_due or [], None
        if timeout is None:
            timeout = self.brpop_timeout
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            self._delete_acked(acks)
            return
        lists = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
        brpop = ("BRPOP", *lists, timeout or 0)
        if self.global_keyprefix:
            brpop = tuple(self.client._prefix_args(list(brpop)))
        conn = self.client.connection
        self._in_poll = conn
        self._brpop_sent_at = time.monotonic()
        if not acks:
            conn.send_command(*brpop)
            return
        conn.send_packed_command(conn.pack_commands([("HDEL", self.unacked_key, *acks), brpop]))
        self._acks_sent_on = conn._sock

    def _read_ack_reply(self) -> None:
        """Reads the reply of the HDEL sent ahead of the BRPOP in flight, if one was. Raises
        Empty when the BRPOP's own reply has not come yet (the socket was readable for the
        HDEL's): the BRPOP stays in flight. A connection replaced meanwhile took the reply
        with it; an entry the HDEL may not have deleted is the reaper's (coordinator/reaper.py
        drops the unacked copy of a message whose slots moved on)."""
        sent_on, self._acks_sent_on = self._acks_sent_on, None
        conn = self.client.connection
        if sent_on is None or conn is None or conn._sock is not sent_on:
            return
        try:
            self.client.parse_response(conn, "HDEL")
        except self.connection_errors:
            conn.disconnect()
            self._in_poll = None
            raise
        if not self._closing and not conn.can_read(timeout=0):
            raise Empty()

    def _brpop_read(self, **options):
        self._read_ack_reply()
        try:
            try:
                dest_item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                # Disconnect, so the next iteration reconnects (as kombu's own does).
                self.client.connection.disconnect()
                raise
            if not dest_item:
                raise Empty()
            dest, item = dest_item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            envelope = self._admit(item, dest)
            if envelope is not None:
                self.connection._deliver(envelope, dest)
            return True
        finally:
            self._in_poll = None
            flush = getattr(self, "_flush_brpop_reauth", None)    # kombu >= 5.6
            if flush is not None:
                flush()

    def _receive_one(self, c):
        # kombu reads the pub/sub connection (Celery's remote control) when its socket is
        # readable, with a blocking read. When that read finds the connection closed, redis-py
        # reconnects and subscribes again, then waits for the next message with no timeout:
        # after a Redis restart it was back before the read (a descheduled worker), the
        # worker's event loop froze until a control message came, taking no work and
        # finishing nothing. A non-blocking read returns None there, and kombu registers
        # the new socket. (test_queue_failures.py's descheduled-worker test.)
        return super()._receive_one(_NonBlockingPubSub(c))

    def _get(self, queue):
        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    envelope = self._admit(item, queue)
                    if envelope is not None:
                        return envelope
            raise Empty()


class _NonBlockingPubSub:
    """A redis-py PubSub whose parse_response() returns None when no reply has arrived, and
    sends no health-check PING of its own."""

    def __init__(self, pubsub):
        self._pubsub = pubsub

    def parse_response(self):
        # kombu reads when the socket is readable: a reply is there, often the PONG of the
        # health-check PING kombu's own timer sent (maybe_check_subclient_health, every
        # health_check_interval). redis-py checks health before every read, and the PING's
        # reply not being read yet, sent a second PING each time: the reply about to be read
        # (or the closed connection, reconnected by the read) answers for the connection.
        conn = self._pubsub.connection
        if conn is not None and conn.health_check_interval:
            conn.next_health_check = time.monotonic() + conn.health_check_interval
        return self._pubsub.parse_response(block=False, timeout=0)

    def __getattr__(self, name):
        return getattr(self._pubsub, name)


class _QoS(kombu_redis.QoS):
    """kombu's bookkeeping of delivered, unacknowledged messages (late acks): the hash of
    messages (`unacked`, tag -> message), written once at delivery and deleted at the ack,
    without kombu's index of delivery times (`unacked_index`) or a MULTI/EXEC around them: one
    Redis command per delivery and one per ack rather than four and four.

    The index served only kombu's redelivery after the visibility timeout, which the reaper
    does better (coordinator/reaper.py, reading the hash): a message whose consumer died before
    starting it is sent again after orphan_grace_s (not an hour), a started one is covered by
    its partitions' leases, and the copy of a message whose partitions all moved on is
    dropped once unacknowledged for the visibility timeout (kombu's redelivery of it would
    only have met a stale token). A message's fate is decided by its slot's token, not by
    this bookkeeping; a warm shutdown's restore and a rejection with requeue still put the
    message back from the hash, as kombu does."""

    def append(self, message, delivery_tag):
        delivery = message.delivery_info
        with self.channel.conn_or_acquire() as client:
            client.hset(self.unacked_key, delivery_tag,
                        dumps([message._raw, delivery["exchange"], delivery["routing_key"]]))
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag):
        """Acknowledges at once in memory; the HDEL goes out with the channel's next BRPOP
        (Channel.defer_ack) when it can."""
        if self.channel.defer_ack(delivery_tag):
            virtual.QoS.ack(self, delivery_tag)
            return
        super().ack(delivery_tag)

    def _remove_from_indices(self, delivery_tag, pipe=None):
        with self.pipe_or_acquire(pipe) as pipe:
            return pipe.hdel(self.unacked_key, delivery_tag)

    def restore_visible(self, start=0, num=10, interval=10):
        """Nothing: no index of delivery times is kept (see the class)."""

    @contextmanager
    def pipe_or_acquire(self, pipe=None, client=None):
        if pipe:
            yield pipe
        else:
            with self.channel.conn_or_acquire(client) as client:
                yield client.pipeline(transaction=False)


class GuardedChannel(_Guard, kombu_redis.Channel):
    """kombu's Redis channel with the guard."""

    QoS = _QoS


class GuardedSentinelChannel(_Guard, kombu_redis.SentinelChannel):
    """kombu's Redis Sentinel channel with the guard."""

    QoS = _QoS


# How long a consumer's BRPOP blocks on empty queues before kombu sends it again: kombu's 1 s
# made every idle worker wake Redis every second for nothing (each wake of an idle Redis costs
# it more than the command). A message pushed meanwhile ends the BRPOP at once whatever this
# is; the acknowledgement deferred to the next BRPOP is sent now when one is in flight
# (GuardedChannel.defer_ack), and kombu drops a BRPOP connection whose reply is overdue by
# health_check_interval (connections.HEALTH_CHECK_S), so a half-open socket still costs
# BRPOP_TIMEOUT_S + 2 x HEALTH_CHECK_S at most, under SOCKET_TIMEOUT_S.
BRPOP_TIMEOUT_S = 5


class GuardedTransport(kombu_redis.Transport):
    """kombu's Redis transport with GuardedChannel."""

    Channel = GuardedChannel
    brpop_timeout = BRPOP_TIMEOUT_S


class GuardedSentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Redis Sentinel transport with GuardedSentinelChannel."""

    Channel = GuardedSentinelChannel
    brpop_timeout = BRPOP_TIMEOUT_S


def _redis_time(client) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6

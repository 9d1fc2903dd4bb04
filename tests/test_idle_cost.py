"""What a worker costs Redis every second, whatever it proves: its heartbeat, its reaper
standby (or the reaper's tick), its consumer watch, its idle consumer's BRPOP. Each is counted
here, command by command, on a real Redis, with the guarantee it keeps: a dead worker's record
still expires after heartbeat_ttl_s, a reaper whose owner stops renewing is still replaced
within the lock's TTL, a stalled consumer is still stopped, a message is still taken at once."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from types import SimpleNamespace

import redis
from queue_support import queue, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import messages_waiting, queue_lists
from zkqueue.coordinator.reaper import CARRIED_LOOK_FALLBACK_S, Reaper
from zkqueue.coordinator.registry import FULL_EVERY, Beat, Registry
from zkqueue.coordinator.scheduler import Scheduler
from zkqueue.workers import consumer_watch
from zkqueue.workers.consumer_watch import ConsumerWatch


@contextmanager
def commands_sent(monkeypatch):
    """The names of the commands this process sends to Redis inside the block (pipelined
    ones included), in order."""
    sent: list[str] = []
    send, pack = redis.Connection.send_command, redis.Connection.pack_commands

    def send_command(self, *args, **kwargs):
        sent.append(str(args[0]).upper())
        return send(self, *args, **kwargs)

    def pack_commands(self, commands):
        commands = list(commands)
        sent.extend(str(c[0]).upper() for c in commands)
        return pack(self, commands)

    with monkeypatch.context() as m:
        m.setattr(redis.Connection, "send_command", send_command)
        m.setattr(redis.Connection, "pack_commands", pack_commands)
        yield sent


def _record(children: list[int], used: int) -> dict:
    return {"worker": "w1", "pid": 10, "children": children, "queue": keys.worker_queue("w1"),
            "memory": {"limit_bytes": 8 << 30, "used_bytes": used, "capacity_bytes": 4 << 30}}


def test_a_heartbeat_is_one_pexpire_and_the_record_is_written_whenever_it_changes(queue, monkeypatch):
    registry = Registry(queue.r, ttl_s=5)
    beat = Beat(registry, "w1")
    with commands_sent(monkeypatch) as sent:
        beat(_record([11], used=1))
    assert sent == ["TIME", "SET", "ZADD"]
    first_score = queue.r.zscore(keys.workers(), "w1")

    # What moves every second (memory in use) alone: one PEXPIRE, the TTL renewed in full.
    for used in range(2, FULL_EVERY + 1):
        queue.r.pexpire(keys.worker("w1"), 1000)
        with commands_sent(monkeypatch) as sent:
            beat(_record([11], used=used))
        assert sent == ["PEXPIRE"]
        assert 4000 < queue.r.pttl(keys.worker("w1")) <= 5000
    assert json.loads(queue.r.get(keys.worker("w1")))["memory"]["used_bytes"] == 1

    # The FULL_EVERY-th beat since the write: the record and the score in full again.
    with commands_sent(monkeypatch) as sent:
        beat(_record([11], used=FULL_EVERY + 1))
    assert sent == ["TIME", "SET", "ZADD"]
    assert json.loads(queue.r.get(keys.worker("w1")))["memory"]["used_bytes"] == FULL_EVERY + 1
    assert queue.r.zscore(keys.workers(), "w1") > first_score

    # A new pool child is written the beat it appears (tests and the reaper read the pids).
    with commands_sent(monkeypatch) as sent:
        beat(_record([12], used=1))
    assert sent == ["TIME", "SET", "ZADD"]
    assert registry.live()[0]["children"] == [12]

    # A record Redis lost (expired while the worker stood still, a restart, the reaper
    # forgot it) is written again at the next beat, in the zset too.
    queue.r.delete(keys.worker("w1"), keys.workers())
    with commands_sent(monkeypatch) as sent:
        beat(_record([12], used=1))
    assert sent == ["PEXPIRE", "TIME", "SET", "ZADD"]
    assert [b["worker"] for b in registry.live()] == ["w1"]


def test_a_worker_that_stops_beating_is_dead_after_the_ttl(queue):
    registry = Registry(queue.r, ttl_s=0.5)
    beat = Beat(registry, "w1")
    for used in range(3):          # a full write, then renewals
        beat(_record([11], used=used))
        assert registry.alive("w1")
    wait_until(lambda: not registry.alive("w1"), 2, "the record to expire after its TTL")
    assert registry.live() == []


def test_a_reaper_standby_reads_only_the_locks_ttl_and_takes_over_when_it_lapses(queue, monkeypatch):
    owner, standby = Scheduler(queue.settings()), Scheduler(queue.settings())
    a, b = Reaper(owner, owner="a"), Reaper(standby, owner="b")
    try:
        assert a.acquire() and standby.r.ping()       # (a connection's own handshake set aside)
        with commands_sent(monkeypatch) as sent:
            assert not b.acquire()
        assert sent == ["PTTL"]
        # It tries again when the lock would expire unless renewed, not before.
        assert b._next_try_s >= (a.lock_ttl_ms - 1000) / 1000

        # The owner stops renewing (it died): the standby takes the lock once it lapses.
        queue.r.pexpire(keys.reaper_lock(), 200)
        wait_until(b.acquire, 5, "the standby to take the lapsed lock")
        assert queue.r.get(keys.reaper_lock()) == b"b"
        # The old owner, back, finds the lock another's (one script), then is a standby.
        assert not a.acquire()
        with commands_sent(monkeypatch) as sent:
            assert not a.acquire()
        assert sent == ["PTTL"]
        assert b.acquire()
    finally:
        owner.close()
        standby.close()


@contextmanager
def requests_sent(monkeypatch):
    """How many requests (socket writes: a pipeline's commands go in one) this process sends
    to Redis inside the block."""
    sent = [0]
    send = redis.Connection.send_packed_command

    def send_packed_command(self, *args, **kwargs):
        sent[0] += 1
        return send(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(redis.Connection, "send_packed_command", send_packed_command)
        yield sent


def test_a_standbys_look_at_the_lock_rides_on_its_heartbeat_and_it_still_takes_over(queue, monkeypatch):
    """A worker's reaper standby does not look at the lock (PTTL) in a request of its own:
    the look rides on its heartbeat's renewal when due, one request for both. A carried look
    that finds the lock gone wakes the standby, which takes the lock at once, well before it
    would have looked by itself (CARRIED_LOOK_FALLBACK_S)."""
    owner, standby = Scheduler(queue.settings()), Scheduler(queue.settings())
    a = Reaper(owner, owner="a")
    b = Reaper(standby, owner="b", looks_carried=True)
    beat = Beat(standby.registry, "b", lock_watch=b)
    stop = None
    try:
        assert a.acquire()
        beat(_record([11], used=1))                        # the record in full
        stop = b.start_thread()                           # looks once by itself: the lock lives
        wait_until(lambda: not b.look_due(), 5, "the standby's first look")
        with commands_sent(monkeypatch) as sent:
            beat(_record([11], used=1))
        assert sent == ["PEXPIRE"]                        # no look due yet
        # The owner renews meanwhile (as its reaper's tick does).
        wait_until(lambda: a.acquire() and b.look_due(), 2 * a.lock_ttl_ms / 1000, "the standby's next look")
        with requests_sent(monkeypatch) as requests, commands_sent(monkeypatch) as sent:
            beat(_record([11], used=1))
        assert requests == [1] and sent == ["PEXPIRE", "PTTL"]
        assert queue.r.get(keys.reaper_lock()) == b"a"   # a renews: b does not take it

        # The owner stops renewing (it died): a carried look finds the lock gone.
        queue.r.pexpire(keys.reaper_lock(), 200)
        lapsed = time.monotonic()
        wait_until(lambda: (beat(_record([11], used=1)), queue.r.get(keys.reaper_lock()) == b"b")[1],
                   CARRIED_LOOK_FALLBACK_S - 2, "the standby to take the lapsed lock")
        assert time.monotonic() - lapsed < CARRIED_LOOK_FALLBACK_S - 2
    finally:
        if stop:
            stop()
        owner.close()
        standby.close()


def test_the_owners_quiet_tick_is_one_request(queue, monkeypatch):
    """The reaper holding the lock renews it and reads what its tick starts from (Redis's
    clock, the due deadlines and checks, the routed slots, the unacknowledged messages) in one
    script: a tick with nothing to do is one request, and the lock is renewed in full."""
    s = Scheduler(queue.settings())
    a = Reaper(s, owner="a")
    try:
        a.tick()                       # takes the lock (and looks for dead workers: FORGET_EVERY)
        queue.r.pexpire(keys.reaper_lock(), 1000)
        with commands_sent(monkeypatch) as sent:
            assert a.tick() == 0
        assert sent == ["EVALSHA"]
        assert queue.r.get(keys.reaper_lock()) == b"a"
        assert queue.r.pttl(keys.reaper_lock()) > a.lock_ttl_ms - 1000
    finally:
        s.close()


def test_messages_waiting_costs_one_exists_when_nothing_waits(queue, monkeypatch):
    consumed = [keys.worker_queue("w1"), keys.SHARED_QUEUE]
    with commands_sent(monkeypatch) as sent:
        assert messages_waiting(queue.r, consumed) == 0
    assert sent == ["EXISTS"]
    queue.r.rpush(queue_lists(keys.SHARED_QUEUE)[2], "m1", "m2")
    queue.r.rpush(queue_lists(keys.worker_queue("w1"))[0], "m3")
    assert messages_waiting(queue.r, consumed) == 3


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_consumer_watch_looks_at_the_queues_a_few_times_per_stall_and_still_stops_a_stall(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(consumer_watch, "time", SimpleNamespace(monotonic=clock))
    looks, stopped, waiting, idle = [], [], [0], [True]

    def look() -> int:
        looks.append(clock.now)
        return waiting[0]

    watch = ConsumerWatch(idle=lambda: idle[0], waiting=look, stall_s=15, stop=stopped.append)
    assert watch.look_every_s == 15 / 4

    def beats(seconds: int) -> None:      # the liveness beat, every second
        for _ in range(seconds):
            clock.now += 1
            watch.check()

    # Idle with nothing waiting for a minute: a look every 4 beats, not every beat.
    beats(60)
    assert 14 <= len(looks) <= 16 and not stopped

    # A busy beat starts the idle spell over.
    idle[0] = False
    beats(1)
    idle[0], looks[:] = True, []
    beats(3)
    assert looks == []

    # Messages wait while it holds nothing: stopped once they have waited stall_s at every
    # look, within stall_s + 2 looks (and beats) of the stall's start; never before stall_s.
    waiting[0] = 2
    started = clock.now
    for _ in range(40):
        beats(1)
        if stopped:
            break
    assert stopped and "stopped taking work" in stopped[0]
    assert 15 <= clock.now - started <= 15 + 2 * (watch.look_every_s + 1)

    # Work waiting while the worker is busy is normal: no stop.
    busy = ConsumerWatch(idle=lambda: False, waiting=look, stall_s=15, stop=stopped.append)
    stopped[:] = []
    for _ in range(60):
        clock.now += 1
        busy.check()
    assert not stopped


def test_reading_a_health_check_reply_of_the_broker_pubsub_sends_no_second_ping(queue, monkeypatch):
    from zkqueue.coordinator.transport import _NonBlockingPubSub

    r = redis.Redis(connection_pool=redis.ConnectionPool(
        **{**queue.r.connection_pool.connection_kwargs, "health_check_interval": 10}))
    p = r.pubsub()
    try:
        p.subscribe("zkq:test")
        wait_until(lambda: p.get_message(timeout=0.1), 5, "the subscription's confirmation")
        # kombu's timer (maybe_check_subclient_health) finds the check due and sends its PING.
        p.connection.next_health_check = 0
        with commands_sent(monkeypatch) as sent:
            p.check_health()
            wait_until(lambda: p.connection.can_read(timeout=0.1), 5, "the PONG")
            # kombu reads the readable socket: the PONG, and no second PING before it.
            reply = _NonBlockingPubSub(p).parse_response()
        assert sent == ["PING"]
        assert reply is None and p.health_check_response_counter == 0    # the PONG, consumed
    finally:
        p.close()
        r.close()


def test_an_idle_consumer_asks_redis_for_work_once_per_brpop_timeout_and_takes_a_message_at_once(
        queue, monkeypatch):
    """A worker's consumer blocks on its empty queues for BRPOP_TIMEOUT_S (kombu's 1 s woke an
    idle Redis every second to be told "nothing"); a message sent while it blocks is taken at
    once, not when the BRPOP would have timed out."""
    import socket

    from kombu import Connection, Queue

    from zkqueue.coordinator import deadletter
    from zkqueue.coordinator.broker import celery_config
    from zkqueue.coordinator.transport import BRPOP_TIMEOUT_S

    config = celery_config(queue.settings())
    name = "zkq.test-idle-consumer"

    def connect():
        return Connection(queue.redis_url, transport=config["broker_transport"],
                          transport_options=config["broker_transport_options"])

    def drain(conn, seconds: float) -> float:
        started = time.monotonic()
        try:
            conn.drain_events(timeout=seconds)
        except socket.timeout:
            pass
        return time.monotonic() - started

    with connect() as conn, conn.Consumer(Queue(name), accept=["json"]) as consumer:
        consumer.qos(prefetch_count=1)
        with commands_sent(monkeypatch) as sent:
            drain(conn, BRPOP_TIMEOUT_S + 1)            # idle: a BRPOP, its timeout, the next one
        assert sent.count("BRPOP") == 2, sent           # kombu's 1 s: 6 in those 6 s
        # That second BRPOP is still blocking; a message pushed now ends it. (Not a zkqueue task:
        # the guarded channel takes it off the queue into the dead letters.)
        with connect() as other:
            other.Producer().publish({"n": 1}, routing_key=name, declare=[Queue(name)], serializer="json")
        waited = drain(conn, BRPOP_TIMEOUT_S)
    assert not any(queue.r.llen(lst) for lst in queue_lists(name))
    assert [d["queue"] for d in deadletter.listing(queue.r)] == [name]
    assert waited < 1.0

"""What a partition costs Redis in requests (each one Redis wakes for and reads, however many
commands it carries): a submit's messages go in pipelines, and a worker's acknowledgement
rides on its next BRPOP."""

from __future__ import annotations

import redis
from kombu.utils.json import loads

from queue_support import CHAIN, PARTITIONS, PrivateRedis, QueueEnv, queue, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import UNACKED_HASH, decode_task, queue_lists
from zkqueue.coordinator.jobs import Priority


def test_a_submit_pushes_its_messages_in_a_pipeline_per_chunk_not_a_request_each(tmp_path):
    """A submit's messages go to Redis together (Sender.held: kombu's publish batch), a
    pipeline per chunk of checks armed, rather than one request a message: Redis reads far
    fewer requests than there are messages (INFO total_reads_processed counts its socket
    reads, on a server of this test's own; a large pipeline takes a few), and every message
    is on the queue, once."""
    server = PrivateRedis()
    env = QueueEnv(tmp_path, server.r, redis_url=server.url)
    try:
        client = env.client()
        job_id, n = "e" * 32, 600          # three chunks (ARM_CHUNK)
        client.scheduler.submit("f" * 32, request_id=None, priority=Priority.NORMAL, zkey_sha="0" * 64,
                                witnesses=[("0" * 64, "w.wtns")])      # the sender connected and declared
        before = int(server.r.info("stats")["total_reads_processed"])
        client.scheduler.submit(job_id, request_id=None, priority=Priority.NORMAL, zkey_sha="0" * 64,
                                witnesses=[(f"{i:064x}", f"w{i}.wtns") for i in range(n)])
        reads = int(server.r.info("stats")["total_reads_processed"]) - before - 1      # less our INFO
        assert reads < n // 4, f"{reads} requests for {n} messages"
        sent = [decode_task(loads(raw))
                for lst in queue_lists(keys.SHARED_QUEUE) for raw in server.r.lrange(lst, 0, -1)]
        assert sorted(int(m.slot) for m in sent if m.job_id == job_id) == list(range(n))
    finally:
        env.close()
        server.close()


def test_a_worker_acknowledges_each_message_in_the_request_of_its_next_brpop(queue):
    """A real worker: the HDEL that acknowledges a message (kombu's unacked hash) reaches Redis
    on the consumer's own connection just ahead of its next BRPOP, one write for both, and
    nothing acknowledged stays in the hash once the job is done."""
    group = queue.start_workers(1)
    queue.ready(group)
    client = queue.client()
    watcher = redis.Redis.from_url(queue.redis_url)
    db = watcher.connection_pool.connection_kwargs.get("db", 0)
    end = "zkq-test-end"
    commands = []
    with watcher.monitor() as monitor:
        client.submit(CHAIN / "circuit_final.zkey", PARTITIONS).wait(120)
        wait_until(lambda: queue.r.hlen(UNACKED_HASH) == 0, 10, "the job's messages to be acknowledged")
        watcher.echo(end)
        while (c := monitor.next_command())["command"] != f"ECHO {end}":
            # This test's database only (MONITOR shows every test process's), and no script's
            # own commands (resend.lua's HDEL of a copy it sent again).
            if c["db"] == db and c["client_type"] != "lua":
                commands.append((c["client_address"], c["client_port"], c["command"].split(" ")[0:2]))
    acks = [i for i, (_, _, words) in enumerate(commands) if words == ["HDEL", UNACKED_HASH]]
    # Each partition's message and finalize's, and any copy the reaper sent again meanwhile.
    assert len(acks) >= len(PARTITIONS) + 1
    for i in acks:
        after = [words[0] for addr, port, words in commands[i + 1:] if (addr, port) == commands[i][:2]]
        assert after[:1] == ["BRPOP"], commands[i:i + 6]
    watcher.close()

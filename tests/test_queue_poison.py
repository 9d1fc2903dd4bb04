"""Nothing on a queue list can stop a consumer: junk of every kind, on every list the workers
consume, mid-job, goes to the dead-letter list with its reason, no worker goes down, no
pickle is loaded, and the job completes; the reaper and the metrics read any value on a list."""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections import Counter

import msgpack

from conftest import snarkjs_verifies
from queue_support import CHAIN, PARTITIONS, ROOT, queue, wait_until  # noqa: F401  (fixture)

from zkqueue.coordinator import deadletter, keys
from zkqueue.coordinator.broker import PRIORITY_SEP, UNACKED_HASH, queue_lists, task_slot, waiting_slots
from zkqueue.coordinator.metrics import snapshot
from zkqueue.coordinator.reaper import Reaper

ZKEY = CHAIN / "circuit_final.zkey"
VK = CHAIN / "verification_key.json"


def _envelope(task, args, *, content_type="application/x-msgpack", body: bytes | None = None) -> bytes:
    """A kombu message envelope as Celery writes one to a Redis list (protocol 2)."""
    if body is None:
        body = msgpack.packb([list(args), {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}])
    return json.dumps({
        "body": base64.b64encode(body).decode(), "content-encoding": "binary", "content-type": content_type,
        "headers": {"lang": "py", "task": task, "id": str(uuid.uuid4()), "argsrepr": "junk"},
        "properties": {"correlation_id": str(uuid.uuid4()), "delivery_mode": 2, "priority": 0,
                       "delivery_info": {"exchange": "", "routing_key": keys.SHARED_QUEUE},
                       "body_encoding": "base64", "delivery_tag": str(uuid.uuid4())}}).encode()


def _evil_pickle(marker) -> bytes:
    """A pickle that runs `touch MARKER` when loaded (written by hand: nothing here imports pickle)."""
    return b"cposix\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR."


def _junk(marker) -> dict[str, bytes]:
    """One of each kind of message no worker can run, by the reason the guard must give."""
    return {
        "not JSON": os.urandom(48) + b"\xff",
        "a JSON list, not an object": b"[1, 2, 3]",
        "properties (with a delivery_tag), headers and body are required": b'{"hello": "world"}',
        "refused content type 'application/x-python-serialize'": _envelope(
            "zkqueue.prove_partition", (), content_type="application/x-python-serialize", body=_evil_pickle(marker)),
        "no job 0123456789abcdef0123456789abcdef": _envelope("zkqueue.prove_partition",
                                                             ("0123456789abcdef0123456789abcdef", 0, 1)),
        "unknown task 'zkqueue.mine_bitcoin'": _envelope("zkqueue.mine_bitcoin", ("x",)),
        "is not an integer >= 1": _envelope("zkqueue.finalize", ("0123456789abcdef0123456789abcdef", "one")),
    }


def test_junk_on_every_consumed_list_mid_job_is_dead_lettered_and_the_job_completes(queue, tmp_path):
    group = queue.start_workers(2, fault="slow:0.5")
    beats = queue.ready(group)
    pids = sorted(b["pid"] for b in beats)
    job = queue.client().submit(ZKEY, PARTITIONS)
    wait_until(lambda: job.progress().running or job.progress().proved, 30, "the job to be under way")

    marker = tmp_path / "pwned"
    junk = _junk(marker)
    lists = [lst for q in (keys.SHARED_QUEUE, keys.SYNTH_QUEUE, *(keys.worker_queue(b["worker"]) for b in beats))
             for lst in queue_lists(q)]
    for lst in lists:
        for raw in junk.values():
            queue.r.lpush(lst, raw)
    expected = len(lists) * len(junk)

    result = job.wait(120)
    for p in result.partitions:
        proof, public = tmp_path / f"proof_{p.index}.json", tmp_path / f"public_{p.index}.json"
        proof.write_text(json.dumps(p.proof))
        public.write_text(json.dumps(p.public_signals))
        assert snarkjs_verifies(VK, public, proof), p.index
    wait_until(lambda: deadletter.count(queue.r) >= expected, 60, f"all {expected} junk messages to be taken")
    assert not any(queue.r.llen(lst) for lst in lists)
    dead = deadletter.listing(queue.r, limit=expected + 10)
    assert len(dead) == expected == deadletter.count(queue.r)
    queues = Counter(lst.split(PRIORITY_SEP)[0] for lst in lists)      # each queue has 4 priority lists
    for reason in junk:       # each kind, from each list, with its reason and its queue
        found = Counter(d["queue"] for d in dead if reason in d["reason"])
        assert found == queues, (reason, [d["reason"] for d in dead])
    assert not marker.exists(), "a pickle was loaded"
    assert snapshot(queue.r)["dead_letters"] == expected          # zkqueue_dead_letters
    # No worker went down: the same processes beat, and the supervisor restarted none.
    assert sorted(b["pid"] for b in queue.ready(group)) == pids
    assert "restarting" not in group.log() and group.proc.poll() is None
    # A following job is served as usual.
    assert queue.client().submit(ZKEY, PARTITIONS[:1]).wait(60).complete
    listed = _cli(queue, "dead-letters", "list")
    assert listed.returncode == 0 and f"{expected} dead letter(s)" in listed.stdout
    assert f"{expected} message(s) on the dead-letter list" in _cli(queue, "status").stdout
    assert f"cleared {expected}" in _cli(queue, "dead-letters", "clear").stdout and deadletter.count(queue.r) == 0


def test_the_reaper_and_the_metrics_read_any_value_on_a_list(queue):
    from zkqueue.coordinator.client import Client
    client = Client(settings=queue.settings(queued_check_s=0.5))     # its slots are checked every 0.5 s
    queue.clients.append(client)
    for lst in queue_lists(keys.SHARED_QUEUE) + queue_lists(keys.worker_queue("gone")):
        for raw in _junk("/nonexistent").values():
            queue.r.lpush(lst, raw)
    queue.r.hset(UNACKED_HASH, mapping={"t1": b"\x00\x01garbage", "t2": b'"a string"', "t3": b"[[1], 2]",
                                        "t4": b"[{\"properties\": 7}]"})
    job = client.submit(ZKEY, PARTITIONS[:1])          # no workers: its message waits on the queue
    assert (job.id, "0", 1) in waiting_slots(queue.r)
    # The message is lost from the broker: the reaper's queued check must still find that out.
    for lst in queue_lists(keys.SHARED_QUEUE):
        for raw in queue.r.lrange(lst, 0, -1):
            try:
                ours = task_slot(json.loads(raw)) == (job.id, "0", 1)
            except ValueError:
                ours = False
            if ours:
                queue.r.lrem(lst, 1, raw)
    assert (job.id, "0", 1) not in waiting_slots(queue.r)
    reaper = Reaper(client.scheduler)
    wait_until(lambda: reaper.tick() > 0, 10, "the reaper to send the lost message again")
    assert (job.id, "0", 1) in waiting_slots(queue.r)
    s = snapshot(queue.r)
    assert s["queues"][keys.SHARED_QUEUE] >= len(_junk("x")) and s["unacked"] == 4


def _cli(queue, *args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "zkqueue.cli", *args], env=queue.env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)

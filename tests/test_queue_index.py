"""The reaper's incremental view of the queues (coordinator/queue_index.py) against a full
read (broker.waiting_slots), through pushes, pops, put-backs, removals and deletions of real
kombu messages; and that it reads only what changed."""

from __future__ import annotations

import random

from queue_support import queue  # noqa: F401  (fixture)

from zkqueue.coordinator import keys
from zkqueue.coordinator.broker import Sender, queue_lists, waiting_slots
from zkqueue.coordinator.queue_index import QueueIndex


def _agrees(index: QueueIndex, r) -> set:
    index.refresh()
    full = waiting_slots(r)
    assert {s for s in full if s in index} == full
    assert len(index) == sum(r.llen(lst) for q in (keys.SHARED_QUEUE, keys.SYNTH_QUEUE) for lst in queue_lists(q))
    return full


def test_the_index_follows_the_queues_reading_only_what_changed(queue):
    r = queue.r
    sender = Sender(queue.settings())
    index = QueueIndex(r)
    rng = random.Random(7)
    sent = 0

    def send(n):
        nonlocal sent
        for _ in range(n):
            sender.send_partition("a" * 32, sent, 1, priority=rng.choice([0, 3, 6, 9]))
            sent += 1

    send(300)
    assert len(_agrees(index, r)) == 300
    first_read = index.elements_read
    assert first_read == 300

    # Consumers pop at the tail while senders push at the head: each refresh reads the new ones only.
    for _ in range(5):
        for _ in range(rng.randint(0, 40)):
            r.brpop(queue_lists(keys.SHARED_QUEUE), timeout=1)
        send(rng.randint(0, 30))
        _agrees(index, r)
    assert index.elements_read - first_read <= sent - 300, (index.elements_read, sent)
    full_reads = index.full_reads

    # A message put back at the tail (kombu's restore), one removed from the middle, a list
    # deleted: the index notices and reads those lists again.
    lst = queue_lists(keys.SHARED_QUEUE)[0]
    raw = r.rpop(lst)
    r.rpush(lst, raw)
    r.lpush(lst, b"not a kombu message")
    _agrees(index, r)
    middle = r.lindex(lst, 5)
    r.lrem(lst, 1, middle)
    _agrees(index, r)
    r.delete(queue_lists(keys.SHARED_QUEUE)[1])
    _agrees(index, r)
    assert index.full_reads > full_reads
    while any(r.brpop(queue_lists(keys.SHARED_QUEUE), timeout=0.1) for _ in range(1)):
        pass
    assert _agrees(index, r) == set() and len(index) == 0
    sender.close()

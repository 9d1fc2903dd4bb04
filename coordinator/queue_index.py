"""Which zkqueue messages wait on the broker's queues, kept up to date incrementally.

The reaper checks that a queued slot's message still exists (coordinator/reaper.py). Reading
every queue list in full for that costs O(queued messages) per check: at 100,000 queued
partitions, megabytes read and decoded every second. A queue list only changes at its ends,
so this index reads only what changed since the last look:

  kombu LPUSHes new messages at the head and BRPOPs them from the tail. One Lua call per
  list returns its length, its tail element and the elements in front of the head this
  index last saw (LPOS finds it; O(new messages)). The index drops what left at the tail
  (up to the tail element now) and adds what came in at the head. Anything else - a
  message put back at the tail, removed from the middle, a list deleted and refilled -
  shows up as a length or tail that does not add up, and that list is read again in full.

The index keeps, per message, a 64-bit hash of its bytes and its (job, slot, token); only
the head message's bytes are kept whole (to find it again). Messages that are not
zkqueue's count for nothing, as in broker.waiting_slots.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, deque
from dataclasses import dataclass, field

import redis

from .broker import queue_lists, queue_names, task_slots

# KEYS[1]: a queue list. ARGV[1]: the head element the caller knows ("" for none).
# Returns {length, tail element or false, elements in front of the known head (all of them
# when it is gone), 1 if the known head was found}.
_DELTA = """
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return {0, false, {}, 0} end
local tail = redis.call('LINDEX', KEYS[1], -1)
if ARGV[1] == '' then return {n, tail, redis.call('LRANGE', KEYS[1], 0, -1), 0} end
local pos = redis.call('LPOS', KEYS[1], ARGV[1])
if not pos then return {n, tail, redis.call('LRANGE', KEYS[1], 0, -1), 0} end
if pos == 0 then return {n, tail, {}, 1} end
return {n, tail, redis.call('LRANGE', KEYS[1], 0, pos - 1), 1}
"""


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=8).digest()


def _slots_of(raw: bytes) -> tuple:
    """Every (job, slot, token) a message stands for (a prove_batch message: several)."""
    try:
        return task_slots(json.loads(raw))
    except ValueError:
        return ()


@dataclass
class _List:
    """One list's messages, head (left) to tail (right): (digest, the slots it stands for)."""

    entries: deque = field(default_factory=deque)
    head: bytes = b""


class QueueIndex:
    """Which (job, slot, token) have a message waiting on the zkqueue queues: refresh() reads
    what changed, `slot in index` answers from memory."""

    def __init__(self, r: redis.Redis):
        self.r = r
        self._delta = r.register_script(_DELTA)
        self._lists: dict[str, _List] = {}
        self._counts: Counter = Counter()     # (job, slot, token) -> messages waiting, all lists
        self.full_reads = 0                   # lists read whole (first look, or an inconsistency)
        self.elements_read = 0                # elements transferred since creation

    def __contains__(self, slot: tuple[str, str, int]) -> bool:
        return self._counts[slot] > 0

    def __len__(self) -> int:
        return sum(len(s.entries) for s in self._lists.values())

    def _add(self, entry) -> None:
        for slot in entry[1]:
            self._counts[slot] += 1

    def _remove(self, entry) -> None:
        for slot in entry[1]:
            self._counts[slot] -= 1
            if self._counts[slot] <= 0:
                del self._counts[slot]

    def _reset(self, state: _List, elements: list[bytes]) -> None:
        for entry in state.entries:
            self._remove(entry)
        state.entries = deque((_digest(e), _slots_of(e)) for e in elements)
        for entry in state.entries:
            self._add(entry)
        state.head = elements[0] if elements else b""

    def _update(self, name: str) -> None:
        state = self._lists.setdefault(name, _List())
        n, tail, new, found = self._delta(keys=[name], args=[state.head])
        n, found = int(n), int(found)
        self.elements_read += len(new)
        if n == 0 or not found:
            self.full_reads += bool(n)
            self._reset(state, new)
            return
        # What left at the tail: everything behind the element that is the tail now.
        tail_digest = _digest(tail)
        entries = state.entries
        while entries and entries[-1][0] != tail_digest:
            self._remove(entries.pop())
        for element in reversed(new):
            entry = (_digest(element), _slots_of(element))
            entries.appendleft(entry)
            self._add(entry)
        if new:
            state.head = new[0]
        if len(entries) != n or not entries or entries[-1][0] != tail_digest:
            # Not only pushes at the head and pops at the tail: read it again.
            self.full_reads += 1
            self._reset(state, self.r.lrange(name, 0, -1))
            self.elements_read += n

    def refresh(self) -> None:
        """Brings the index up to date with every queue list.

        Raises:
            redis.RedisError: Redis cannot be reached.
        """
        names = [lst for q in queue_names(self.r) for lst in queue_lists(q)]
        for gone in set(self._lists) - set(names):
            self._reset(self._lists.pop(gone), [])
        for name in names:
            self._update(name)

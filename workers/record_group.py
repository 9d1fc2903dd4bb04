"""A batch's proofs that are proved and checked but not recorded yet, recorded together.

A batch's members are recorded in one transition per group (coordinator/lua/record_batch.lua)
rather than one each: every proof that is ready at once (a device pass) goes in one call,
and proofs that come one by one wait at most a set time (the caller's: half a lease), so
that a kill loses little work and nothing is recorded twice (each record is token-fenced).
This module holds the group; the caller says how to record it.
"""

from __future__ import annotations

import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PendingProofs(Generic[T]):
    """Proofs waiting to be recorded, by the member's position in its batch.

    `record(items)` records [(position, proof), ...] in one call and returns each position's
    verdict ("recorded", "stale", ...); `ended(position, verdict)` is called for each after.
    """

    def __init__(self, record: Callable[[list[tuple[int, T]]], dict[int, str]],
                 ended: Callable[[int, str], None]):
        self._record, self._ended = record, ended
        self._items: list[tuple[int, T]] = []
        self._since = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, position: int) -> bool:
        return any(position == p for p, _ in self._items)

    def add(self, position: int, proof: T) -> None:
        if not self._items:
            self._since = time.monotonic()
        self._items.append((position, proof))

    def age_s(self) -> float:
        """How long the oldest waiting proof has waited (0 when none waits)."""
        return time.monotonic() - self._since if self._items else 0.0

    def flush(self) -> None:
        """Records every waiting proof in one call (nothing when none waits)."""
        if not self._items:
            return
        items, self._items = self._items, []
        verdicts = self._record(items)
        for position, _ in items:
            self._ended(position, verdicts[position])

"""Proving keys kept loaded (memory-mapped and point-checked) within a byte budget, LRU."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable


class KeyCache:
    """sha256 -> loaded key, evicting the least recently used beyond `budget_bytes`."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = budget_bytes
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def used_bytes(self) -> int:
        return sum(size for _, size in self._items.values())

    @property
    def free_bytes(self) -> int:
        """Budget not taken by the keys held now (what a new key may add without evicting)."""
        with self._lock:
            return self.budget_bytes - self.used_bytes

    def held(self) -> list[str]:
        """The keys (sha256) held now."""
        with self._lock:
            return list(self._items)

    def contains(self, sha: str) -> bool:
        with self._lock:
            return sha in self._items

    def get(self, sha: str, load: Callable[[], tuple[Any, int]]) -> tuple[Any, bool]:
        """(key, was cached). `load` returns (key, size in bytes); errors it raises propagate
        and nothing is cached. A key larger than the whole budget is used but not kept."""
        with self._lock:
            hit = self._items.get(sha)
            if hit is not None:
                self._items.move_to_end(sha)
                return hit[0], True
        key, size = load()
        with self._lock:
            if size <= self.budget_bytes:
                self._items[sha] = (key, size)
                while self.used_bytes > self.budget_bytes:
                    self._items.popitem(last=False)
        return key, False

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

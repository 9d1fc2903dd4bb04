"""Test-only faults, set per worker process with ZKQUEUE_FAULT (comma separated):

    slow:SECONDS         sleep that long after claiming each partition, holding the lease
    slow-first:SECONDS   the same, only on a partition's first attempt
    corrupt              return corrupted proofs (pi_c replaced by pi_a: parses, never verifies)

Used by the tests to kill a worker in the middle of a partition deterministically and to
play a worker with broken hardware. A worker logs a warning when a fault is set.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Faults:
    slow_s: float = 0.0
    slow_first_s: float = 0.0
    corrupt: bool = False

    @property
    def any(self) -> bool:
        return bool(self.slow_s or self.slow_first_s or self.corrupt)

    def delay(self, attempt: int, stop: threading.Event) -> None:
        """Sleeps as configured for this attempt; returns early when `stop` is set."""
        seconds = self.slow_s + (self.slow_first_s if attempt == 1 else 0.0)
        if seconds > 0:
            stop.wait(seconds)

    def apply(self, proof):
        """The proof as this (possibly faulty) worker reports it."""
        if self.corrupt:
            return dataclasses.replace(proof, c=proof.a)
        return proof


def parse(spec: str | None) -> Faults:
    """Faults from a ZKQUEUE_FAULT value.

    Raises:
        ValueError: an unknown fault or a bad number.
    """
    kw: dict = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        name, _, arg = item.partition(":")
        if name == "slow":
            kw["slow_s"] = float(arg)
        elif name == "slow-first":
            kw["slow_first_s"] = float(arg)
        elif name == "corrupt":
            kw["corrupt"] = True
        else:
            raise ValueError(f"unknown fault {item!r} in ZKQUEUE_FAULT (slow:S, slow-first:S, corrupt)")
    return Faults(**kw)


def from_env() -> Faults:
    return parse(os.environ.get("ZKQUEUE_FAULT"))

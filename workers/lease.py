"""Keeps a lease alive from a background thread while the main thread proves."""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Callable

log = logging.getLogger("zkqueue.lease")


def kill_this_process() -> None:
    """SIGKILL ourselves: the Celery parent sees its pool child die and starts a fresh one
    (reject-on-worker-lost hands the message back; its token is stale by then)."""
    os.kill(os.getpid(), signal.SIGKILL)


class LeaseKeeper:
    """Calls `refresh()` every `interval_s`; it returns "ok", "overdue", "lost" or "job_over".

    Anything but "ok" sets `stop`, so the attempt gives up at its next kernel boundary: the
    slot belongs to someone else now, ran past its deadline, or the job was cancelled or
    failed. If the attempt has not come back `stop_grace_s` later, it is stuck inside a
    native call (a hung kernel) that nothing in this process can interrupt, so `on_stuck`
    runs: by default it kills this process, and the worker's supervisor replaces it.

    A Redis error is logged and retried; if it lasts past the lease TTL the reaper hands
    the slot to another worker.
    """

    def __init__(self, refresh: Callable[[], str], interval_s: float, *, stop_grace_s: float = 5.0,
                 on_stuck: Callable[[], None] = kill_this_process):
        self._refresh = refresh
        self.interval_s = interval_s
        self.stop_grace_s = stop_grace_s
        self._on_stuck = on_stuck
        self.stop = threading.Event()
        self.reason = ""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zkqueue-lease", daemon=True)

    def _run(self) -> None:
        while not self._done.wait(self.interval_s):
            try:
                verdict = self._refresh()
            except Exception as exc:   # keep trying: one failed refresh is not a lost lease
                log.warning("lease refresh failed: %s", exc)
                continue
            if verdict != "ok":
                self.reason = verdict
                self.stop.set()
                break
        else:
            return      # the attempt ended
        if not self._done.wait(self.stop_grace_s):
            log.error("attempt stopped (%s) but still inside a kernel call after %.1f s: "
                      "restarting this worker process", self.reason, self.stop_grace_s)
            for h in logging.getLogger().handlers:
                h.flush()
            self._on_stuck()

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join(timeout=5)


class BatchLeases:
    """Refreshes the leases of a batch's members that are still in hand, each by its own token.

    `refresh()` is what LeaseKeeper calls: "ok" while some member is held; "job_over" or
    "overdue" (every member shares the job and the run deadline) stop the whole batch; a
    member another worker holds now is put in `lost` and left out; "lost" when none is left.
    `refresh_one(index, token)` refreshes one member's lease (the scheduler's refresh);
    `refresh_all(held)`, when given, refreshes every held member at once (one Redis call per
    batch: the scheduler's refresh_batch) and returns a verdict per member, in order, or
    ["job_over"].
    """

    def __init__(self, refresh_one: Callable[[int, int], str], members: list[tuple[int, int]], *, what: str,
                 refresh_all: Callable[[list[tuple[int, int]]], list[str]] | None = None):
        self.refresh_one, self.members, self.what = refresh_one, members, what
        self.refresh_all = refresh_all
        self.lost: set[int] = set()
        self._ended: set[int] = set()
        self._lock = threading.Lock()

    def ended(self, index: int) -> None:
        """The member has been recorded, failed or handed on: no more refreshes for it."""
        with self._lock:
            self._ended.add(index)

    def _held(self) -> list[tuple[int, int]]:
        with self._lock:
            return [(i, t) for i, t in self.members if i not in self._ended and i not in self.lost]

    def _verdicts(self, held: list[tuple[int, int]]):
        if self.refresh_all is None or not held:
            for index, token in held:
                yield index, self.refresh_one(index, token)
            return
        verdicts = self.refresh_all(held)
        if verdicts == ["job_over"]:
            yield held[0][0], "job_over"
            return
        yield from zip((i for i, _ in held), verdicts)

    def refresh(self) -> str:
        held = self._held()
        for index, verdict in self._verdicts(held):
            if verdict == "lost":
                log.warning("%s partition %d: lease lost; dropped from the batch", self.what, index)
                with self._lock:
                    self.lost.add(index)
            elif verdict != "ok":
                return verdict
        return "ok" if self._held() or not held else "lost"

"""Keeps a lease alive from a background thread while the main thread proves."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("zkqueue.lease")


class LeaseKeeper:
    """Calls `refresh()` every `interval_s`; it returns "ok", "lost" or "job_over".

    Anything but "ok" sets `stop`, so the prover can give up early: the slot belongs to
    someone else now, or the job was cancelled or failed. A Redis error is logged and
    retried; if it lasts past the lease TTL the reaper hands the slot to another worker.
    """

    def __init__(self, refresh: Callable[[], str], interval_s: float):
        self._refresh = refresh
        self.interval_s = interval_s
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
                return

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join(timeout=5)

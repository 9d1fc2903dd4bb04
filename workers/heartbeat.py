"""Publishes a worker's heartbeat from a background thread of its main process."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("zkqueue.heartbeat")


class Heartbeat:
    """Calls `beat(info())` every `interval_s` until stopped; errors are logged, not fatal."""

    def __init__(self, beat: Callable[[dict], None], info: Callable[[], dict], interval_s: float):
        self._beat, self._info, self.interval_s = beat, info, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zkqueue-heartbeat", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self._beat(self._info())
            except Exception as exc:
                log.warning("heartbeat failed: %s", exc)
            if self._stop.wait(self.interval_s):
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

"""The exit statuses of a worker process, one table for both sides.

The worker (`python -m zkqueue.tasks.main`) exits with these; its supervisor
(`zkqueue worker`, workers/spawn.py, through workers/deaths.py) reads them to decide whether a restart
can help, and returns them as its own status. A new reason for a worker to stop gets a code
here and a branch in `deaths.DeathWatch.explain`, never a bare number on either side.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Why a worker process exited. Signals show as negative return codes instead (-9: SIGKILL)."""

    # Stopped warm (SIGTERM from its supervisor or the service manager, its supervisor gone,
    # its consumer stalled): the supervisor starts a fresh one.
    OK = 0
    # An unexpected error (a traceback; Celery's own EX_FAILURE): restarted, with backoff
    # when it happens soon after start.
    FAILED = 1
    # Bad configuration or a failed start-up check (a setting, the backend, the device, too
    # little memory for keys): the same process would fail the same way, so it is not restarted.
    CONFIG = 2
    # The start-up canary (workers/canary.py) failed: this build or device proves wrong, so it
    # takes no work; restarting cannot mend it (fix the build or the device, then restart).
    CANARY = 4
    # 3-63 are free for zkqueue's own reasons. 64-78 are sysexits.h's, which Celery's own
    # exits use (EX_USAGE, EX_UNAVAILABLE, ...): keep clear of them.

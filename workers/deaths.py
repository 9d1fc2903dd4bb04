"""Why a worker process died, in words an operator acts on, and whether restarting it can help.

"killed by SIGKILL" alone sends an operator to the host's kernel log to guess "OOM?". The
kernel counts its OOM kills per memory control group (cgroup v2 `memory.events`, v1
`memory.oom_control`) and host-wide (`/proc/vmstat` `oom_kill`), so a supervisor that reads
those counters when it starts a worker and again when the worker dies can say which it was:
the OOM killer at the group's limit, the host running out of memory, or a signal from
outside; an exit status is read from the worker's exit-code table (workers/exit_codes.py),
which also says whether restarting can help. The one place that reads a worker's end: a new
reason in the table gets its branch in `DeathWatch.explain`.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .exit_codes import ExitCode
from .memory import CgroupMemory, innermost_group

OUT_OF_MEMORY = "out of memory"
SIGNALLED = "signal"
EXITED = "exit"


@dataclass(frozen=True)
class Death:
    """How a worker process ended and what its supervisor makes of it."""

    cause: str            # OUT_OF_MEMORY, SIGNALLED or EXITED
    how: str              # the sentence for the log
    restart: bool = True  # False: the same process would end the same way; the device is given up
    status: int = ExitCode.OK   # the supervisor's own exit status, when it gives the device up


def host_oom_kills(vmstat: Path = Path("/proc/vmstat")) -> int:
    """The kernel's count of OOM kills on this host since boot (0 where it does not say)."""
    try:
        for line in vmstat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except OSError:
        pass
    return 0


class DeathWatch:
    """Taken when a worker starts (`pid` its process): the OOM-kill counters of its memory
    group and of the host then, so that `explain` can tell an OOM kill from another SIGKILL."""

    def __init__(self, pid: int):
        self.group: CgroupMemory | None = innermost_group(pid)
        self.limit = self.group.limit_bytes() if self.group else None
        self.group_kills = self.group.oom_kills() if self.group else 0
        self.host_kills = host_oom_kills()

    def explain(self, rc: int) -> Death:
        """The death of a process that returned `rc` (Popen's: negative for a signal)."""
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            if rc == -signal.SIGKILL:
                oom = self._oom_words()
                if oom:
                    return Death(OUT_OF_MEMORY, f"died of memory: killed by the kernel's OOM killer ({oom})")
            unrecorded = " from outside (no out-of-memory kill was recorded)" if rc == -signal.SIGKILL else ""
            return Death(SIGNALLED, f"killed by {name}{unrecorded}")
        if rc == ExitCode.CONFIG:
            return Death(EXITED, f"exited with status {rc} (bad configuration)",
                         restart=False, status=ExitCode.CONFIG)
        if rc == ExitCode.CANARY:
            return Death(EXITED, f"exited with status {rc}: its build failed the start-up canary (a wrong proof "
                         "of the bundled circuit; `zkqueue status` names the build): it takes no work",
                         restart=False, status=ExitCode.CANARY)
        oom = self._oom_words()
        if oom:     # one of its processes (the canary, a pool child) was the OOM killer's
            return Death(OUT_OF_MEMORY, f"died of memory: exited with status {rc} after the kernel's OOM killer "
                         f"killed one of its processes ({oom})")
        return Death(EXITED, f"exited with status {rc}")

    def _oom_words(self) -> str:
        """How the counters show an OOM kill since the start, or "" (oom_words)."""
        return self.oom_words()

    def oom_words(self, *, host_wide: bool = True) -> str:
        """How the counters show an OOM kill since this watch was taken, or "". Without
        `host_wide`, the host's counter (any process's OOM kill on this host) is read only
        when this process has no memory group, whose own counter names its kills."""
        if self.group is not None:
            try:
                kills = self.group.oom_kills()
            except OSError:     # the group went away
                kills = self.group_kills
            if kills > self.group_kills:
                try:    # the limit now: it may have changed since the start
                    now_limit = self.group.limit_bytes() or self.limit
                except OSError:
                    now_limit = self.limit
                limit = f"its limit of {now_limit >> 20} MiB" if now_limit else "its limit"
                return f"control group {self.group.path} at {limit}; OOM kills there {self.group_kills} -> {kills}"
            if not host_wide:
                return ""
        host = host_oom_kills()
        if host > self.host_kills:
            return f"the host ran out of memory; OOM kills on the host {self.host_kills} -> {host}"
        return ""


class PoolWatch:
    """From a worker's main process: whether the kernel's OOM killer took one of its pool
    children (Celery's prefork pool, where partitions are proved). The OOM killer picks the
    process with the most memory, the pool child proving a partition too big for its limit;
    Celery's main process survives it and forks a new child, so no supervisor sees a death.
    A child can be forked, take a partition and be killed between two heartbeats, so the watch
    does not name children it saw: `check` says that this process's memory group counted an
    OOM kill, and `is_gone` tells the queue which attempts' processes are no longer alive."""

    PATIENCE = 5    # checks a counted kill waits for an attempt of a gone process to show

    def __init__(self, children: Callable[[], set[int]]):
        self._children = children
        self._watch = DeathWatch(os.getpid())
        self._unmatched = 0

    def check(self) -> str:
        """How the counters show an OOM kill not yet settled, or "". Its group's counter only:
        on a shared host, another process's OOM kill must not make a child that ended otherwise
        (a SIGKILL, a restart) look like a death of memory."""
        return self._watch.oom_words(host_wide=False)

    def is_gone(self, pid: int) -> bool:
        """Whether `pid` is no longer one of this process's pool children (this process itself,
        which proves in a solo pool, is not gone while it asks)."""
        return pid != os.getpid() and pid not in self._children()

    def settled(self, found: bool) -> None:
        """After a check that showed a kill: `found` attempts of gone processes (the kill is
        settled: the next one is measured from here), or none yet (a killed process may still
        be in the process table; after PATIENCE checks the kill is taken as one of no attempt's,
        e.g. an idle child's)."""
        self._unmatched = 0 if found else self._unmatched + 1
        if found or self._unmatched >= self.PATIENCE:
            self._watch, self._unmatched = DeathWatch(os.getpid()), 0

"""Real memory-limited control groups for tests: a group made under this process's own
memory group (cgroup v1 `memory.limit_in_bytes`, or v2 `memory.max` where only v2 has the
controller), processes started inside it, and the group removed afterwards.

    with MemoryGroup(256 << 20) as group:
        proc = group.popen([...])     # runs inside the group from its first instruction
        ...
        group.oom_kills()             # the kernel's count of OOM kills in the group
"""

from __future__ import annotations

import os
import signal
import subprocess

from queue_support import wait_until
from zkqueue.workers.memory import cgroup_memory


def unavailable() -> str:
    """Why no memory group can be made here ("" when one can)."""
    if os.geteuid() != 0:
        return "making a cgroup needs root"
    chain = cgroup_memory()
    if not chain:
        return "no cgroup memory controller is mounted"
    if not os.access(chain[0].path, os.W_OK):
        return f"{chain[0].path} is not writable"
    return ""


class MemoryGroup:
    """A control group with a memory limit, below this process's own group."""

    def __init__(self, limit_bytes: int, name: str | None = None):
        parent = cgroup_memory()[0]
        self.version = parent.version
        self.path = parent.path / (name or f"zkq-test-{os.getpid()}-{os.urandom(3).hex()}")
        self.limit_bytes = limit_bytes

    def __enter__(self) -> "MemoryGroup":
        self.path.mkdir()
        if self.version == 2:
            try:   # no swap to escape to: the limit is the limit
                (self.path / "memory.swap.max").write_text("0")
            except OSError:
                pass
        self.set_limit(self.limit_bytes)
        return self

    def set_limit(self, limit_bytes: int) -> None:
        """Sets the group's limit (lowering it below what the group uses fails with EBUSY)."""
        grow = limit_bytes > self.limit_bytes
        if self.version == 1:
            # memory+swap must stay >= memory: raise it first when growing, lower it last
            files = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            for name in (reversed(files) if grow else files):
                try:
                    (self.path / name).write_text(str(limit_bytes))
                except OSError:
                    if name == files[0]:
                        raise           # no memsw accounting on this kernel: only that is optional
        else:
            (self.path / "memory.max").write_text(str(limit_bytes))
        self.limit_bytes = limit_bytes

    def working_set_bytes(self) -> int:
        """What the group uses that reclaim cannot take back (workers/memory.py's measure)."""
        from zkqueue.workers.memory import CgroupMemory
        return CgroupMemory(self.path, self.version).working_set_bytes()

    def prefix(self) -> list[str]:
        """A command prefix that runs the command inside the group: a shell joins it, then
        execs the command (so the command is in the group from its first instruction)."""
        return ["sh", "-c", f'echo $$ > "{self.path / "cgroup.procs"}" && exec "$@"', "sh"]

    def popen(self, cmd: list, **kw) -> subprocess.Popen:
        """Starts `cmd` inside the group."""
        return subprocess.Popen([*self.prefix(), *map(str, cmd)], **kw)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def _emptied(self) -> bool:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return not self.pids()

    def _removed(self) -> bool:
        try:
            self.path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:     # EBUSY while the kernel still tears down a killed process
            return False

    def __exit__(self, *exc) -> None:
        wait_until(self._emptied, 10, f"the processes of {self.path} to die")
        wait_until(self._removed, 10, f"{self.path} to be removed")

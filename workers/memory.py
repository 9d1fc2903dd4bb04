"""How much memory a worker may use: the limit that applies to it, what it uses now, and the
out-of-memory kills its control group has seen.

Inside a container or a systemd slice, `psutil.virtual_memory()` reports the host's memory,
not the limit the kernel enforces; a worker that sized itself from it would be killed by the
OOM killer. The limit that applies is the smallest of the host's RAM and the `memory.max`
(cgroup v2) or `memory.limit_in_bytes` (cgroup v1) of the worker's control group and each
group above it, found through /proc/self/cgroup and /proc/self/mountinfo.

"Used" is the working set as the kernel would not give it back: usage less the inactive file
cache (what kubelet calls the working set), since the page cache of a memory-mapped proving
key counts against a cgroup's limit but is reclaimed before anything is killed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = 1 << 62     # cgroup v1 writes 9223372036854771712 (PAGE_COUNTER_MAX) for "no limit"


@dataclass(frozen=True)
class CgroupMemory:
    """The memory controller's folder of one control group."""
    path: Path
    version: int        # 1 or 2

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def limit_bytes(self) -> int | None:
        """This group's own limit (not its ancestors'); None when unlimited."""
        raw = self._read("memory.max" if self.version == 2 else "memory.limit_in_bytes").strip()
        if raw == "max":
            return None
        value = int(raw)
        return None if value >= UNLIMITED else value

    def usage_bytes(self) -> int:
        return int(self._read("memory.current" if self.version == 2 else "memory.usage_in_bytes"))

    def working_set_bytes(self) -> int:
        """Usage less the inactive file cache: what reclaim cannot take back before an OOM kill."""
        stat = self.stat()
        inactive = stat.get("inactive_file" if self.version == 2 else "total_inactive_file", 0)
        return max(0, self.usage_bytes() - inactive)

    def stat(self) -> dict[str, int]:
        out = {}
        for line in self._read("memory.stat").splitlines():
            name, _, value = line.partition(" ")
            if value.strip().isdigit():
                out[name] = int(value)
        return out

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer has killed in this group (and, on v2, below it)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = self._read(name)
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


@dataclass(frozen=True)
class MemoryLimit:
    """What one process may use: `limit_bytes` in all, `used_bytes` of it in use now."""
    limit_bytes: int
    used_bytes: int
    source: str                       # "cgroup v1 /sys/fs/cgroup/memory/x", "host RAM", ...
    cgroup: CgroupMemory | None = None

    @property
    def available_bytes(self) -> int:
        return max(0, self.limit_bytes - self.used_bytes)


def _mounts(mountinfo: str) -> list[tuple[int, Path, str]]:
    """(cgroup version, mount point, root of the hierarchy seen there) of each mount that
    carries the memory controller: cgroup2 mounts (v2) and v1 mounts with `memory`."""
    out = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, options = rfields[0], rfields[2].split(",")
        if fstype == "cgroup2":
            out.append((2, Path(fields[4]), fields[3]))
        elif fstype == "cgroup" and "memory" in options:
            out.append((1, Path(fields[4]), fields[3]))
    return out


def cgroup_memory(pid: int | str = "self", proc: Path = Path("/proc")) -> list[CgroupMemory]:
    """The memory-controller folders of `pid`'s control group and of every group above it,
    innermost first; empty when no memory controller applies (none mounted, or not visible)."""
    try:
        membership = (proc / str(pid) / "cgroup").read_text()
        mounts = _mounts((proc / str(pid) / "mountinfo").read_text())
    except OSError:
        return []
    v1 = v2 = None
    for line in membership.splitlines():
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hier == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    # cgroup v1's memory controller wins where both exist (a hybrid host: v2 then has none).
    for version, group in ((1, v1), (2, v2)):
        if group is None:
            continue
        for mv, point, root in mounts:
            if mv != version:
                continue
            rel = os.path.relpath(group, root) if group.startswith(root) else None
            if rel is None or rel.startswith(".."):
                continue
            folder = (point / rel).resolve()
            limit_file = "memory.max" if version == 2 else "memory.limit_in_bytes"
            chain = []
            while True:
                if (folder / limit_file).exists():
                    chain.append(CgroupMemory(folder, version))
                if folder == point or point not in folder.parents:
                    break
                folder = folder.parent
            if chain:
                return chain
    return []


def host_memory() -> MemoryLimit:
    """The host's RAM and what is in use (MemTotal less MemAvailable)."""
    import psutil
    vm = psutil.virtual_memory()
    return MemoryLimit(vm.total, vm.total - vm.available, "host RAM")


def process_limit(pid: int | str = "self") -> MemoryLimit:
    """The memory limit that applies to `pid`: the tightest of its control groups' limits
    (each ancestor's counts: a group can use no more than its parent allows) and the host's
    RAM, whichever leaves the least available; a group is named by its folder and version."""
    candidates = [host_memory()]
    for group in cgroup_memory(pid):
        try:
            limit = group.limit_bytes()
            if limit is not None:
                candidates.append(MemoryLimit(limit, group.working_set_bytes(), f"cgroup v{group.version} {group.path}",
                                              group))
        except OSError:     # the group went away while we read it
            continue
    return min(candidates, key=lambda c: c.available_bytes)


def innermost_group(pid: int | str = "self") -> CgroupMemory | None:
    """`pid`'s own memory-controller group (where its OOM kills are counted), if any."""
    chain = cgroup_memory(pid)
    return chain[0] if chain else None


def device_memory(index: int) -> tuple[int, int] | None:
    """(total, free) bytes of GPU `index` as NVML reads them, without initialising CUDA in
    this process (the pool child is forked from it); None without NVML or that device."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:   # noqa: BLE001 - no NVML library, no driver: no device figure
        return None
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
        return int(info.total), int(info.free)
    except Exception:   # noqa: BLE001 - no such device
        return None
    finally:
        pynvml.nvmlShutdown()

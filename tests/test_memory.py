"""A worker's memory limit as the kernel enforces it (workers/memory.py), read inside real
control groups: the group's limit and not the host's RAM, and the OOM kills counted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from cgroups import MemoryGroup, unavailable
from queue_support import queue, wait_until  # noqa: F401  (fixture)
from zkqueue.workers import memory

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "cgroups available")

READ_LIMIT = ("import json; from zkqueue.workers import memory as m; l = m.process_limit(); "
              "print(json.dumps({'limit': l.limit_bytes, 'used': l.used_bytes, 'source': l.source}))")


def test_a_process_in_a_group_sees_the_groups_limit_not_the_hosts():
    host = memory.host_memory()
    limit = 300 << 20
    with MemoryGroup(limit) as group:
        proc = group.popen([sys.executable, "-c", READ_LIMIT], stdout=subprocess.PIPE, text=True)
        out, _ = proc.communicate(timeout=60)
    seen = json.loads(out)
    assert seen["limit"] == limit < host.limit_bytes
    assert str(group.path) in seen["source"] and "cgroup v" in seen["source"]
    assert 0 < seen["used"] < limit      # the interpreter itself, counted in its group


def test_outside_any_limited_group_the_host_ram_applies():
    out = subprocess.run([sys.executable, "-c", READ_LIMIT], capture_output=True, text=True, check=True).stdout
    seen = json.loads(out)
    chain_limits = [g.limit_bytes() for g in memory.cgroup_memory()]
    if any(chain_limits):
        pytest.skip(f"this test process itself runs under a memory limit: {chain_limits}")
    assert seen["source"] == "host RAM" and seen["limit"] == memory.host_memory().limit_bytes


def test_an_oom_kill_is_counted_in_the_group():
    with MemoryGroup(64 << 20) as group:
        before = group.oom_kills()
        hog = group.popen([sys.executable, "-c", "b = bytearray(256 << 20); print(len(b))"],
                          stdout=subprocess.PIPE, text=True)
        hog.communicate(timeout=60)
        assert hog.returncode == -signal.SIGKILL
        assert group.oom_kills() == before + 1
        # The module reads the same counter from the group's folder.
        assert memory.CgroupMemory(group.path, group.version).oom_kills() == before + 1


def test_a_worker_whose_group_is_too_small_to_start_is_named_dead_of_memory_and_backed_off(queue):  # noqa: F811
    # 64 MiB holds the supervisor (~16 MiB) but not a worker process (~80 MiB at start): the
    # kernel's OOM killer kills the worker each time it starts.
    with MemoryGroup(64 << 20) as group:
        workers = queue.start_workers(1, prefix=group.prefix())

        def two_deaths():
            deaths = [line for line in workers.log().splitlines() if "died of memory" in line]
            return deaths if len(deaths) >= 2 else None
        deaths = wait_until(two_deaths, 60, "the supervisor to log two deaths of memory")
        assert "OOM killer" in deaths[0] and str(group.path) in deaths[0] and "64 MiB" in deaths[0], deaths[0]
        # Backed off, not a hot loop: each restart waits longer than the one before.
        assert "restarting in 1 s" in deaths[0] and "restarting in 2 s" in deaths[1], deaths
        assert group.oom_kills() >= 2
        assert workers.proc.poll() is None          # the supervisor itself lives on

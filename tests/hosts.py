"""Hosts for tests and benches: network namespaces on a private switch, one per machine.

A `Network` is one switch (a Linux bridge inside a namespace of its own, so the machine's
own network namespace is never touched) and the hosts plugged into it: each host is a
network namespace with one veth link to the switch and an address on a private /24 that
exists only behind that switch. No host has a route anywhere else: nothing a test starts
can leave the machine. Each host has its own directory (its HOME and its zkqueue cache), so
nothing but the network joins two hosts.

    with Network(tmp_path / "net") as net:
        redis_host = net.host("redis")                 # 10.77.0.2
        proc = redis_host.popen(["redis-server", ...], log="redis")
        net.cut("w1"); net.mend("w1")                  # the host's cable pulled and put back
        net.host("client").call(lambda: redis.Redis(host=redis_host.addr).ping())

`Host.popen` runs a command inside the host (`ip netns exec`), in a process group of its
own; `Host.call` runs a Python callable on a thread that entered the host's namespace, so
the test itself can talk to the hosts (sockets belong to the namespace they are created
in). `Network.close` (also on failure, from the fixture's finalizer or atexit) kills every
process it started, by process group, and whatever else still runs in its namespaces
(`ip netns pids`), then deletes the namespaces. `sweep_leftovers()` deletes the namespaces a
killed test run left behind: their names carry the creating process's id.

Needs root and iproute2 (scripts/setup.sh installs it).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import itertools
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

PREFIX = "zkqh"                 # every namespace this module makes: zkqh{pid}n{k}-{host}
SUBNET = "10.77.0"              # only behind the switch: each Network has its own
CLONE_NEWNET = 0x40000000
_NAME = re.compile(rf"^{PREFIX}(\d+)n\d+-")
_counter = itertools.count()
_open: set["Network"] = set()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def available() -> str:
    """'' when namespaces can be made here, else why not (not root, no iproute2)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        _ip("netns", "list")
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"`ip netns` does not work here: {exc}"
    return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace(ns: str) -> None:
    """SIGKILLs whatever still runs in `ns`, then deletes it."""
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    deadline = time.monotonic() + 10
    while _ip("netns", "pids", ns, check=False).stdout.split() and time.monotonic() < deadline:
        time.sleep(0.05)
    _ip("netns", "del", ns, check=False)


def sweep_leftovers() -> list[str]:
    """Deletes the namespaces of test runs that are gone (killed before their cleanup ran);
    returns their names. Namespaces of a live process are left alone."""
    swept = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = _NAME.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _kill_namespace(name)
            swept.append(name)
    return swept


class _NamespaceThread:
    """One thread that entered a network namespace and runs callables there."""

    def __init__(self, ns: str):
        self.ns = ns
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"netns-{ns}",
                                                          initializer=self._enter)

    def _enter(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/var/run/netns/{self.ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into {self.ns}: {os.strerror(err)}")
        finally:
            os.close(fd)

    def call(self, fn: Callable, *args, timeout_s: float | None = None, **kw):
        return self.pool.submit(fn, *args, **kw).result(timeout=timeout_s)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class Host:
    """One machine: a namespace, an address, a directory and the processes started on it."""

    network: "Network"
    name: str
    ns: str
    addr: str
    veth: str                  # its cable's end in the switch
    dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    _thread: _NamespaceThread | None = None

    @property
    def cache_dir(self) -> Path:
        return self.dir / "cache"

    def env(self, base: dict | None = None, **extra) -> dict:
        """An environment for a process on this host: its own HOME and zkqueue cache."""
        env = dict(os.environ if base is None else base)
        env.update(HOME=str(self.dir / "home"), ZKQUEUE_CACHE_DIR=str(self.cache_dir))
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def _inside(self, cmd: list) -> list[str]:
        """`cmd` run inside this host: its network namespace, and a UTS namespace whose host
        name is the host's own (worker ids and fingerprints name their machine). Each step
        execs the next, so the process started is `cmd` itself."""
        return ["ip", "netns", "exec", self.ns, "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"',
                self.name, *map(str, cmd)]

    def popen(self, cmd: list, *, env: dict | None = None, log: str | None = None, cwd=None) -> subprocess.Popen:
        """Starts `cmd` on this host in a new process group; output to DIR/log.log."""
        out = open(self.dir / f"{log or Path(str(cmd[0])).name}.log", "ab")
        try:
            proc = subprocess.Popen(self._inside(cmd), env=env or self.env(),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=cwd)
        finally:
            out.close()
        self.procs.append(proc)
        return proc

    def run(self, cmd: list, *, env: dict | None = None, timeout_s: float = 120, cwd=None,
            check: bool = False) -> subprocess.CompletedProcess:
        """Runs `cmd` on this host to completion; its output is returned."""
        proc = subprocess.run(self._inside(cmd), env=env or self.env(),
                              capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name}: {' '.join(map(str, cmd))} exited {proc.returncode}\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def call(self, fn: Callable, *args, timeout_s: float | None = 60, **kw):
        """Runs fn(*args, **kw) on a thread inside this host's network: a socket it opens is
        this host's (keep clients made here for use on this host only)."""
        if self._thread is None:
            self._thread = _NamespaceThread(self.ns)
        return self._thread.call(fn, *args, timeout_s=timeout_s, **kw)

    def stop(self, proc: subprocess.Popen, *, sig: int = signal.SIGTERM, grace_s: float = 10) -> None:
        """Signals `proc`'s process group, and SIGKILLs it if it is still there after grace_s."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        for proc in self.procs:
            self.stop(proc, sig=signal.SIGKILL, grace_s=0)
        if self._thread is not None:
            self._thread.close()


class Network:
    """A private switch and its hosts (see the module's docstring)."""

    def __init__(self, root: Path, *, subnet: str = SUBNET):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.subnet = subnet
        self.id = f"{PREFIX}{os.getpid()}n{next(_counter)}"
        self.switch = f"{self.id}-switch"
        self.hosts: dict[str, Host] = {}
        self._lock = threading.Lock()
        self._namespaces = [self.switch]
        _open.add(self)
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def host(self, name: str) -> Host:
        """Adds a host called `name` (at most 13 characters) with the next free address."""
        with self._lock:
            if name in self.hosts:
                return self.hosts[name]
            if len(name) > 13 or not re.fullmatch(r"[a-z0-9-]+", name):
                raise ValueError(f"host name {name!r}: up to 13 of [a-z0-9-]")
            ns, addr, veth = f"{self.id}-{name}", f"{self.subnet}.{len(self.hosts) + 2}", f"v-{name}"
            _ip("netns", "add", ns)
            self._namespaces.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # The cable: one end in the switch (v-NAME), the other the host's eth0.
            _ip("-n", self.switch, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", veth, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            d = self.root / name
            for sub in ("home", "cache"):
                (d / sub).mkdir(parents=True, exist_ok=True)
            host = self.hosts[name] = Host(self, name, ns, addr, veth, d)
            return host

    def cut(self, name: str) -> None:
        """Pulls the host's cable: its packets go nowhere; its connections stay open, silent."""
        _ip("-n", self.switch, "link", "set", self.hosts[name].veth, "down")

    def mend(self, name: str) -> None:
        """Puts the cable back."""
        _ip("-n", self.switch, "link", "set", self.hosts[name].veth, "up")

    def close(self) -> None:
        """Stops every process of every host (by process group), then deletes the namespaces."""
        for host in self.hosts.values():
            host.close()
        for ns in reversed(self._namespaces):
            _kill_namespace(ns)
        self._namespaces.clear()
        self.hosts.clear()
        _open.discard(self)


@atexit.register
def _close_all() -> None:
    for net in list(_open):
        net.close()

"""Helpers for the queue tests: a real Redis database, real worker process groups.

The Redis URL is $ZKQUEUE_TEST_REDIS_URL (default redis://127.0.0.1:6379/13); the database
is flushed before and after each test. Under pytest-xdist each test process has a database of
its own: worker gwN uses the URL's database + N. Workers are `python -m zkqueue.cli worker`
process trees, each in its own session/process group, killed at teardown.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _redis_url_of_this_process(base: str) -> str:
    """`base`, with its database moved up by this pytest-xdist worker's number (gw0: +0),
    so that test processes running side by side never flush each other's database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    url = urllib.parse.urlsplit(base)
    db = int(url.path.strip("/") or 0) + int(worker.removeprefix("gw"))
    if db > 15:
        raise RuntimeError(f"ZKQUEUE_TEST_REDIS_URL={base}: test process {worker} would need database {db}, "
                           "beyond Redis's default 16; use a lower database or fewer test processes (-n)")
    return urllib.parse.urlunsplit(url._replace(path=f"/{db}"))


REDIS_URL = _redis_url_of_this_process(os.environ.get("ZKQUEUE_TEST_REDIS_URL", "redis://127.0.0.1:6379/13"))
CHAIN = FIXTURES / "bn128_chain_10"
PARTITIONS = [CHAIN / "partitions" / f"witness_{i}.wtns" for i in range(4)]


# Deadlines shorter than production's, for every queue test that is not about their values
# (one that is sets its own): recovery in a test then takes seconds, not tens of seconds.
TEST_TIMERS = {"ZKQUEUE_LEASE_TTL_S": "3", "ZKQUEUE_QUEUED_CHECK_S": "5", "ZKQUEUE_ORPHAN_TIMEOUT_S": "10",
               "ZKQUEUE_OVERDUE_MIN_S": "5", "ZKQUEUE_SEND_GRACE_S": "5"}


def wait_until(predicate, timeout_s: float, what: str, *, interval_s: float = 0.05):
    """Polls `predicate` until it returns something truthy (returned) or fails the test."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)


_native_built = False


def _build_native() -> None:
    """Builds the CPU kernels once, here, so worker start-up deadlines measure start-up only."""
    global _native_built
    if not _native_built:
        from zkqueue.groth16 import native
        native.library_path()
        _native_built = True


@dataclass
class WorkerGroup:
    """One `zkqueue worker` process tree in its own process group."""

    proc: subprocess.Popen
    log_path: Path
    n: int
    env: dict

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the whole tree (supervisor, Celery workers, pool children)."""
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


@dataclass
class QueueEnv:
    """A flushed Redis database, a store directory and the worker groups of one test."""

    tmp: Path
    r: redis.Redis
    redis_url: str = REDIS_URL
    groups: list[WorkerGroup] = field(default_factory=list)
    clients: list = field(default_factory=list)

    @property
    def store_url(self) -> str:
        return str(self.tmp / "store")

    def settings(self, **kw):
        """The fleet settings of this test's client: TEST_TIMERS, then `kw`."""
        from zkqueue.config import Settings
        return Settings.from_env(self.env(), redis_url=self.redis_url, store_url=self.store_url, **kw)

    def client(self):
        from zkqueue.coordinator.client import Client
        c = Client(settings=self.settings())
        self.clients.append(c)
        return c

    def env(self, **extra) -> dict:
        """The environment of this test's worker and CLI processes: TEST_TIMERS, then `extra`."""
        env = dict(os.environ, ZKQUEUE_REDIS_URL=self.redis_url, ZKQUEUE_STORE_URL=self.store_url,
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("ZKQUEUE_FAULT", None)
        env.update({k: v for k, v in TEST_TIMERS.items() if k not in os.environ})
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def start_workers(self, n: int = 1, *, fault: str | None = None, threads: int = 1,
                      prefix: list[str] | None = None, env: dict | None = None) -> WorkerGroup:
        """Starts `zkqueue worker --cpu n` in a new process group (not waiting for it).
        `prefix` runs it under another command (e.g. faketime); `env` adds variables."""
        _build_native()
        extra = {"ZKQUEUE_FAULT": fault} if fault else {}
        env = self.env(**extra, **(env or {}))
        log_path = self.tmp / f"workers-{len(self.groups)}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([*(prefix or []), sys.executable, "-m", "zkqueue.cli", "worker", "--cpu",
                                     str(n), "--threads", str(threads)], cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        group = WorkerGroup(proc, log_path, n, env)
        self.groups.append(group)
        return group

    def heartbeats(self, group: WorkerGroup | None = None) -> list[dict]:
        from zkqueue.coordinator.registry import Registry
        beats = Registry(self.r, ttl_s=5).live()
        return [b for b in beats if group is None or b.get("pgid") == group.pgid]

    def ready(self, group: WorkerGroup, timeout_s: float = 60) -> list[dict]:
        """Waits until every worker of `group` publishes a heartbeat; returns them."""
        def check():
            if group.proc.poll() is not None:
                pytest.fail(f"worker group exited with {group.proc.returncode}:\n{group.log()[-4000:]}")
            beats = self.heartbeats(group)
            return beats if len(beats) >= group.n else None
        return wait_until(check, timeout_s, f"{group.n} worker(s) to be ready")

    def close(self) -> None:
        for c in self.clients:
            c.close()
        for g in self.groups:
            if g.proc.poll() is None:
                g.kill()


@pytest.fixture
def queue(tmp_path):
    """A QueueEnv on a flushed Redis database; prints worker logs when the test fails."""
    r = redis.Redis.from_url(REDIS_URL)
    try:
        r.ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {REDIS_URL} ({exc}); start one with scripts/redis.sh")
    # A worker SIGKILLed by the previous test can still be blocked in BRPOP on the server
    # until Redis notices its closed socket; Redis would hand it (and so lose) the first
    # message this test pushes. Start only once no such consumer is left on our database.
    db = r.connection_pool.connection_kwargs.get("db", 0)
    wait_until(lambda: not [c for c in r.client_list() if int(c.get("db", -1)) == db
                            and c.get("cmd") in ("brpop", "blpop", "bzpopmin")],
               10, "consumers of the previous test to disconnect from Redis")
    r.flushdb()
    env = QueueEnv(tmp_path, r)
    yield env
    env.close()
    # pytest shows captured output only for a failing test: there, the workers' logs help.
    for i, g in enumerate(env.groups):
        print(f"----- worker group {i} log -----\n{g.log()[-6000:]}")
    r.flushdb()
    r.close()


@contextmanager
def partition_slot_commands(redis_url: str, job_id: str):
    """The commands Redis runs on the job's partition slots inside the block, scripts' own
    included (MONITOR shows those), as (command, partition index) pairs in order."""
    partition_slots = re.compile(rf"^(\w+) \S*:job:{job_id}:slot:(\d+)(?: |$)")
    end = f"zkq-test-end-{os.urandom(4).hex()}"
    found: list[tuple[str, int]] = []
    client = redis.Redis.from_url(redis_url)
    with client.monitor() as monitor:
        yield found
        client.echo(end)
        while (command := monitor.next_command()["command"]) != f"ECHO {end}":
            if m := partition_slots.match(command):
                found.append((m[1].upper(), int(m[2])))
    client.close()


def slot_events(status, index: int, event: str) -> list[dict]:
    return [e for e in status.partitions[index].events if e["event"] == event]


def assert_snarkjs_accepts(partitions, vk: Path, tmp_path: Path) -> None:
    """`snarkjs groth16 verify` accepts every partition's proof (PartitionResult objects)."""
    from conftest import snarkjs_verifies
    for p in partitions:
        proof, public = tmp_path / f"proof_{p.index}.json", tmp_path / f"public_{p.index}.json"
        proof.write_text(json.dumps(p.proof))
        public.write_text(json.dumps(p.public_signals))
        assert snarkjs_verifies(vk, public, proof), f"snarkjs rejects partition {p.index}"


class PrivateRedis:
    """A redis-server of one test's own on a free port (to crash, restart or empty it without
    touching the shared one), stopped by PID when the test ends."""

    def __init__(self, *, data_dir: Path | None = None):
        from test_metrics import free_ports
        port = free_ports(1)
        self.cmd = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
        self.cmd += (["--dir", str(data_dir), "--appendonly", "yes", "--appendfsync", "everysec"] if data_dir
                     else ["--appendonly", "no"])
        self.url = f"redis://127.0.0.1:{port}/0"
        self.r = redis.Redis.from_url(self.url)
        self.proc = None
        self.start()

    def start(self) -> None:
        """Starts the server (again) and waits until it answers."""
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL)
        wait_until(self.pings, 10, "the private Redis to answer")

    def crash(self) -> None:
        """SIGKILL: whatever was not written to disk is lost."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def pings(self) -> bool:
        try:
            return bool(self.r.ping())
        except redis.RedisError:
            return False

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

"""What the fleet tests (and bench/) start: Redis with TLS and role users, Sentinel, a moto S3
server, zkqueue workers and clients, on namespaced hosts (tests/hosts.py) or on loopback.

Everything here is real: redis-server (and `redis-server --sentinel`) processes of our own
(never the shared Redis on 127.0.0.1:6379), moto's S3 HTTP server, a CA and certificates
made with openssl for the test, the ACL file rendered from deploy/redis/users.acl by
deploy/redis/render-users.sh, and `zkqueue` command lines.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import hosts
from queue_support import CHAIN, PARTITIONS, ROOT, wait_until  # noqa: F401  (re-exported)

ACL_TEMPLATE = ROOT / "deploy" / "redis" / "users.acl"
RENDER_USERS = ROOT / "deploy" / "redis" / "render-users.sh"
ROLES = ("admin", "worker", "client", "replica", "sentinel")
REDIS_TLS_PORT = 6380
S3_PORT = 5000
BUCKET = "zkqueue-test"
# moto accepts any credentials; these stand in for a deployment's own.
S3_ENV = {"AWS_ACCESS_KEY_ID": "zkqueue-test", "AWS_SECRET_ACCESS_KEY": "zkqueue-test-secret",
          "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_swept = False


@pytest.fixture
def network(tmp_path):
    """A private switch for the test's hosts; every process and namespace removed at the end."""
    global _swept
    why = hosts.available()
    if why:
        pytest.fail(f"the fleet tests need network namespaces: {why}")
    if not _swept:
        hosts.sweep_leftovers()
        _swept = True
    net = hosts.Network(tmp_path / "hosts")
    try:
        yield net
    finally:
        for h in net.hosts.values():
            for log in sorted(h.dir.glob("*.log")):
                print(f"----- {h.name}: {log.name} -----\n{log.read_text(errors='replace')[-5000:]}")
        net.close()


# -- credentials ------------------------------------------------------------------------------

@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certs(directory: Path, names: list[str]) -> Certs:
    """A CA, Redis's certificate for `names` (and 127.0.0.1) and a client certificate, made by
    scripts/tls-certs.sh as a deployment makes them."""
    d = Path(directory)
    subprocess.run(["bash", str(ROOT / "scripts" / "tls-certs.sh"), str(d), *names], check=True,
                   capture_output=True)
    return Certs(d / "ca.crt", d / "redis.crt", d / "redis.key", d / "client.crt", d / "client.key")


def make_passwords() -> dict[str, str]:
    return {role: secrets.token_hex(12) for role in ROLES}


def render_acl(path: Path, passwords: dict[str, str]) -> Path:
    """deploy/redis/users.acl rendered with `passwords` (what a deployment does)."""
    env = dict(os.environ, **{f"REDIS_{role.upper()}_PASSWORD": pw for role, pw in passwords.items()})
    subprocess.run(["sh", str(RENDER_USERS), str(ACL_TEMPLATE), str(path)], env=env, check=True)
    return path


def role_url(role: str, passwords: dict, host: str, port: int, *, scheme: str = "rediss", db: int = 0) -> str:
    return f"{scheme}://{role}:{passwords[role]}@{host}:{port}/{db}"


def tls_env(certs: Certs, *, client_cert: bool = True) -> dict:
    env = {"ZKQUEUE_REDIS_CA_FILE": str(certs.ca)}
    if client_cert:
        env.update(ZKQUEUE_REDIS_CERT_FILE=str(certs.client_cert), ZKQUEUE_REDIS_KEY_FILE=str(certs.client_key))
    return env


# -- servers ----------------------------------------------------------------------------------

def redis_command(addr: str, *, port: int = 0, tls_port: int = 0, certs: Certs | None = None,
                  aclfile: Path | None = None, workdir: Path, extra: list | None = None) -> list:
    """redis-server's command line: no persistence unless `extra` asks for it."""
    cmd = ["redis-server", "--bind", addr, "--port", str(port), "--dir", str(workdir), "--save", "",
           "--appendonly", "no", "--protected-mode", "no"]
    if tls_port:
        cmd += ["--tls-port", str(tls_port), "--tls-cert-file", certs.server_cert, "--tls-key-file", certs.server_key,
                "--tls-ca-cert-file", certs.ca, "--tls-auth-clients", "optional"]
    if aclfile:
        cmd += ["--aclfile", aclfile]
    return [*cmd, *(extra or [])]


def admin_client(url: str, certs: Certs | None = None, *, master: str = "zkqueue"):
    """A redis-py client as zkqueue builds them (coordinator/connections.py), for checks."""
    from zkqueue.config import ProcessSettings, Settings
    from zkqueue.coordinator import connections
    proc = ProcessSettings.from_env(tls_env(certs) if certs else {})
    return connections.client(Settings.from_env({}, redis_url=url, redis_sentinel_master=master), proc,
                              socket_timeout_s=10)


def wait_redis(host: hosts.Host | None, url: str, certs: Certs | None = None, timeout_s: float = 30) -> None:
    def ping():
        try:
            return admin_client(url, certs).ping()
        except Exception:        # noqa: BLE001 - not up yet
            return False
    wait_until((lambda: host.call(ping)) if host else ping, timeout_s, f"Redis at {url.rpartition('@')[2]}",
               interval_s=0.2)


def start_moto(host: hosts.Host | None, addr: str, port: int, log_dir: Path) -> subprocess.Popen:
    """moto's S3 server (standalone HTTP) on addr:port, and a bucket for the store."""
    cmd = [str(Path(sys.executable).with_name("moto_server")), "-H", addr, "-p", str(port)]
    if host:
        proc = host.popen(cmd, log="moto")
    else:
        with open(log_dir / "moto.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def make_bucket():
        import boto3
        try:
            boto3.client("s3", endpoint_url=f"http://{addr}:{port}", region_name=S3_ENV["AWS_DEFAULT_REGION"],
                         aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
                         aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=BUCKET)
            return True
        except Exception:        # noqa: BLE001 - not up yet
            return False
    wait_until(lambda: proc.poll() is not None or (host.call(make_bucket) if host else make_bucket()), 60,
               "moto's S3 server", interval_s=0.2)
    assert proc.poll() is None, "moto_server exited"
    return proc


def s3_env(addr: str, port: int) -> dict:
    """The usual AWS variables, as for AWS S3, MinIO or Ceph: endpoint, credentials, region."""
    return {"AWS_ENDPOINT_URL": f"http://{addr}:{port}", **S3_ENV}


def s3_client(addr: str, port: int):
    import boto3
    return boto3.client("s3", endpoint_url=f"http://{addr}:{port}", region_name=S3_ENV["AWS_DEFAULT_REGION"],
                        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"])


# -- zkqueue ----------------------------------------------------------------------------------

def seed_native_build(cache_dir: Path) -> None:
    """Copies this machine's compiled CPU kernels into a host's cache directory (a real
    machine compiles them once, at its first start; a test should not wait for that on every
    host). Only the build is copied: the host's artifacts stay its own."""
    import shutil

    from zkqueue.groth16 import native
    lib = native.library_path()          # built once (scripts/setup.sh did), here
    target = Path(cache_dir) / "native" / lib.parent.name
    if not target.exists():
        shutil.copytree(lib.parent, target)


def zkqueue_cmd(*args) -> list:
    return [sys.executable, "-m", "zkqueue.cli", *map(str, args)]


def zkqueue_env(base: dict, **extra) -> dict:
    """An environment for zkqueue processes: `base` (a host's), without settings this test
    does not choose (the developer's own ZKQUEUE_*/AWS_* stay out), plus `extra`."""
    env = {k: v for k, v in base.items() if not k.startswith(("ZKQUEUE_", "AWS_"))
           or k in ("ZKQUEUE_CACHE_DIR", "ZKQUEUE_INTEROP_DIR")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + base.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def live_workers(r) -> list[dict]:
    from zkqueue.coordinator.registry import Registry
    return Registry(r, ttl_s=5).live()


def snarkjs_accepts_all(out_dir: Path, n: int, vk: Path = CHAIN / "verification_key.json") -> None:
    from conftest import snarkjs_verifies
    for i in range(n):
        assert snarkjs_verifies(vk, out_dir / f"public_{i}.json", out_dir / f"proof_{i}.json"), i


def job_status(host: hosts.Host, env: dict, job_id: str) -> dict:
    proc = host.run(zkqueue_cmd("status", job_id, "--json"), env=env, check=True, timeout_s=60)
    return json.loads(proc.stdout)


def wait_for(predicate, timeout_s: float, what: str, *, interval_s: float = 0.2):
    return wait_until(predicate, timeout_s, what, interval_s=interval_s)


def monotonic() -> float:
    return time.monotonic()


# -- a fleet on namespaced hosts ---------------------------------------------------------------

STORE_PREFIX = "store"
SENTINEL_PORT = 26379
MASTER = "zkqueue"


class Fleet:
    """Redis (TLS, role users; or a primary, a replica and three sentinels), an S3 server and a
    client host on `net`; worker hosts are added with start_workers(). The client host is
    where the test looks from: `ask(fn)` runs fn(admin redis client) there."""

    def __init__(self, net: hosts.Network, tmp: Path, *, sentinel: bool = False, env: dict | None = None):
        self.net, self.tmp, self.sentinel, self.extra_env = net, Path(tmp), sentinel, env or {}
        self.client = net.host("client")
        self.s3 = net.host("s3")
        self.redis_hosts = [net.host(n) for n in (("r1", "r2", "r3") if sentinel else ("redis",))]
        self.certs = make_certs(self.tmp / "tls", [h.addr for h in self.redis_hosts])
        self.passwords = make_passwords()
        self.acl = render_acl(self.tmp / "users.acl", self.passwords)
        self.redis_procs: dict[str, subprocess.Popen] = {}
        self.moto = start_moto(self.s3, self.s3.addr, S3_PORT, self.s3.dir)
        if sentinel:
            self._start_sentinel_group()
        else:
            self.redis_procs["redis"] = self._start_redis(self.redis_hosts[0])
        wait_redis(self.client, self.url("admin"), self.certs)
        self._admin = None

    # Redis ---------------------------------------------------------------------------------

    def _start_redis(self, host: hosts.Host, *extra) -> subprocess.Popen:
        auth = ["--masteruser", "replica", "--masterauth", self.passwords["replica"], "--tls-replication", "yes"]
        return host.popen(redis_command(host.addr, tls_port=REDIS_TLS_PORT, certs=self.certs, aclfile=self.acl,
                                        workdir=host.dir, extra=[*auth, *extra]), log="redis")

    def _start_sentinel_group(self) -> None:
        primary, replica = self.redis_hosts[0], self.redis_hosts[1]
        self.redis_procs["primary"] = self._start_redis(primary)
        wait_redis(self.client, role_url("admin", self.passwords, primary.addr, REDIS_TLS_PORT), self.certs)
        self.redis_procs["replica"] = self._start_redis(replica, "--replicaof", primary.addr, str(REDIS_TLS_PORT))
        for h in self.redis_hosts:
            conf = h.dir / "sentinel.conf"
            conf.write_text("\n".join([
                f"bind {h.addr}", "port 0", f"tls-port {SENTINEL_PORT}", f"dir {h.dir}",
                f"tls-cert-file {self.certs.server_cert}", f"tls-key-file {self.certs.server_key}",
                f"tls-ca-cert-file {self.certs.ca}", "tls-auth-clients optional", "tls-replication yes",
                f"sentinel monitor {MASTER} {primary.addr} {REDIS_TLS_PORT} 2",
                f"sentinel auth-user {MASTER} sentinel", f"sentinel auth-pass {MASTER} {self.passwords['sentinel']}",
                f"sentinel down-after-milliseconds {MASTER} 1000", f"sentinel failover-timeout {MASTER} 10000",
                f"sentinel parallel-syncs {MASTER} 1", ""]))
            self.redis_procs[f"sentinel-{h.name}"] = h.popen(["redis-server", conf, "--sentinel"], log="sentinel")

        # Every sentinel must know the replica, not just one (discover_slaves asks them in turn):
        # a sentinel learns of replicas from the primary's INFO every 10 s, and one whose first
        # INFO came before the replica attached, if the vote makes it the failover's leader,
        # aborts it with "no good slave" (seen on a loaded CI VM).
        def ready():
            from redis.sentinel import Sentinel
            s = Sentinel([(h.addr, SENTINEL_PORT) for h in self.redis_hosts],
                         sentinel_kwargs={"ssl": True, "ssl_ca_certs": str(self.certs.ca), "socket_timeout": 2})
            try:
                return (s.discover_master(MASTER) == (primary.addr, REDIS_TLS_PORT)
                        and all(len(each.sentinel_slaves(MASTER)) == 1 for each in s.sentinels)
                        and all(len(each.sentinel_sentinels(MASTER)) >= 2 for each in s.sentinels))
            except Exception:        # noqa: BLE001 - not up yet
                return False
        wait_until(lambda: self.client.call(ready), 60, "the sentinels to know the primary, the replica and "
                   "each other", interval_s=0.3)

    def url(self, role: str) -> str:
        if not self.sentinel:
            return role_url(role, self.passwords, self.redis_hosts[0].addr, REDIS_TLS_PORT)
        hosts_ = ",".join(f"{h.addr}:{SENTINEL_PORT}" for h in self.redis_hosts)
        return f"sentinels://{role}:{self.passwords[role]}@{hosts_}/0"

    def ask(self, fn, timeout_s: float = 60):
        """fn(admin client) on the client host."""
        def run():
            if self._admin is None:
                self._admin = admin_client(self.url("admin"), self.certs, master=MASTER)
            return fn(self._admin)
        return self.client.call(run, timeout_s=timeout_s)

    # zkqueue -------------------------------------------------------------------------------

    @property
    def store_url(self) -> str:
        return f"s3://{BUCKET}/{STORE_PREFIX}"

    def env(self, host: hosts.Host, role: str, **extra) -> dict:
        """What a process on `host` running as `role` is given: the settings docs/operations.md's
        "Running across several machines" lists."""
        return zkqueue_env(host.env(), ZKQUEUE_REDIS_URL=self.url(role), ZKQUEUE_STORE_URL=self.store_url,
                           ZKQUEUE_REDIS_SENTINEL_MASTER=MASTER, **s3_env(self.s3.addr, S3_PORT),
                           **tls_env(self.certs), **self.extra_env, **extra)

    def start_workers(self, name: str, n: int = 1, **extra) -> tuple[hosts.Host, subprocess.Popen]:
        host = self.net.host(name)
        seed_native_build(host.cache_dir)
        proc = host.popen(zkqueue_cmd("worker", "--cpu", n, "--threads", 1), env=self.env(host, "worker", **extra),
                          log="worker")
        return host, proc

    def workers_ready(self, names: list[str], timeout_s: float = 90) -> list[dict]:
        def check():
            beats = self.ask(live_workers)
            on = {b.get("fingerprint", {}).get("host") for b in beats}
            return beats if set(names) <= on else None
        return wait_until(check, timeout_s, f"workers on {', '.join(names)}", interval_s=0.3)

    def submit(self, files: list[Path], out: Path, *, timeout_s: float = 150) -> subprocess.Popen:
        """`zkqueue submit ZKEY FILES --wait --out OUT` on the client host, as the client role."""
        return self.client.popen(zkqueue_cmd("submit", CHAIN / "circuit_final.zkey", *files, "--wait", "-q",
                                             "--out", out, "--timeout", timeout_s),
                                 env=self.env(self.client, "client"), log="submit")

    def finished(self, proc: subprocess.Popen, timeout_s: float) -> str:
        """The job id of a submit that exited 0 (its output otherwise fails the test)."""
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"submit still running after {timeout_s:g} s:\n{self.client.log('submit')[-3000:]}")
        out = self.client.log("submit")
        assert proc.returncode == 0, out[-3000:]
        return out.split("submitted job ", 1)[1].split()[0]

    def status(self, job_id: str) -> dict:
        return job_status(self.client, self.env(self.client, "client"), job_id)

    def gets_of(self, sha: str) -> int:
        """GETs of an object the S3 server has answered (its access log)."""
        return self.s3.log("moto").count(f"GET /{BUCKET}/{STORE_PREFIX}/sha256/{sha[:2]}/{sha}")

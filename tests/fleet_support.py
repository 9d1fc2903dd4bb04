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


def make_certs(directory: Path, ips: list[str]) -> Certs:
    """A CA, a server certificate for `ips` (and 127.0.0.1) and a client certificate (EC P-256)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)

    def ssl(*args):
        subprocess.run(["openssl", *map(str, args)], cwd=d, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
        "-out", "ca.crt", "-subj", "/CN=zkqueue test CA", "-days", "2")
    sans = ",".join(f"IP:{ip}" for ip in [*ips, "127.0.0.1"])
    for name, ext in (("server", f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        (d / f"{name}.ext").write_text(ext)
        ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN=zkqueue test {name}")
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return Certs(d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")


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
    return [sys.executable, "-m", "zkqueue.coordinator.cli", *map(str, args)]


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

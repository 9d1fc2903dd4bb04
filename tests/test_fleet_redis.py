"""Redis over TLS with one user per role (deploy/redis/users.acl), on a redis-server of the
test's own: what each role may not do, and every part of zkqueue - client, workers, the
Celery broker, Flower and the metrics exporter - working over TLS as its own role with no
command refused (Redis's ACL LOG stays empty)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import urllib.request

import pytest
import redis

from fleet_support import (CHAIN, PARTITIONS, admin_client, free_port, make_certs, make_passwords,
                           redis_command, render_acl, role_url, seed_native_build, tls_env, wait_redis, wait_until, zkqueue_cmd,
                           zkqueue_env)
from queue_support import ROOT
from test_metrics import scrape, try_scrape, total


@pytest.fixture
def tls_redis(tmp_path):
    """A redis-server on loopback: TLS only (no plain port), the role users, no persistence."""
    certs = make_certs(tmp_path / "tls", [])
    passwords = make_passwords()
    acl = render_acl(tmp_path / "users.acl", passwords)
    port = free_port()
    log = open(tmp_path / "redis.log", "wb")
    proc = subprocess.Popen(redis_command("127.0.0.1", tls_port=port, certs=certs, aclfile=acl, workdir=tmp_path),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = lambda role, db=0: role_url(role, passwords, "127.0.0.1", port, db=db)  # noqa: E731
        wait_redis(None, url("admin"), certs)
        yield certs, url, proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
        log.close()
        print((tmp_path / "redis.log").read_text(errors="replace")[-3000:])


def _refused(fn) -> str:
    with pytest.raises(redis.exceptions.ResponseError) as info:   # NoPermissionError is one
        fn()
    assert "NOPERM" in str(info.value) or "no permissions" in str(info.value), info.value
    return str(info.value)


def test_the_worker_user_cannot_flush_scan_or_read_another_prefix(tls_redis):
    certs, url, _ = tls_redis
    admin = admin_client(url("admin"), certs)
    admin.set("otherapp:secret", "x")
    admin.hset("otherapp:config", "k", "v")
    worker = admin_client(url("worker"), certs)
    worker.set("zkq:probe", "1")                        # its own prefix: yes
    assert worker.get("zkq:probe") == b"1"
    worker.lpush("zkq.prove", "m")
    assert worker.brpop(["zkq.prove"], timeout=1) == (b"zkq.prove", b"m")
    _refused(worker.flushall)
    _refused(worker.flushdb)
    _refused(lambda: worker.get("otherapp:secret"))
    _refused(lambda: worker.hgetall("otherapp:config"))
    _refused(lambda: worker.delete("otherapp:secret"))
    _refused(lambda: worker.keys("*"))
    _refused(lambda: worker.scan(0, match="*"))
    _refused(lambda: worker.config_get("*"))
    _refused(lambda: worker.eval("return redis.call('GET', KEYS[1])", 1, "otherapp:secret"))
    assert admin.get("otherapp:secret") == b"x"         # nothing flushed

    client = admin_client(url("client"), certs)
    _refused(client.flushall)
    _refused(lambda: client.brpop(["zkq.prove"], timeout=1))          # clients never consume work
    _refused(lambda: client.hset("zkq:quarantine", "fp", "{}"))       # nor clear or set quarantine
    _refused(lambda: client.get("otherapp:secret"))

    # Without credentials, and without TLS, nothing at all.
    port = int(url("admin").rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(certs.ca), retry=None).ping()
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=3, retry=None).ping()


def test_client_workers_broker_flower_and_metrics_over_tls_each_as_its_role(tls_redis, tmp_path):
    certs, url, _ = tls_redis
    tls = tls_env(certs)
    store = tmp_path / "store"
    env = lambda role, **kw: zkqueue_env(dict(os.environ), ZKQUEUE_REDIS_URL=url(role),  # noqa: E731
                                         ZKQUEUE_STORE_URL=store, ZKQUEUE_CACHE_DIR=tmp_path / f"cache-{role}",
                                         **tls, **kw)
    admin = admin_client(url("admin"), certs)
    procs = []
    seed_native_build(tmp_path / "cache-worker")

    def start(args, role, name, **kw):
        log = open(tmp_path / f"{name}.log", "wb")
        procs.append((subprocess.Popen(zkqueue_cmd(*args), cwd=ROOT, env=env(role, **kw), stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True), name))
        return procs[-1][0]

    flower_port, metrics_port = free_port(), free_port()
    try:
        start(["worker", "--cpu", "1", "--threads", "1"], "worker", "worker")
        start(["metrics", "--port", metrics_port, "--addr", "127.0.0.1"], "client", "metrics")
        start(["flower", "--port", flower_port, "--addr", "127.0.0.1"], "admin", "flower",
              ZKQUEUE_FLOWER_AUTH="zkq:secret")
        from fleet_support import live_workers
        beats = wait_until(lambda: live_workers(admin), 90, "the worker's heartbeat")
        out = tmp_path / "out"
        proc = subprocess.run(zkqueue_cmd("submit", CHAIN / "circuit_final.zkey", *PARTITIONS, "--wait", "-q",
                                          "--out", out, "--timeout", "120"),
                              cwd=ROOT, env=env("client"), capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        from fleet_support import snarkjs_accepts_all
        snarkjs_accepts_all(out, len(PARTITIONS))

        # The exporter (client role) reads the queue over TLS.
        samples = wait_until(lambda: try_scrape(metrics_port), 30, "the metrics exporter")
        assert total(samples, "zkqueue_live_workers") == 1
        # Flower (admin role) sees the worker through Celery's control channel (the worker
        # role's pidbox replies) and the task events.
        auth = "Basic " + base64.b64encode(b"zkq:secret").decode()

        def flower_workers():
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{flower_port}/api/workers?refresh=1",
                                             headers={"Authorization": auth})
                return json.loads(urllib.request.urlopen(req, timeout=10).read())
            except OSError:
                return None
        workers = wait_until(flower_workers, 60, "Flower to list the worker")
        assert any(beats[0]["worker"] in name for name in workers), workers
        # Nothing any role did was refused.
        assert admin.acl_log() == [], admin.acl_log()
        assert scrape(metrics_port)
    finally:
        for p, name in procs:
            os.killpg(p.pid, signal.SIGKILL)   # the whole tree: each started its own session
            p.wait(timeout=30)
            print(f"----- {name} -----\n{(tmp_path / f'{name}.log').read_text(errors='replace')[-4000:]}")


@pytest.mark.parametrize("url, hosts, tls, sentinel", [
    ("redis://127.0.0.1:6379/10", [("127.0.0.1", 6379)], False, False),
    ("rediss://worker:p%40ss@10.0.0.2:6380/0", [("10.0.0.2", 6380)], True, False),
    ("sentinel://client:pw@s1:26379,s2,[::1]:26380/3", [("s1", 26379), ("s2", 26379), ("::1", 26380)], False, True),
    ("sentinels://admin:pw@s1:26379,s2:26379,s3:26379/0", [("s1", 26379), ("s2", 26379), ("s3", 26379)], True, True),
])
def test_every_form_of_redis_url_gives_the_same_target_to_redis_py_and_to_celery(url, hosts, tls, sentinel, tmp_path):
    from zkqueue.config import ProcessSettings, Settings
    from zkqueue.coordinator import connections
    t = connections.parse(url)
    assert list(t.hosts) == hosts and (t.tls, t.sentinel) == (tls, sentinel)
    assert "pw" not in t.safe() and "p@ss" not in t.safe()
    proc = ProcessSettings.from_env({"ZKQUEUE_REDIS_CA_FILE": "/ca.crt"})
    conf = connections.celery_broker(Settings.from_env({}, redis_url=url, redis_sentinel_master="m"), proc)
    assert ("broker_use_ssl" in conf) == tls
    if tls:
        assert conf["broker_use_ssl"]["ssl_ca_certs"] == "/ca.crt"
    options = conf["broker_transport_options"]
    assert options["socket_timeout"] > 0
    if sentinel:
        assert conf["broker_url"].split(";") == [
            f"sentinel://{url.split('//')[1].split('@')[0]}@{f'[{h}]' if ':' in h else h}:{p}/{t.db}" for h, p in hosts]
        assert options["master_name"] == "m" and options["sentinel_kwargs"].get("ssl", False) == tls
    else:
        assert conf["broker_url"] == url


@pytest.mark.parametrize("url", ["http://h:1/0", "redis://h:1,h2:2/0", "redis://h:port/0", "redis://h:1/zero"])
def test_a_malformed_redis_url_is_a_configuration_error(url):
    from zkqueue.config import ConfigError
    from zkqueue.coordinator import connections
    with pytest.raises(ConfigError):
        connections.parse(url)

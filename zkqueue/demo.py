"""`zkqueue demo`: the whole queue on one machine, end to end.

Starts a local redis-server if none answers at the configured URL (and stops it after),
starts 2 CPU workers, submits the bundled 4-partition bn128 circuit (demo_data/), shows
progress, verifies every returned proof independently against the bundled
verification_key.json, prints the result, and stops what it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import redis

from zkqueue import config
from zkqueue.config import Settings

DATA = Path(__file__).parent / "demo_data"
N_WORKERS = 2


class DemoError(Exception):
    """A step of the demo failed; the message says which and why."""


def _ping(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def _wait_for(predicate, timeout_s: float, what: str, check=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


def start_redis(url: str) -> subprocess.Popen | None:
    """A redis-server on the URL's port, if nothing answers there and the host is local.

    Raises:
        DemoError: Redis is remote and not answering, or redis-server is not installed.
    """
    if _ping(url):
        return None
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 6379
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise DemoError(f"no Redis answers at {url}, and it is not local, so the demo cannot start one")
    exe = shutil.which("redis-server")
    if not exe:
        raise DemoError(f"no Redis answers at {url} and redis-server is not installed "
                        "(apt-get install redis-server, or set ZKQUEUE_REDIS_URL)")
    print(f"demo: starting redis-server on {host}:{port}", file=sys.stderr)
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", host, "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: _ping(url), 10, "redis-server to answer",
              check=lambda: proc.poll() is None or _raise(f"redis-server exited with {proc.returncode}"))
    return proc


def _raise(msg: str):
    raise DemoError(msg)


def start_workers(settings: Settings, log_path: Path) -> subprocess.Popen:
    """`zkqueue worker --cpu 2` in its own process group (so stopping it stops the tree),
    logging to `log_path`."""
    # The demo prints its own progress; its workers log warnings only unless a level was set.
    proc = config.process()
    proc = proc.replace(fault="", loglevel="WARNING" if proc.loglevel == "INFO" else proc.loglevel)
    env = config.child_environ(settings, proc)
    cmd = [sys.executable, "-m", "zkqueue.cli", "worker", "--cpu", str(N_WORKERS), "--threads", "1"]
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)


def stop_group(proc: subprocess.Popen | None, grace_s: float = 15.0) -> None:
    """SIGTERM the process group of `proc`, SIGKILL it after `grace_s`."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def run_external(settings: Settings, *, timeout_s: float = 300.0) -> int:
    """The demo job on the workers already serving `settings.redis_url` (compose's demo service)."""
    from zkqueue.coordinator.client import Client
    try:
        with Client(settings=settings) as client:
            _wait_for(lambda: client.workers(), 300, "a worker to report ready")
            return _prove_and_check(client, timeout_s)
    except DemoError as exc:
        print(f"demo: FAILED: {exc}", file=sys.stderr)
        return 1


def run(settings: Settings, *, timeout_s: float = 300.0, external: bool = False) -> int:
    """Runs the demo; 0 when every proof verified, 1 with the reason otherwise."""
    if external:
        return run_external(settings, timeout_s=timeout_s)
    redis_proc = workers = None
    log_dir = tempfile.mkdtemp(prefix="zkqueue-demo-")
    log_path = Path(log_dir) / "workers.log"
    try:
        redis_proc = start_redis(settings.redis_url)
        from zkqueue.coordinator.client import Client
        with Client(settings=settings) as client:
            before = {w["worker"] for w in client.workers()}
            workers = start_workers(settings, log_path)
            print(f"demo: starting {N_WORKERS} CPU workers (log: {log_path})", file=sys.stderr)

            def worker_alive():
                if workers.poll() is not None:
                    raise DemoError(f"the workers exited with status {workers.returncode}")

            _wait_for(lambda: len({w["worker"] for w in client.workers()} - before) >= N_WORKERS, 120,
                      f"{N_WORKERS} workers to report ready", check=worker_alive)
            return _prove_and_check(client, timeout_s)
    except DemoError as exc:
        print(f"demo: FAILED: {exc}", file=sys.stderr)
        if log_path.exists():
            print(f"demo: last lines of {log_path}:\n{log_path.read_text(errors='replace')[-3000:]}",
                  file=sys.stderr)
        return 1
    finally:
        stop_group(workers)
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
            print("demo: stopped the redis-server it started", file=sys.stderr)
        if workers is not None and workers.returncode in (0, -signal.SIGTERM):
            shutil.rmtree(log_dir, ignore_errors=True)


def _prove_and_check(client, timeout_s: float) -> int:
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats.jsonfiles import load_verification_key

    from zkqueue.coordinator.errors import JobCancelled, JobFailed, WaitTimeout
    from zkqueue.coordinator.progress import Progress
    from zkqueue.groth16.formats.jsonfiles import proof_from_json

    witnesses = sorted(DATA.glob("witness_*.wtns"))
    job = client.submit(DATA / "circuit_final.zkey", witnesses, priority="normal")
    print(f"demo: submitted job {job.id}: {len(witnesses)} partitions of a bn128 circuit "
          "(1017 constraints each)", file=sys.stderr)
    progress = Progress()
    try:
        result = job.wait(timeout_s, progress=progress)
    except (JobFailed, JobCancelled, WaitTimeout) as exc:
        progress.done()
        raise DemoError(str(exc)) from None
    progress.done()
    vk = load_verification_key(DATA / "verification_key.json")
    bad = []
    for p in result.partitions:
        ok = verifier.verify(vk, proof_from_json(p.proof), [int(s) for s in p.public_signals])
        fp = p.fingerprint
        print(f"partition {p.index}: {'verified' if ok else 'INVALID'} (worker {p.worker}, {fp.get('backend')} "
              f"on {fp.get('device_name')}, prove {p.timings_s.get('prove_s', 0):.3f} s, "
              f"{len(p.public_signals)} public signals)")
        if not ok:
            bad.append(p.index)
    if bad:
        raise DemoError(f"partition(s) {bad} did not verify against {DATA / 'verification_key.json'}")
    t = result.timings_s
    print(f"demo: OK: job {job.id}: all {len(result.partitions)} proofs verified independently against "
          f"verification_key.json (total {t.get('total_s', 0):.2f} s)")
    return 0

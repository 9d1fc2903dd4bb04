"""`docker compose up` for real: the images built from the Dockerfile, the whole stack run with
the compose CLI, a worker container killed and another crashed mid-job, Redis restarted mid-job,
and `down -v` leaving nothing behind.

What it needs, and makes when absent: a Docker daemon (scripts/docker.sh starts a private one,
as root, with its data root and socket under $ZKQUEUE_CI_WORK, default /tmp/zkqueue-ci, and
stops it by its PID at the end) and a local Debian base image standing in for
python:3.11-slim-bookworm and redis:7-bookworm, which no registry serves here
(scripts/base_images.sh, cached by day). Missing tools are a failure, not a skip: set
ZKQUEUE_SKIP_COMPOSE=1 to skip these tests on purpose.

The timings (build, `up` to the first verified proof, each phase) are printed and written to
$ZKQUEUE_CI_WORK/compose-times.json.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from base64 import b64encode
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from queue_support import wait_until
from test_metrics import free_ports

ROOT = Path(__file__).resolve().parent.parent
SKIP = os.environ.get("ZKQUEUE_SKIP_COMPOSE") == "1"
WORK = Path(os.environ.get("ZKQUEUE_CI_WORK") or "/tmp/zkqueue-ci")
# The first attempt of every partition holds its lease this long before proving (test-only
# fault, workers/faults.py), so a kill or a Redis restart lands while partitions are running.
SLOW_FIRST_S = 8
DEMO_PARTITIONS = 4

pytestmark = pytest.mark.skipif(SKIP, reason="ZKQUEUE_SKIP_COMPOSE=1: compose tests skipped on purpose")


def poll(predicate, timeout_s: float, what: str):
    """wait_until at a pace that suits docker commands (each poll may run one)."""
    return wait_until(predicate, timeout_s, what, interval_s=0.5)


def run(cmd: list[str], *, env: dict, timeout_s: float, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


class Demo:
    """`compose run --rm demo` in the background, its output lines stamped as they arrive."""

    def __init__(self, stack: "Stack"):
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(stack.compose("run", "--rm", "-T", "demo"), cwd=ROOT, env=stack.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def job_id(self) -> str | None:
        for _, line in self.lines:
            if line.startswith("demo: submitted job "):
                return line.split()[3].rstrip(":")
        return None

    def wait(self, timeout_s: float) -> int:
        """Waits for the demo to exit and returns its status; fails the test after `timeout_s`."""
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the demo did not finish within {timeout_s:g} s:\n{self.output[-4000:]}")
        self._reader.join(10)
        return rc

    def finish(self, timeout_s: float) -> str:
        """Waits for the demo to exit; fails the test unless every proof verified."""
        rc = self.wait(timeout_s)
        out = self.output
        assert rc == 0, f"demo exited with {rc}:\n{out[-4000:]}"
        verified = [line for line in out.splitlines() if line.startswith("partition ") and ": verified (" in line]
        assert len(verified) == DEMO_PARTITIONS and "INVALID" not in out, out[-4000:]
        assert "demo: OK: " in out and f"all {DEMO_PARTITIONS} proofs verified independently" in out, out[-4000:]
        return out

    def first_verified_at(self) -> float:
        return next(t for t, line in self.lines if line.startswith("partition ") and ": verified (" in line)


@dataclass
class Stack:
    env: dict
    project: str
    base_image: str
    compose_cmd: list[str]
    flower_port: int
    metrics_port: int
    files: list[str] = field(default_factory=lambda: ["compose.yaml"])
    times: dict = field(default_factory=dict)

    def compose(self, *args: str) -> list[str]:
        files = [a for f in self.files for a in ("-f", f)]
        return [*self.compose_cmd, *files, "-p", self.project, "--profile", "cpu", *args]

    def run(self, *args: str, timeout_s: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        return run(self.compose(*args), env=self.env, timeout_s=timeout_s, check=check)

    def docker(self, *args: str, timeout_s: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        return run(["docker", *args], env=self.env, timeout_s=timeout_s, check=check)

    def containers(self, service: str) -> list[str]:
        """Full ids of the service's containers, running or not."""
        out = self.docker("ps", "-a", "-q", "--no-trunc",
                          "--filter", f"label=com.docker.compose.project={self.project}",
                          "--filter", f"label=com.docker.compose.service={service}").stdout
        return out.split()

    def inspect(self, container: str) -> dict:
        return json.loads(self.docker("inspect", container).stdout)[0]

    def status(self, job: str | None = None) -> dict:
        """`zkqueue status --json` run inside the metrics container (Redis is not published)."""
        proc = self.run("exec", "-T", "metrics", "zkqueue", "status", *([job] if job else []), "--json",
                        timeout_s=60, check=False)
        if proc.returncode != 0:
            return {}
        return json.loads(proc.stdout)

    def live_workers(self, containers: list[str]) -> set[str]:
        """Ids of live workers whose host is one of `containers` (hostname = the id's first 12)."""
        hosts = {c[:12] for c in containers}
        return {w["worker"] for w in self.status().get("workers", []) if w["worker"].split("-")[0] in hosts}

    def flower(self, path: str, auth: str | None) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.flower_port}{path}")
        if auth:
            req.add_header("Authorization", "Basic " + b64encode(auth.encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except OSError:
            return 0, b""


def docker_answers(env: dict) -> bool:
    try:
        return subprocess.run(["docker", "info"], env=env, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compose_cli(env: dict) -> list[str]:
    """`docker compose` (v2) where the plugin is installed, else `docker-compose` (1.29+)."""
    if subprocess.run(["docker", "compose", "version"], env=env, capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("no compose CLI: install docker-compose (apt-get) or the compose plugin, "
                "or set ZKQUEUE_SKIP_COMPOSE=1 to skip the compose tests on purpose")


@pytest.fixture(scope="module")
def stack():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZKQUEUE_", "COMPOSE_"))}
    WORK.mkdir(parents=True, exist_ok=True)
    started_daemon = False
    t0 = time.monotonic()
    private = f"unix://{WORK / 'docker' / 'docker.sock'}"
    if shutil.which("docker") and docker_answers(env):
        pass                                    # the machine's Docker (or $DOCKER_HOST) answers
    elif shutil.which("docker") and docker_answers({**env, "DOCKER_HOST": private}):
        env["DOCKER_HOST"] = private            # another run's private daemon: used, not stopped
    else:
        if os.geteuid() != 0:
            pytest.fail("Docker does not answer and dockerd cannot be started without root; "
                        "set ZKQUEUE_SKIP_COMPOSE=1 to skip the compose tests on purpose")
        proc = run([str(ROOT / "scripts/docker.sh"), "start", str(WORK)], env=env, timeout_s=600)
        env["DOCKER_HOST"] = proc.stdout.strip().splitlines()[-1]
        started_daemon = True
    times = {"daemon_s": round(time.monotonic() - t0, 1)}
    try:
        t = time.monotonic()
        base = run([str(ROOT / "scripts/base_images.sh")], env=env, timeout_s=900).stdout.strip().splitlines()[-1]
        times["base_image_s"] = round(time.monotonic() - t, 1)
        s = Stack(env=env, project=f"zkqci{os.getpid()}{secrets.token_hex(3)}", base_image=base,
                  compose_cmd=compose_cli(env), flower_port=free_ports(1), metrics_port=free_ports(1), times=times)
        # docs/operations.md's steps: certificates for Redis's TLS, one password per Redis role.
        tls_dir = WORK / f"{s.project}.tls"
        run(["bash", str(ROOT / "scripts/tls-certs.sh"), str(tls_dir), "redis"], env=env, timeout_s=60)
        env.update(BASE_IMAGE=base, REDIS_IMAGE=base, TLS_DIR=str(tls_dir),
                   REDIS_ADMIN_PASSWORD=secrets.token_hex(16), REDIS_WORKER_PASSWORD=secrets.token_hex(16),
                   REDIS_CLIENT_PASSWORD=secrets.token_hex(16),
                   ZKQUEUE_FLOWER_AUTH=f"ci:{secrets.token_hex(12)}",
                   FLOWER_HOST_PORT=str(s.flower_port), METRICS_HOST_PORT=str(s.metrics_port))
        try:
            yield s
        finally:
            s.run("--profile", "demo", "--profile", "gpu", "down", "-v", "--remove-orphans", "-t", "5",
                  timeout_s=300, check=False)
            (WORK / f"{s.project}.fault.yaml").unlink(missing_ok=True)
            shutil.rmtree(WORK / f"{s.project}.tls", ignore_errors=True)
            times["total_s"] = round(time.monotonic() - t0, 1)
            print(f"\ncompose timings: {json.dumps(times)}")
            (WORK / "compose-times.json").write_text(json.dumps(times, indent=1) + "\n")
    finally:
        if started_daemon:
            subprocess.run([str(ROOT / "scripts/docker.sh"), "stop", str(WORK)], env=env, timeout=120)


def test_the_images_build(stack):
    t = time.monotonic()
    # worker-cpu, flower, metrics and demo share one image, zkqueue:latest: built once, as
    # docs/operations.md says (`build` of every service would send and build the context 3 times).
    stack.run("build", "flower", timeout_s=900)
    stack.times["build_s"] = round(time.monotonic() - t, 1)
    # The image runs its own CLI, from the venv, with the native kernels compiled at build time.
    out = stack.docker("run", "--rm", "--entrypoint", "sh", "zkqueue:latest", "-c",
                       "command -v zkqueue && ls /opt/zkqueue/cache/native/*/").stdout
    assert out.splitlines()[0] == "/opt/zkqueue/venv/bin/zkqueue", out
    assert ".so" in out, out


def test_up_serves_the_stack_and_the_demo_proves(stack):
    t_up = time.monotonic()
    stack.run("up", "-d", timeout_s=300)
    demo = Demo(stack)             # what a user runs next; it waits for a worker itself
    redis = stack.containers("redis")[0]
    poll(lambda: stack.inspect(redis)["State"].get("Health", {}).get("Status") == "healthy", 60,
         "redis to be healthy")
    workers = stack.containers("worker-cpu")
    assert len(workers) == 1
    poll(lambda: len(stack.live_workers(workers)) >= 2, 120, "the worker-cpu container's 2 workers to register")

    auth = stack.env["ZKQUEUE_FLOWER_AUTH"]
    poll(lambda: stack.flower("/", auth)[0] == 200, 60, "Flower to answer")
    assert stack.flower("/", None)[0] == 401, "Flower answered without auth"
    assert stack.flower("/", "ci:wrong-password")[0] == 401, "Flower accepted a wrong password"

    def flower_sees_workers():
        code, body = stack.flower("/api/workers?refresh=1", auth)
        return code == 200 and len(json.loads(body or b"{}")) >= 2
    poll(flower_sees_workers, 60, "Flower to list the 2 workers")
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.metrics_port}/metrics", timeout=10) as r:
        assert b"zkqueue_" in r.read()

    # Every published port of every container listens on 127.0.0.1 only.
    published = []
    for service in ("redis", "worker-cpu", "flower", "metrics"):
        for c in stack.containers(service):
            for port, bindings in (stack.inspect(c)["NetworkSettings"]["Ports"] or {}).items():
                for b in bindings or []:
                    published.append((service, port, b["HostIp"]))
    assert {(s, p) for s, p, _ in published} == {("flower", "5555/tcp"), ("metrics", "9100/tcp")}, published
    assert all(ip == "127.0.0.1" for _, _, ip in published), published

    demo.finish(300)
    stack.times["up_to_first_verified_proof_s"] = round(demo.first_verified_at() - t_up, 1)


def _running_partitions(stack, job: str) -> dict[int, str]:
    st = stack.status(job)
    return {p["index"]: p["worker"] for p in st.get("partitions", []) if p["state"] == "running" and p["worker"]}


def test_killed_and_crashed_worker_containers_mid_job(stack):
    """`docker kill` of one worker container and SIGKILL of another's init (a crash, as the OOM
    killer does) while their partitions run: the job completes with every proof verified, the
    crashed container is restarted by `restart: unless-stopped`, and `up -d` brings back the one
    killed by `docker kill` (which Docker counts as a manual stop, exempt from the policy)."""
    override = WORK / f"{stack.project}.fault.yaml"
    override.write_text(f'services:\n  worker-cpu:\n    environment:\n      ZKQUEUE_FAULT: "slow-first:{SLOW_FIRST_S}"\n')
    stack.files = ["compose.yaml", str(override)]
    stack.run("up", "-d", "--scale", "worker-cpu=2", timeout_s=300)
    workers = stack.containers("worker-cpu")
    assert len(workers) == 2, workers
    poll(lambda: len(stack.live_workers(workers)) >= 4, 120, "4 workers in 2 containers to register")

    t = time.monotonic()
    demo = Demo(stack)
    job = poll(demo.job_id, 120, "the demo to submit its job")
    running = poll(lambda: _running_partitions(stack, job) or None, 60, "a partition to start")
    by_host = {c[:12]: c for c in workers}
    killed = by_host[next(iter(running.values())).split("-")[0]]
    crashed = next(c for c in workers if c != killed)
    crashed_before = stack.inspect(crashed)
    stack.docker("kill", killed)
    os.kill(crashed_before["State"]["Pid"], signal.SIGKILL)

    demo.finish(240)
    stack.times["kill_job_s"] = round(time.monotonic() - t, 1)
    st = stack.status(job)
    assert st["state"] == "done", st
    assert [p["state"] for p in st["partitions"]] == ["verified"] * DEMO_PARTITIONS, st
    assert any(p["attempts"] >= 2 for p in st["partitions"]), f"no partition was interrupted: {st}"

    after = stack.inspect(crashed)
    assert after["State"]["Running"] and after["RestartCount"] > crashed_before["RestartCount"], after["State"]
    poll(lambda: len(stack.live_workers([crashed])) >= 2, 120, "the restarted container's workers to register")
    assert not stack.inspect(killed)["State"]["Running"]
    stack.run("up", "-d", "--scale", "worker-cpu=2", timeout_s=300)
    assert stack.inspect(killed)["State"]["Running"]
    poll(lambda: len(stack.live_workers(workers)) >= 4, 120, "all 4 workers to be back")


def verify_on_the_host(proofs: Path) -> None:
    """Verifies every proof_<i>.json / public_<i>.json in `proofs` against the bundled
    verification key with snarkjs (the independent verifier) where ./run-tests installed it,
    else with this checkout's `zkqueue verify`."""
    vk = ROOT / "zkqueue" / "demo_data" / "verification_key.json"
    snarkjs = ROOT / ".interop" / "node_modules" / ".bin" / "snarkjs"
    for i in range(DEMO_PARTITIONS):
        public, proof = proofs / f"public_{i}.json", proofs / f"proof_{i}.json"
        if snarkjs.exists():
            cmd = [str(snarkjs), "groth16", "verify", str(vk), str(public), str(proof)]
        else:
            cmd = [sys.executable, "-m", "zkqueue.cli", "verify", str(vk), str(public), str(proof)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"partition {i} did not verify: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"


def test_redis_restart_mid_job_keeps_the_append_only_file(stack, tmp_path):
    before = {j["job"]: j["state"] for j in stack.status()["jobs"]}
    assert list(before.values()).count("done") >= 2, before

    t = time.monotonic()
    demo = Demo(stack)
    job = poll(demo.job_id, 120, "the demo to submit its job")
    poll(lambda: _running_partitions(stack, job) or None, 60, "a partition to start")
    redis = stack.containers("redis")[0]
    started = stack.inspect(redis)["State"]["StartedAt"]
    stack.run("restart", "redis", timeout_s=120)
    assert stack.inspect(redis)["State"]["StartedAt"] != started
    demo_rc = demo.wait(240)

    # The job completes: a client started after the restart collects its proofs, and each
    # one verifies on the host.
    out_dir = f"/tmp/zkq-{job}"
    proc = stack.run("exec", "-T", "metrics", "zkqueue", "wait", job, "--timeout", "180", "-q", "--out", out_dir,
                     timeout_s=240, check=False)
    assert proc.returncode == 0, (f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}\ndemo ({demo_rc}):\n{demo.output[-3000:]}"
                                  f"\nredis:\n{stack.docker('logs', redis, check=False).stdout[-4000:]}"
                                  f"{stack.docker('logs', redis, check=False).stderr[-4000:]}")
    assert f"{DEMO_PARTITIONS} verified proofs" in proc.stdout, proc.stdout
    stack.times["redis_restart_job_s"] = round(time.monotonic() - t, 1)
    stack.docker("cp", f"{stack.containers('metrics')[0]}:{out_dir}", str(tmp_path / "proofs"))
    verify_on_the_host(tmp_path / "proofs")

    # Redis came back from its append-only file, with every earlier job.
    logs = stack.docker("logs", redis).stdout
    assert "DB loaded from append only file" in logs, logs[-2000:]
    after = {j["job"]: j["state"] for j in stack.status()["jobs"]}
    assert {j: after.get(j) for j in before} == before, (before, after)
    assert after[job] == "done", after
    # The rest of the stack is serving again (restarted by its policy where it had to be).
    for service in ("redis", "worker-cpu", "flower", "metrics"):
        for c in stack.containers(service):
            poll(lambda: stack.inspect(c)["State"]["Running"], 60, f"{service} container {c[:12]} to run")
    poll(lambda: stack.flower("/api/workers?refresh=1", stack.env["ZKQUEUE_FLOWER_AUTH"])[0] == 200, 60,
         "Flower to answer again after the Redis restart")
    stack.times["flower_restarts_after_redis_restart"] = stack.inspect(stack.containers("flower")[0])["RestartCount"]

    # The client that was waiting through the restart (`compose run demo`) must ride it out too.
    assert demo_rc == 0, ("the demo, waiting on the job while Redis restarted, exited with "
                          f"{demo_rc} although the job completed:\n{demo.output[-3000:]}")
    demo.finish(10)


def test_down_removes_every_container_network_and_volume(stack):
    stack.run("down", "-v", timeout_s=300)          # as docs/operations.md says: --profile cpu down -v
    label = f"label=com.docker.compose.project={stack.project}"
    assert stack.docker("ps", "-a", "-q", "--filter", label).stdout.split() == []
    assert stack.docker("network", "ls", "-q", "--filter", label).stdout.split() == []
    assert stack.docker("volume", "ls", "-q", "--filter", label).stdout.split() == []
    names = stack.docker("volume", "ls", "--format", "{{.Name}}").stdout.split()
    assert not [n for n in names if n.startswith(stack.project)], names


def test_the_gpu_image_builds_and_its_nvrtc_compiles_the_kernels(stack):
    """The worker-gpu image (GPU=1) builds here, with no GPU: its build-time check imports
    CuPy, loads NVRTC and the CUDA runtime from the wheels and compiles zkqueue's kernels."""
    t = time.monotonic()
    # Without the cubin prebuild for named architectures (CUDA_ARCHS empty): the build's
    # check already has NVRTC compile every unit of both curves, and the prebuild runs the same
    # compiler again for A100/H100 at several minutes of ptxas on two cores.
    proc = run([*stack.compose_cmd, "-p", stack.project, "--profile", "gpu", "build", "--build-arg", "CUDA_ARCHS=",
                "worker-gpu"],
               env=stack.env, timeout_s=1200)
    stack.times["gpu_build_s"] = round(time.monotonic() - t, 1)
    out = proc.stdout + proc.stderr
    assert "gpu image check: CuPy " in out and "NVRTC 12." in out, out[-3000:]
    assert "bn128 kernels -> compute_70 PTX" in out and "bls12381 kernels -> compute_70 PTX" in out, out[-3000:]
    stack.times["gpu_image_check"] = next(line for line in out.splitlines() if "gpu image check: " in line)

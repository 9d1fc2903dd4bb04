"""Flower on the zkqueue broker: Redis, two real workers and `zkqueue flower`, a real job, and the
dashboard opened in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core from
.interop/, both installed by scripts/setup.sh). Screenshots go to test-artifacts/."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from queue_support import CHAIN, PARTITIONS, ROOT, queue, wait_until  # noqa: F401  (fixtures)
from test_metrics import free_ports

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PLAYWRIGHT = Path(os.environ.get("ZKQUEUE_INTEROP_DIR", ROOT / ".interop")) / "node_modules" / "playwright-core"
ARTIFACTS = ROOT / "test-artifacts"


def _require_browser() -> None:
    missing = [str(p) for p in (Path(CHROMIUM), PLAYWRIGHT) if not p.exists()]
    if not shutil.which("node"):
        missing.append("node")
    if missing:
        msg = f"not installed: {', '.join(missing)} (run scripts/setup.sh)"
        if os.environ.get("ZKQUEUE_REQUIRE_INTEROP") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def http_status(url: str, auth: str | None = None) -> int:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_flower_lists_workers_and_job_tasks_behind_basic_auth(queue):
    _require_browser()
    user, password = "zkq", secrets.token_hex(8)
    port = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    log_path = queue.tmp / "flower.log"
    with open(log_path, "wb") as log:
        flower = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "flower", "--port", str(port),
                                   "--addr", "127.0.0.1"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  env=queue.env(ZKQUEUE_FLOWER_AUTH=f"{user}:{password}"), start_new_session=True)
    try:
        wait_until(lambda: flower.poll() is not None or http_status(url + "/") == 401, 30, "Flower to answer")
        assert flower.poll() is None, log_path.read_text()
        group = queue.start_workers(2)
        beats = queue.ready(group)
        job = queue.client().submit(CHAIN / "circuit_final.zkey", PARTITIONS, priority="normal")
        job.wait(120)

        # Without credentials, or with wrong ones, nothing is served.
        for path in ("/", "/tasks", "/api/workers", "/api/tasks"):
            assert http_status(url + path) == 401, path
            assert http_status(url + path, f"{user}:wrong") == 401, path
        wait_until(lambda: len(json.loads(urllib.request.urlopen(urllib.request.Request(
            url + "/api/tasks", headers={"Authorization": "Basic " + base64.b64encode(
                f"{user}:{password}".encode()).decode()}), timeout=5).read())) >= 5, 30,
            "Flower to have seen the job's 5 tasks")

        ARTIFACTS.mkdir(exist_ok=True)
        proc = subprocess.run(["node", ROOT / "tests" / "browser" / "flower_check.cjs", url, user, password,
                               ARTIFACTS, f"job={job.id} partition=3"], capture_output=True, text=True,
                              timeout=90, env=dict(os.environ, PLAYWRIGHT_CORE=str(PLAYWRIGHT), CHROMIUM=CHROMIUM))
        assert proc.returncode == 0, proc.stderr[-3000:]
        page = json.loads(proc.stdout.strip().splitlines()[-1])
        assert page["status"] == 200
        for b in beats:                      # both workers on the dashboard
            assert b["worker"] in page["workers"].replace("\n", ""), (b["worker"], page["workers"])
        tasks = page["tasks"]
        assert tasks.count("zkqueue.prove_partition") >= 4 and "zkqueue.finalize" in tasks
        for i in range(4):                   # readable arguments: the job id and partition index
            assert f"job={job.id} partition={i}" in tasks, i
        assert (ARTIFACTS / "flower-workers.png").stat().st_size > 0
        assert (ARTIFACTS / "flower-tasks.png").stat().st_size > 0
    finally:
        try:
            os.killpg(flower.pid, 9)
        except ProcessLookupError:
            pass
        flower.wait(timeout=10)
        print(f"----- flower log -----\n{log_path.read_text(errors='replace')[-4000:]}")


def test_flower_refuses_to_start_without_credentials(queue):
    env = queue.env()
    env.pop("ZKQUEUE_FLOWER_AUTH", None)
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "flower", "--port", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "ZKQUEUE_FLOWER_AUTH" in proc.stderr, proc.stderr

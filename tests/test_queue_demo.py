"""`zkqueue demo`, the README's first command, run as a user would."""

from __future__ import annotations

import subprocess
import sys

from queue_support import ROOT, queue, wait_until  # noqa: F401  (fixtures)


def test_demo_proves_and_verifies_the_bundled_job(queue):
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "demo", "--timeout", "120"],
                          env=queue.env(), cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": verified (") == 4
    assert "demo: OK" in proc.stdout
    # It stopped the workers it started (they deregister on shutdown).
    wait_until(lambda: not queue.heartbeats(), 15, "the demo's workers to be gone")


def test_demo_fails_clearly_when_redis_is_remote_and_down(queue):
    env = queue.env(ZKQUEUE_REDIS_URL="redis://192.0.2.1:6379/0")
    proc = subprocess.run([sys.executable, "-m", "zkqueue.cli", "demo"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "not local" in proc.stderr

"""docs/http-api.md's "From TypeScript" example, exactly as the page shows it, run with Node
against a real server and real workers; snarkjs checks the proofs it writes."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest

from api_support import CHAIN, api  # noqa: F401  (fixture)
from conftest import snarkjs_verifies
from queue_support import ROOT, queue  # noqa: F401  (fixture)

HEADING = "## From TypeScript"


def typescript_example() -> str:
    section = (ROOT / "docs" / "http-api.md").read_text().split(HEADING, 1)[1]
    return section.split("```js\n", 1)[1].split("```", 1)[0]


def test_the_typescript_example_proves_and_snarkjs_accepts(api, queue, tmp_path):  # noqa: F811
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    (tmp_path / "prove.mjs").write_text(typescript_example())
    group = queue.start_workers(2)
    queue.ready(group)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "API_URL": api.url, "API_TOKEN": api.key("node")}

    def run():
        proc = subprocess.run(["node", "prove.mjs", str(CHAIN)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=240)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    first = run()
    assert "circuit " in first and "4 proofs in proofs/" in first and "partition 3: verified" in first, first
    for i in range(4):
        assert snarkjs_verifies(tmp_path / "proofs" / "verification_key.json", tmp_path / "proofs" / f"public_{i}.json",
                                tmp_path / "proofs" / f"proof_{i}.json"), i
    # Again: the circuit is found by its hashes, its files not sent (the server counts the body
    # bytes it receives per route); order-42 is the same job, over already.
    before = uploaded_bytes(api.metrics_url)
    second = run()
    assert 0 < uploaded_bytes(api.metrics_url) - before < 1000
    assert first.splitlines()[0] == second.splitlines()[0]
    assert first.splitlines()[-1] == second.splitlines()[-1]
    assert "partition" not in second, second     # the stream opens on a job already over: status, end


def uploaded_bytes(metrics_url: str) -> float:
    text = httpx.get(metrics_url).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('zkqueue_api_upload_bytes_total{route="/v1/circuits"}'))

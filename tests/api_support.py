"""Helpers for the HTTP API tests: a real `zkqueue serve` process (uvicorn) on a free port,
on the queue tests' Redis database and store, with API keys made through the KeyStore."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from queue_support import ROOT, QueueEnv, queue, wait_until  # noqa: F401  (fixture)

CHAIN = ROOT / "tests" / "fixtures" / "bn128_chain_10"
ZKEY = CHAIN / "circuit_final.zkey"
WASM = CHAIN / "circuit_js" / "circuit.wasm"
R1CS = CHAIN / "circuit.r1cs"
VK = CHAIN / "verification_key.json"
INPUTS = [CHAIN / "partitions" / f"input_{i}.json" for i in range(4)]
WITNESSES = [CHAIN / "partitions" / f"witness_{i}.wtns" for i in range(4)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ApiServer:
    """One `zkqueue serve` child process and what a test needs to talk to it."""

    proc: subprocess.Popen
    url: str
    queue: QueueEnv
    log_path: Path
    metrics_url: str
    clients: list = field(default_factory=list)

    def key(self, name: str = "test", **limits) -> str:
        """A new API key's token."""
        from zkqueue.api.auth import KeyStore
        return KeyStore(self.queue.r).create(name, **limits)[1]

    def http(self, token: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        c = httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 60), **kw)
        self.clients.append(c)
        return c

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(queue: QueueEnv, **env) -> ApiServer:
    """Starts `zkqueue serve` on a free port and waits until /healthz answers."""
    port, metrics_port = free_port(), free_port()
    log_path = queue.tmp / f"api-{port}.log"
    extra = {"ZKQUEUE_API_METRICS_PORT": metrics_port, "ZKQUEUE_LOGLEVEL": "WARNING", **env}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "serve", "--host", "127.0.0.1",
                                 "--port", str(port)], cwd=ROOT, env=queue.env(**extra), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    server = ApiServer(proc, f"http://127.0.0.1:{port}", queue, log_path, f"http://127.0.0.1:{metrics_port}/metrics")

    def up():
        if proc.poll() is not None:
            pytest.fail(f"zkqueue serve exited with {proc.returncode}:\n{server.log()[-4000:]}")
        try:
            return httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_until(up, 60, "zkqueue serve to answer /healthz", interval_s=0.1)
    return server


@pytest.fixture
def api(queue):  # noqa: F811
    """A `zkqueue serve` on the queue fixture's Redis and store; its log is printed on failure."""
    server = start_server(queue)
    yield server
    server.stop()
    print(f"----- zkqueue serve log -----\n{server.log()[-6000:]}")


def upload_circuit(http: httpx.Client, *, wasm: bool = True, r1cs: bool = False) -> httpx.Response:
    files = [("zkey", ("circuit_final.zkey", ZKEY.open("rb")))]
    if wasm:
        files.append(("wasm", ("circuit.wasm", WASM.open("rb"))))
    if r1cs:
        files.append(("r1cs", ("circuit.r1cs", R1CS.open("rb"))))
    try:
        return http.post("/v1/circuits", files=files)
    finally:
        for _, (_, f) in files:
            f.close()


def sse_events(response: httpx.Response):
    """(event, data) of a text/event-stream response, parsed as a browser would."""
    import json
    event, data = "message", []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


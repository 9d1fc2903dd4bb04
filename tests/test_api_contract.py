"""The API's contract and plumbing: the OpenAPI document against the routes and error codes,
`zkqueue api-keys`, request metrics, and files a Python client stored
being registered by hash."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import httpx

from api_support import INPUTS, ZKEY, api, upload_circuit  # noqa: F401  (fixture)
from queue_support import ROOT, queue  # noqa: F401  (fixture)

from zkqueue.api import errors, openapi, routes


def test_the_openapi_document_has_exactly_the_routes_and_the_error_codes():
    doc = openapi.document()
    documented = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    served = {(r.path, m) for r in routes.ROUTES for m in r.methods if m != "HEAD"}
    assert documented == served
    assert doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"] == sorted(
        errors.CODES)
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            keyless = path in ("/healthz", "/openapi.json")
            assert (op.get("security") == []) == keyless, (path, method)
            assert keyless or "401" in op["responses"], (path, method)


def test_every_error_code_raised_is_declared():
    used = set()
    for py in (ROOT / "api").glob("*.py"):
        text = py.read_text()
        used |= set(re.findall(r'ApiError\(\s*"([a-z_]+)"', text))
        used |= set(re.findall(r'from_groth16\(\s*"([a-z_]+)"', text))
        if 'f"invalid_{role}"' in text:
            used |= {"invalid_zkey", "invalid_wasm", "invalid_r1cs"}
    assert used and used <= set(errors.CODES), used - set(errors.CODES)


def test_api_keys_create_list_revoke(queue):  # noqa: F811
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "zkqueue.cli", "api-keys", *args], cwd=ROOT,
                              env=queue.env(), capture_output=True, text=True, timeout=60)
    made = cli("create", "ci backend", "--proofs-per-hour", "50", "--json")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    assert key["name"] == "ci backend" and key["proofs_per_hour"] == 50 and key["token"].startswith(f"zkq_{key['id']}_")
    from zkqueue.api.auth import KeyStore
    store = KeyStore(queue.r)
    assert store.authenticate(key["token"]).id == key["id"]
    # Only the secret's hash is in Redis.
    assert key["token"].split("_")[-1].encode() not in b"".join(
        v for v in queue.r.hgetall(f"zkq:apikey:{key['id']}").values())
    listing = cli("list")
    assert f"{key['id']}  ci backend  (50 proofs/hour)" in listing.stdout, listing.stdout
    assert cli("revoke", key["id"]).stdout.strip() == f"API key {key['id']} revoked"
    assert store.authenticate(key["token"]) is None
    assert "REVOKED" in cli("list").stdout
    again = cli("revoke", key["id"])
    assert again.returncode == 2 and "no live API key" in again.stderr


def test_requests_are_counted_by_route_and_status_and_served_on_the_metrics_port(api):  # noqa: F811
    http = api.http(api.key("m"))
    assert http.get("/v1/jobs/" + "0" * 32).status_code == 404
    assert httpx.get(f"{api.url}/v1/jobs/abc").status_code == 401
    assert http.get("/v1/nowhere").status_code == 404
    text = httpx.get(api.metrics_url).text
    assert 'zkqueue_api_requests_total{method="GET",route="/v1/jobs/{job_id}",status="404"} 1.0' in text
    assert 'zkqueue_api_requests_total{method="GET",route="/v1/jobs/{job_id}",status="401"} 1.0' in text
    assert 'zkqueue_api_requests_total{method="GET",route="unmatched",status="404"} 1.0' in text
    assert 'zkqueue_api_request_seconds_count{method="GET",route="/v1/jobs/{job_id}"} 2.0' in text
    assert httpx.get(f"{api.url}/openapi.json").json() == json.loads(json.dumps(openapi.document()))


def test_a_key_stored_by_the_python_client_is_registered_by_its_hash(api, queue):  # noqa: F811
    from zkqueue.coordinator.store import ArtifactStore
    sha = ArtifactStore(queue.store_url).put_file(ZKEY)
    assert sha == hashlib.sha256(ZKEY.read_bytes()).hexdigest()
    res = api.http(api.key("py")).post("/v1/circuits", json={"zkey_sha256": sha})
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["uploaded"] == {"zkey": "named"} and body["n_public"] == 6 and body["accepts"] == ["witnesses"]
    assert body["zkey_bytes"] == ZKEY.stat().st_size


def test_a_slow_request_gets_504_and_a_server_without_redis_503(queue):  # noqa: F811
    from api_support import free_port, start_server
    slow = start_server(queue, ZKQUEUE_API_REQUEST_TIMEOUT_S="0.000001")
    try:
        res = slow.http(slow.key("t")).get("/v1/jobs/" + "0" * 32)
        assert res.status_code == 504 and res.json()["error"]["code"] == "timeout", res.text
    finally:
        slow.stop()
    port, dead = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "zkqueue.cli", "serve", "--port", str(port)], cwd=ROOT,
                            env=queue.env(ZKQUEUE_REDIS_URL=f"redis://127.0.0.1:{dead}/0"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from queue_support import wait_until

        def answers():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=15)
            except httpx.TransportError:
                return None
        res = wait_until(answers, 60, "the server to answer")
        assert res.status_code == 503 and res.json()["error"]["code"] == "unavailable", res.text
        res = httpx.get(f"http://127.0.0.1:{port}/v1/jobs/{'0' * 32}", headers={"Authorization": "Bearer zkq_x"},
                        timeout=15)
        assert res.status_code == 401      # a malformed token needs no Redis to be refused
        res = httpx.get(f"http://127.0.0.1:{port}/v1/jobs/{'0' * 32}", timeout=15,
                        headers={"Authorization": "Bearer zkq_000000000000_" + "A" * 43})
        assert res.status_code == 503 and res.json()["error"]["code"] == "unavailable", res.text
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _declared_model(method: str, path: str, status: int):
    """The model routes.ENDPOINTS declares for a response (the one declaration the document
    is generated from)."""
    endpoint = next(e for e in routes.ENDPOINTS if (e.method, e.path) == (method, path))
    return next(o.schema for o in endpoint.responses if o.status == status)


def _conforms(model, body: dict) -> None:
    """`body` is what `model` declares: it validates, and has no field the model lacks."""
    from pydantic import BaseModel
    assert isinstance(model, type) and issubclass(model, BaseModel), model
    model.model_validate(body)
    assert set(body) <= set(model.model_fields), set(body) - set(model.model_fields)


def test_the_served_document_is_the_mounted_routes_and_the_docs_page_names_every_path(api):  # noqa: F811
    from zkqueue.api import models
    from zkqueue.api.app import create_app
    from zkqueue.config import ProcessSettings, Settings

    doc = httpx.get(f"{api.url}/openapi.json").json()
    declared = {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}
    assert len(declared) == len(routes.ENDPOINTS) >= 12
    # What the app `zkqueue serve` runs mounts: every declared route, and nothing undeclared
    # but the page that shows the document.
    app = create_app(Settings(), ProcessSettings())
    mounted = {(r.path, m) for r in app.app.routes for m in r.methods if m != "HEAD"}
    assert declared <= mounted and mounted - declared == {("/docs", "GET")}
    # ... and the running server answers each declared route (a key-less request: 401, or 200
    # for the public ones), never "no such route"; an undeclared path is one.
    anonymous = httpx.Client(base_url=api.url, timeout=30)
    samples = {"circuit_id": "0" * 32, "job_id": "0" * 32, "index": "0"}
    for path, method in sorted(declared):
        op = doc["paths"][path][method.lower()]
        res = anonymous.request(method, path.format(**samples))
        assert res.status_code == (200 if op.get("security") == [] else 401), (method, path, res.text)
    assert anonymous.get("/v1/undeclared").json()["error"]["code"] == "not_found"

    # The docs page: one self-contained HTML page naming every path, method and schema.
    page = anonymous.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for path, method in declared:
        assert f'id="{method.lower()}-{path}"' in html, (method, path)
    for name in doc["components"]["schemas"]:
        assert f'id="schema-{name}"' in html, name
    assert "<script" not in html and not re.search(r'(src|href)="(https?:)?//', html), "fetches nothing"

    # Responses are what the declaration says they are (no field it does not name).
    http = api.http(api.key("contract"))
    circuit = upload_circuit(http)
    assert circuit.status_code == 201, circuit.text
    _conforms(_declared_model("POST", "/v1/circuits", 201), circuit.json())
    cid = circuit.json()["circuit_id"]
    _conforms(_declared_model("GET", "/v1/circuits/{circuit_id}", 200), http.get(f"/v1/circuits/{cid}").json())
    job = http.post(f"/v1/circuits/{cid}/proofs", json={"inputs": [json.loads(INPUTS[0].read_text())]})
    assert job.status_code == 201, job.text
    _conforms(_declared_model("POST", "/v1/circuits/{circuit_id}/proofs", 201), job.json())
    for p in job.json()["partitions"]:
        _conforms(models.Partition, p)         # what the Job model's partitions are
    jid = job.json()["job_id"]
    _conforms(_declared_model("GET", "/v1/jobs/{job_id}", 200), http.get(f"/v1/jobs/{jid}").json())
    _conforms(_declared_model("DELETE", "/v1/jobs/{job_id}", 200), http.delete(f"/v1/jobs/{jid}").json())
    _conforms(_declared_model("GET", "/healthz", 200), anonymous.get("/healthz").json())
    _conforms(models.Error, http.get(f"/v1/jobs/{'0' * 32}").json())
    anonymous.close()


def test_requests_are_checked_by_the_models_the_document_declares(api):  # noqa: F811
    http = api.http(api.key("checks"))
    cid = upload_circuit(http).json()["circuit_id"]
    schemas = openapi.document()["components"]["schemas"]
    proofs = f"/v1/circuits/{cid}/proofs"
    one = [json.loads(INPUTS[0].read_text())]

    def refused(res, field):
        assert res.status_code == 422, res.text
        err = res.json()["error"]
        assert err["code"] == "invalid_request" and err["detail"]["errors"][0]["field"] == field, err
        return err["message"]
    declared = list(schemas["ProofsFromInputs"]["properties"])
    assert refused(http.post(proofs, json={"inputs": one, "colour": "red"}), "colour") == \
        f"colour: unknown field (expected {', '.join(declared)})"
    message = refused(http.post(proofs, json={"inputs": one, "priority": "urgent"}), "priority")
    assert all(f"'{p}'" in message for p in schemas["Priority"]["enum"]), message
    refused(http.post(proofs, json={"inputs": one, "all_or_nothing": "maybe"}), "all_or_nothing")
    witness = ("witness", ("w0.wtns", (ROOT / "tests/fixtures/bn128_chain_10/partitions/witness_0.wtns").read_bytes()))
    assert schemas["ProofsFromWitnesses"]["properties"]["all_or_nothing"]["enum"] == ["true", "false"]
    refused(http.post(proofs, files=[witness], data={"all_or_nothing": "maybe"}), "all_or_nothing")
    assert schemas["CircuitByHash"]["properties"]["zkey_sha256"]["pattern"] == "^[0-9a-f]{64}$"
    assert "pattern" in refused(http.post("/v1/circuits", json={"zkey_sha256": "ab"}), "zkey_sha256")
    assert refused(http.post("/v1/circuits", json={}), "zkey_sha256") == "zkey_sha256: required"

"""Every bad request to the HTTP API gets its status and error code, in the one error shape;
keys see only their own circuits and jobs; cancel works. No workers: jobs stay queued."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import httpx
import pytest

from api_support import (INPUTS, WASM, WITNESSES, ZKEY, start_server, sse_events,  # noqa: F401
                         upload_circuit)
from queue_support import ROOT, queue  # noqa: F401  (fixture)

BLS_WITNESS = ROOT / "tests" / "fixtures" / "bls12381_chain_10" / "partitions" / "witness_0.wtns"


@pytest.fixture
def server(queue):  # noqa: F811
    s = start_server(queue, ZKQUEUE_API_MAX_JSON_BYTES=65536, ZKQUEUE_API_UPLOAD_IDLE_TIMEOUT_S=1)
    yield s
    s.stop()
    print(f"----- zkqueue serve log -----\n{s.log()[-6000:]}")


def error_of(res: httpx.Response, status: int, code: str) -> dict:
    assert res.status_code == status, (res.status_code, res.text)
    body = res.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "detail"}, body
    assert body["error"]["code"] == code, body
    return body["error"]


def inputs(n: int = 1) -> list[dict]:
    return [json.loads(p.read_text()) for p in INPUTS[:n]]


def test_every_bad_request_gets_its_status_and_code(server):
    token = server.key("alice")
    http = server.http(token)
    cid = upload_circuit(http).json()["circuit_id"]
    no_wasm = upload_circuit(http, wasm=False).json()["circuit_id"]
    proofs = f"/v1/circuits/{cid}/proofs"

    # Keys.
    anonymous = server.http()
    err = error_of(anonymous.get(f"/v1/circuits/{cid}"), 401, "unauthorized")
    assert "Bearer" in err["message"]
    assert anonymous.get(f"/v1/circuits/{cid}").headers["www-authenticate"] == "Bearer"
    error_of(server.http("zkq_000000000000_" + "A" * 43).get(f"/v1/circuits/{cid}"), 401, "unauthorized")
    error_of(server.http(token[:-1] + ("B" if token[-1] != "B" else "C")).get(f"/v1/circuits/{cid}"), 401,
             "unauthorized")
    error_of(anonymous.post("/v1/circuits", files={"zkey": ("k.zkey", b"x")}), 401, "unauthorized")
    assert anonymous.get("/healthz").status_code == 200 and anonymous.get("/openapi.json").status_code == 200

    # Unknown things.
    error_of(http.get("/v1/circuits/" + "0" * 32), 404, "circuit_not_found")
    error_of(http.post("/v1/circuits/" + "0" * 32 + "/proofs", json={"inputs": inputs()}), 404, "circuit_not_found")
    error_of(http.get("/v1/jobs/" + "0" * 32), 404, "job_not_found")
    error_of(http.get("/v1/nothing"), 404, "not_found")
    error_of(http.put(f"/v1/circuits/{cid}"), 405, "method_not_allowed")

    # Malformed bodies and requests.
    error_of(http.post(proofs, content=b"{not json", headers={"content-type": "application/json"}), 400,
             "invalid_json")
    error_of(http.post(proofs, json=[1, 2]), 422, "invalid_request")
    error_of(http.post(proofs, json={"inputs": []}), 422, "invalid_request")
    error_of(http.post(proofs, json={"inputs": inputs(), "priority": "urgent"}), 422, "invalid_request")
    error_of(http.post(proofs, json={"inputs": inputs(), "colour": "red"}), 422, "invalid_request")
    error_of(http.post(proofs, json={"inputs": inputs()}, headers={"Idempotency-Key": "has space"}), 422,
             "invalid_request")
    error_of(http.post(proofs, content=b"x", headers={"content-type": "text/plain"}), 415, "unsupported_media_type")
    error_of(http.post("/v1/circuits", content=b"--x--", headers={"content-type": "multipart/form-data; boundary=y"}),
             400, "invalid_multipart")
    error_of(http.post("/v1/circuits", files={"colour": ("c.txt", b"red")}), 400, "invalid_multipart")
    error_of(http.post("/v1/circuits", json={"wasm_sha256": "ab" * 32}), 422, "invalid_request")
    error_of(http.post("/v1/circuits", json={"zkey_sha256": "not hex"}), 422, "invalid_request")

    # Inputs the witness calculator refuses: its own message.
    err = error_of(http.post(proofs, json={"inputs": [*inputs(), {"pub": ["1", "2", "3", "4"], "y": "5"}]}), 422,
                   "invalid_inputs")
    assert err["message"] == 'inputs[1]: unknown input signal "y": circuit.wasm has no input of that name', err
    assert err["detail"]["index"] == 1 and err["detail"]["error"] == "UnknownInputError"
    err = error_of(http.post(proofs, json={"inputs": [{"pub": ["1", "2", "3"], "x": "5"}]}), 422, "invalid_inputs")
    assert 'input signal "pub" takes 4 values in circuit.wasm, found 3' in err["message"]
    err = error_of(http.post(proofs, json={"inputs": [{"pub": ["1", "2", "3", "4"], "x": str(1 << 260)}]}), 422,
                   "invalid_inputs")
    assert "x" in err["message"] and "field" in err["message"], err
    err = error_of(http.post(proofs, json={"inputs": ["not an object"]}), 422, "invalid_inputs")
    assert err["message"].startswith("inputs[0]:"), err
    err = error_of(http.post(f"/v1/circuits/{no_wasm}/proofs", json={"inputs": inputs()}), 422, "circuit_has_no_wasm")

    # Files that are not what they claim.
    err = error_of(http.post("/v1/circuits", files={"zkey": ("broken.zkey", ZKEY.read_bytes()[:100000])}), 422,
                   "invalid_zkey")
    assert err["message"].startswith("broken.zkey: truncated .zkey"), err
    err = error_of(http.post("/v1/circuits", files={"zkey": ("a.zkey", ZKEY.read_bytes()),
                                                    "wasm": ("c.wasm", b"\0asm not really")}), 422, "invalid_wasm")
    assert "not a WebAssembly module" in err["message"]
    err = error_of(http.post("/v1/circuits", files={"zkey_sha256": (None, "0" * 64), "zkey": ("a.zkey", ZKEY.read_bytes())}),
                   400, "digest_mismatch")
    assert err["detail"]["found"] == hashlib.sha256(ZKEY.read_bytes()).hexdigest()
    bls_wasm = ROOT / "tests" / "fixtures" / "bls12381_chain_10" / "circuit_js" / "circuit.wasm"
    err = error_of(http.post("/v1/circuits", files={"zkey": ("a.zkey", ZKEY.read_bytes()),
                                                    "wasm": ("bls.wasm", bls_wasm.read_bytes())}), 422, "circuit_mismatch")
    other_r1cs = ROOT / "tests" / "fixtures" / "bn128_chain_12" / "circuit.r1cs"
    err = error_of(http.post("/v1/circuits", files={"zkey": ("a.zkey", ZKEY.read_bytes()),
                                                    "r1cs": ("other.r1cs", other_r1cs.read_bytes())}), 422,
                   "circuit_mismatch")
    assert err["detail"]["file"] == "r1cs", err
    err = error_of(http.post("/v1/circuits", files={"zkey": ("a.zkey", ZKEY.read_bytes()),
                                                    "r1cs": ("a.r1cs", ZKEY.read_bytes())}), 422, "invalid_r1cs")
    assert err["message"].startswith("a.r1cs: not a .r1cs"), err
    err = error_of(http.post(proofs, files=[("witness", ("w0.wtns", WITNESSES[0].read_bytes())),
                                            ("witness", ("bls.wtns", BLS_WITNESS.read_bytes()))]), 422, "invalid_witness")
    assert err["detail"]["index"] == 1 and "bls.wtns" in err["message"]
    err = error_of(http.post(proofs, files=[("witness", ("cut.wtns", WITNESSES[0].read_bytes()[:999]))]), 422,
                   "invalid_witness")
    assert err["message"].startswith("cut.wtns: truncated .wtns"), err

    # Limits.
    error_of(http.post(proofs, json={"inputs": inputs() * 2000}), 413, "payload_too_large")   # the JSON limit
    small = server.http(server.key("small", max_upload_bytes=100_000))
    err = error_of(upload_circuit(small), 413, "payload_too_large")
    assert err["detail"]["limit_bytes"] == 100_000

    def chunked():          # no Content-Length: the limit is counted as the bytes come
        boundary = b"b0undary"
        yield b"--" + boundary + b'\r\nContent-Disposition: form-data; name="zkey"; filename="k.zkey"\r\n\r\n'
        for _ in range(20):
            yield b"\0" * 10_000
        yield b"\r\n--" + boundary + b"--\r\n"
    err = error_of(small.post("/v1/circuits", content=chunked(),
                              headers={"content-type": "multipart/form-data; boundary=b0undary"}), 413,
                   "payload_too_large")
    quota = server.http(server.key("quota", proofs_per_hour=3))
    qcid = upload_circuit(quota).json()["circuit_id"]
    assert quota.post(f"/v1/circuits/{qcid}/proofs", json={"inputs": inputs(2)}).status_code == 201
    res = quota.post(f"/v1/circuits/{qcid}/proofs", json={"inputs": inputs(2)})
    err = error_of(res, 429, "quota_exceeded")
    assert err["detail"]["limit"] == 3 and err["detail"]["used"] == 2 and 0 < int(res.headers["retry-after"]) <= 3601
    assert quota.post(f"/v1/circuits/{qcid}/proofs", json={"inputs": inputs(1)}).status_code == 201   # 3 of 3

    # An upload that stops sending is dropped after the idle timeout (1 s here).
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/circuits HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode()
                  + b"\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n")
        started = time.monotonic()
        reply = b""
        while b"upload_timeout" not in reply and (chunk := s.recv(65536)):
            reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 408") and '"upload_timeout"' in reply, reply
    assert time.monotonic() - started < 8


def test_a_key_sees_only_its_own_circuits_and_jobs(server):
    alice, bob = server.http(server.key("alice")), server.http(server.key("bob"))
    cid = upload_circuit(alice).json()["circuit_id"]
    job = alice.post(f"/v1/circuits/{cid}/proofs", json={"inputs": inputs(2)}, headers={"Idempotency-Key": "k1"}).json()
    jid = job["job_id"]
    for method, path in [("GET", f"/v1/jobs/{jid}"), ("GET", f"/v1/jobs/{jid}/events"),
                         ("GET", f"/v1/jobs/{jid}/proofs/0"), ("GET", f"/v1/jobs/{jid}/proofs/0/proof.json"),
                         ("DELETE", f"/v1/jobs/{jid}")]:
        error_of(bob.request(method, path), 404, "job_not_found")
    error_of(bob.get(f"/v1/circuits/{cid}"), 404, "circuit_not_found")
    error_of(bob.post(f"/v1/circuits/{cid}/proofs", json={"inputs": inputs()}), 404, "circuit_not_found")
    # Bob registers the same circuit: he may use it now, but Alice's job stays hers, and his
    # idempotency keys are his own.
    shas = {"zkey_sha256": hashlib.sha256(ZKEY.read_bytes()).hexdigest(),
            "wasm_sha256": hashlib.sha256(WASM.read_bytes()).hexdigest()}
    assert bob.post("/v1/circuits", json=shas).status_code == 201
    error_of(bob.get(f"/v1/jobs/{jid}"), 404, "job_not_found")
    mine = bob.post(f"/v1/circuits/{cid}/proofs", json={"inputs": inputs()}, headers={"Idempotency-Key": "k1"})
    assert mine.status_code == 201 and mine.json()["job_id"] != jid
    assert alice.get(f"/v1/jobs/{jid}").json()["state"] == "queued"
    # A job submitted by Python (no API key owns it) is no key's.
    py = server.queue.client().submit(ZKEY, [WITNESSES[0]])
    error_of(alice.get(f"/v1/jobs/{py.id}"), 404, "job_not_found")


def test_cancel_ends_the_job_and_its_event_stream(server):
    http = server.http(server.key("alice"))
    cid = upload_circuit(http).json()["circuit_id"]
    jid = http.post(f"/v1/circuits/{cid}/proofs", files=[("witness", (p.name, p.read_bytes())) for p in WITNESSES],
                    data={"priority": "low"}).json()["job_id"]
    st = http.get(f"/v1/jobs/{jid}").json()
    assert st["state"] == "queued" and st["priority"] == "low" and len(st["partitions"]) == 4
    error_of(http.get(f"/v1/jobs/{jid}/proofs/0"), 409, "proof_not_ready")
    error_of(http.get(f"/v1/jobs/{jid}/proofs/4"), 404, "proof_not_found")
    with http.stream("GET", f"/v1/jobs/{jid}/events", timeout=30) as stream:
        events = sse_events(stream)
        assert next(events)[0] == "status"
        res = server.http(http.headers["authorization"].split()[1]).delete(f"/v1/jobs/{jid}")
        assert res.status_code == 200 and res.json() == {"job_id": jid, "cancelled": True, "state": "cancelled"}
        rest = list(events)
    assert rest[-1][0] == "end" and rest[-1][1]["state"] == "cancelled", rest
    assert ("job", {"job_id": jid, "state": "cancelled", "error": None}) in rest
    assert http.delete(f"/v1/jobs/{jid}").json()["cancelled"] is False
    err = error_of(http.get(f"/v1/jobs/{jid}/proofs/0"), 409, "proof_not_ready")
    assert err["detail"]["job_state"] == "cancelled"


def test_an_event_stream_whose_job_redis_lost_says_so_and_ends(server):
    http = server.http(server.key("alice"))
    cid = upload_circuit(http).json()["circuit_id"]
    jid = http.post(f"/v1/circuits/{cid}/proofs", json={"inputs": inputs(2)}).json()["job_id"]
    with http.stream("GET", f"/v1/jobs/{jid}/events", timeout=30) as stream:
        events = sse_events(stream)
        assert next(events)[0] == "status"
        server.queue.r.delete(*server.queue.r.keys(f"zkq:job:{jid}*"))     # Redis lost the job
        rest = list(events)
    assert [e for e, _ in rest] == ["lost"] and rest[0][1]["job_id"] == jid, rest
    error_of(http.get(f"/v1/jobs/{jid}"), 404, "job_not_found")

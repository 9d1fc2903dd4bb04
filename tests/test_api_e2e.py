"""The HTTP API end to end: a real uvicorn server, real workers, real HTTP clients, snarkjs."""

from __future__ import annotations

import hashlib
import json

from api_support import INPUTS, R1CS, VK, WASM, ZKEY, api, sse_events, upload_circuit  # noqa: F401  (fixture)
from conftest import snarkjs_verifies
from queue_support import queue  # noqa: F401  (fixture)


def test_upload_four_proofs_from_inputs_follow_the_events_and_snarkjs_accepts_every_proof(api, queue, tmp_path):  # noqa: F811
    group = queue.start_workers(2)
    http = api.http(api.key("alice"))

    res = upload_circuit(http)
    assert res.status_code == 201, res.text
    circuit = res.json()
    assert (circuit["curve"], circuit["n_public"], circuit["n_vars"], circuit["domain_size"]) == ("bn128", 6, 1023, 1024)
    assert circuit["uploaded"] == {"zkey": "stored", "wasm": "stored"}
    assert circuit["files"]["zkey"] == hashlib.sha256(ZKEY.read_bytes()).hexdigest()
    cid = circuit["circuit_id"]
    vk = http.get(f"/v1/circuits/{cid}/verification_key")
    assert vk.status_code == 200 and vk.json() == json.loads(VK.read_text())
    (tmp_path / "vk.json").write_bytes(vk.content)

    queue.ready(group)
    res = http.post(f"/v1/circuits/{cid}/proofs", headers={"Idempotency-Key": "order-1"},
                    json={"inputs": [json.loads(p.read_text()) for p in INPUTS], "priority": "high"})
    assert res.status_code == 201, res.text
    job = res.json()
    assert job["n_partitions"] == 4 and job["priority"] == "high" and job["idempotency_key"] == "order-1"

    events = []
    with http.stream("GET", f"/v1/jobs/{job['job_id']}/events", timeout=180) as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(stream))
    names = [e for e, _ in events]
    assert names[0] == "status" and names[-1] == "end", names
    end = events[-1][1]
    assert end["state"] == "done" and end["over"], end
    verified = {d["index"] for e, d in events if e == "partition" and d["phase"] == "verified"}
    assert verified == {0, 1, 2, 3}, names
    assert ("job", {"job_id": job["job_id"], "state": "done", "error": None}) in events

    st = http.get(f"/v1/jobs/{job['job_id']}").json()
    for p in st["partitions"]:
        assert p["state"] == "verified" and p["fingerprint"]["build"] and p["worker"]
        assert {"prove_s", "total_s"} <= set(p["timings_s"])
        proof = http.get(f"/v1/jobs/{job['job_id']}/proofs/{p['index']}/proof.json")
        public = http.get(f"/v1/jobs/{job['job_id']}/proofs/{p['index']}/public.json")
        assert proof.status_code == public.status_code == 200
        (tmp_path / f"proof_{p['index']}.json").write_bytes(proof.content)
        (tmp_path / f"public_{p['index']}.json").write_bytes(public.content)
        assert snarkjs_verifies(tmp_path / "vk.json", tmp_path / f"public_{p['index']}.json",
                                tmp_path / f"proof_{p['index']}.json"), p["index"]
        whole = http.get(p["proof"]).json()
        assert whole["proof"] == json.loads(proof.content) and whole["public"] == json.loads(public.content)

    # The same Idempotency-Key: the same job, without reading the body.
    again = http.post(f"/v1/circuits/{cid}/proofs", content=b"not even json",
                      headers={"Idempotency-Key": "order-1", "content-type": "application/json"})
    assert again.status_code == 200 and again.json()["job_id"] == job["job_id"]


def test_the_same_circuit_again_is_named_by_sha256_and_its_body_never_sent(api):  # noqa: F811
    http = api.http(api.key("alice"))
    shas = {"zkey_sha256": hashlib.sha256(ZKEY.read_bytes()).hexdigest(),
            "wasm_sha256": hashlib.sha256(WASM.read_bytes()).hexdigest()}
    first = http.post("/v1/circuits", json=shas)
    assert first.status_code == 409 and first.json()["error"]["code"] == "upload_required"
    assert first.json()["error"]["detail"] == {"missing": ["zkey", "wasm"]}
    created = upload_circuit(http)
    assert created.status_code == 201
    again = http.post("/v1/circuits", json=shas)
    assert again.status_code == 200, again.text
    assert again.json()["circuit_id"] == created.json()["circuit_id"]
    assert again.json()["uploaded"] == {"zkey": "named", "wasm": "named"}
    # Another key sends the bodies again: stored once, a circuit it may use now.
    other = upload_circuit(api.http(api.key("bob")))
    assert other.status_code == 201 and other.json()["uploaded"] == {"zkey": "already_stored", "wasm": "already_stored"}
    assert other.json()["circuit_id"] == created.json()["circuit_id"]
    # With its .r1cs it is another circuit (the files make the circuit), sharing the stored key.
    with_r1cs = upload_circuit(http, r1cs=True)
    assert with_r1cs.status_code == 201 and with_r1cs.json()["circuit_id"] != created.json()["circuit_id"]
    assert with_r1cs.json()["uploaded"] == {"zkey": "already_stored", "wasm": "already_stored", "r1cs": "stored"}
    assert with_r1cs.json()["files"]["r1cs"] == hashlib.sha256(R1CS.read_bytes()).hexdigest()


def test_a_bad_witness_fails_alone_and_the_other_proofs_are_served(api, queue, tmp_path):  # noqa: F811
    """Partial results: one partition fails as bad input; the API names it and its reason and
    serves the other three verified proofs. With all_or_nothing the job fails whole."""
    from api_support import WITNESSES
    from zkqueue.groth16.formats.wtns import read_header
    group = queue.start_workers(1)
    http = api.http(api.key("alice"))
    cid = upload_circuit(http, wasm=False).json()["circuit_id"]
    (tmp_path / "vk.json").write_bytes(http.get(f"/v1/circuits/{cid}/verification_key").content)
    # Partition 2's witness holds a value that is not in the field: a well-formed file (the
    # API's header check passes) that the worker refuses as bad input.
    bad = bytearray(WITNESSES[2].read_bytes())
    values_at = len(bad) - read_header(WITNESSES[2]).n_witness * 32
    bad[values_at + 5 * 32: values_at + 6 * 32] = b"\xff" * 32
    files = [("witness", (p.name, p.read_bytes())) for p in WITNESSES[:2]]
    files += [("witness", ("bad.wtns", bytes(bad))), ("witness", (WITNESSES[3].name, WITNESSES[3].read_bytes()))]
    queue.ready(group)

    def run(**fields) -> dict:
        job = http.post(f"/v1/circuits/{cid}/proofs", files=files, data=fields)
        assert job.status_code == 201, job.text
        with http.stream("GET", f"/v1/jobs/{job.json()['job_id']}/events", timeout=120) as stream:
            events = list(sse_events(stream))
        assert events[-1][0] == "end", events
        return events[-1][1]

    end = run()
    jid = end["job_id"]
    assert end["state"] == "done-with-failures" and end["delivered"], end
    failed = end["partitions"][2]
    assert failed["state"] == "failed" and failed["source"] == "bad.wtns", failed
    # The worker names the file by its place in the store; the API shows its hash instead.
    assert failed["error"] == (f"partition 2: sha256:{hashlib.sha256(bad).hexdigest()}: corrupt .wtns: value 5 "
                               "is not below the bn128 scalar field prime"), failed
    assert "/sha256/" not in json.dumps(end)        # no server path reaches a client
    res = http.get(f"/v1/jobs/{jid}/proofs/2")
    assert res.status_code == 409 and res.json()["error"]["detail"]["state"] == "failed"
    for i in (0, 1, 3):
        assert end["partitions"][i]["state"] == "verified" and end["partitions"][i]["proof"]
        (tmp_path / "proof.json").write_bytes(http.get(f"/v1/jobs/{jid}/proofs/{i}/proof.json").content)
        (tmp_path / "public.json").write_bytes(http.get(f"/v1/jobs/{jid}/proofs/{i}/public.json").content)
        assert snarkjs_verifies(tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json"), i

    whole = run(all_or_nothing="true")
    assert whole["state"] == "failed" and not whole["delivered"] and whole["error"]["partition"] == 2, whole
    assert whole["error"]["message"] == failed["error"]

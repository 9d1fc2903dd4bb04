"""The HTTP handlers, and the one declaration of every route (ENDPOINTS, at the bottom).

Each handler authenticates, reads and checks its body if it has one (with the models its
declaration names: api/models.py), and hands the rest to a blocking function that runs in a
worker thread (ApiState.blocking), passing it only what it uses: the Client, Redis and the
store are synchronous, and the event loop must stay free for uploads and streams.
"""

from __future__ import annotations

import json
import uuid

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from zkqueue.coordinator.jobs import SlotState

from . import circuits, models, proofs, sse, views
from .auth import ApiKey
from .endpoint import JSON, MULTIPART, Endpoint, Header, Out
from .errors import ApiError
from .state import ApiState
from .uploads import Form, read_form


def api(request: Request) -> ApiState:
    return request.app.state.api


def media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower()


def snarkjs_json(obj) -> Response:
    """A JSON file as snarkjs writes it (JSON.stringify(obj, null, 1))."""
    return Response(json.dumps(obj, indent=1), media_type="application/json")


# -- no key needed -------------------------------------------------------------------------

async def healthz(request: Request) -> Response:
    await api(request).blocking(api(request).r.ping, timeout_s=5)
    return JSONResponse({"ok": True})


async def openapi_document(request: Request) -> Response:
    return Response(request.app.state.openapi, media_type="application/json")


async def docs_page(request: Request) -> Response:
    """GET /docs: the OpenAPI document as one self-contained HTML page (api/docs.py)."""
    return HTMLResponse(request.app.state.docs_page)


# -- circuits ------------------------------------------------------------------------------

async def create_circuit(request: Request) -> Response:
    """POST /v1/circuits: multipart files (zkey, wasm, r1cs) streamed to the store, or any of
    them named by sha256 (`zkey_sha256` ...: a field of the multipart body or a JSON body)."""
    a = api(request)
    key = await a.authenticate(request)       # before the body: no stranger streams gigabytes
    if media_type(request) == "application/json":
        body = await a.read_json(request)
        if not isinstance(body, dict):
            raise ApiError("invalid_request", "the body must be a JSON object: {\"zkey_sha256\": ...}")
        named = models.parse(models.CircuitByHash, body)
        form = Form(fields=named.model_dump(exclude_none=True))
    else:
        form = await read_form(request, a.store, files={role: role for role in circuits.ROLES},
                               fields={f"{role}_sha256" for role in circuits.ROLES},
                               max_bytes=a.upload_limit(key), idle_timeout_s=a.proc.api_upload_idle_timeout_s,
                               max_files=len(circuits.ROLES))
        try:
            models.parse(models.CircuitUpload, {**form.fields, **{part.name: part for part in form.files}})
        except ApiError:
            form.abort()
            raise
    view, created = await a.blocking(circuits.register_form, a.r, a.store, key, form, timeout_s=None)
    return JSONResponse(view, status_code=201 if created else 200)


async def get_circuit(request: Request) -> Response:
    a = api(request)
    cid = request.path_params["circuit_id"]
    circuit = await a.call(request, lambda key: circuits.get(a.r, key, cid))
    return JSONResponse(circuit.view())


async def get_verification_key(request: Request) -> Response:
    a = api(request)
    cid = request.path_params["circuit_id"]

    def read(key: ApiKey) -> bytes:
        circuit = circuits.get(a.r, key, cid)
        return a.store.local_path(circuit.vk).read_bytes()
    return Response(await a.call(request, read), media_type="application/json")


# -- proofs --------------------------------------------------------------------------------

async def request_proofs(request: Request) -> Response:
    """POST /v1/circuits/{id}/proofs: {"inputs": [...], "priority", "all_or_nothing"} as JSON
    (CPU workers compute the witnesses), or `witness` files (multipart, one per proof, in
    order) with the same options as fields. The Idempotency-Key header makes a retry return
    the same job."""
    a = api(request)
    key = await a.authenticate(request)
    cid = request.path_params["circuit_id"]
    given = request.headers.get("idempotency-key")
    if given is not None:
        models.check_value(models.IdempotencyKey, given,
                           "Idempotency-Key: 1 to 200 printable ASCII characters, no spaces")
    rid = views.request_id(key, cid, given or f"auto:{uuid.uuid4().hex}")
    if given is not None:
        # A retry: the job exists, the body need not be read (nor its witnesses stored again).
        found = await a.blocking(proofs.existing_job, a.jobs, key, rid)
        if found is not None:
            return JSONResponse(found, status_code=200)
    submitter = proofs.Submitter(a.client, a.keys, a.proc.api_max_partitions, jobs=a.jobs)
    if media_type(request) == "application/json":
        body = await a.read_json(request)
        if not isinstance(body, dict):
            raise ApiError("invalid_request", "the body must be a JSON object: {\"inputs\": [...]}")
        view, created = await a.blocking(submitter.inputs, key, cid, models.parse(models.ProofsFromInputs, body),
                                         rid)
    else:
        form = await read_form(request, a.store, files={"witness": "wtns"}, fields=set(proofs.OPTIONS),
                               max_bytes=a.upload_limit(key), idle_timeout_s=a.proc.api_upload_idle_timeout_s,
                               max_files=a.proc.api_max_partitions, repeated=frozenset({"witness"}))
        view, created = await a.blocking(submitter.witnesses, key, cid, form, rid, timeout_s=None)
    return JSONResponse(view, status_code=201 if created else 200)


# -- jobs ----------------------------------------------------------------------------------

def _job_view(jobs, key: ApiKey, job_id: str) -> dict:
    job, st, owner = views.owned_job(jobs, key, job_id)
    return views.job_view(st, owner, views.verified_results(job, st))


async def get_job(request: Request) -> Response:
    a = api(request)
    job_id = request.path_params["job_id"]
    return JSONResponse(await a.call(request, lambda key: _job_view(a.jobs, key, job_id)))


async def cancel_job(request: Request) -> Response:
    a = api(request)

    job_id = request.path_params["job_id"]

    def cancel(key: ApiKey) -> dict:
        job, st, owner = views.owned_job(a.jobs, key, job_id)
        cancelled = job.cancel()
        return {"job_id": job_id, "cancelled": cancelled, "state": job.status().state.value}
    return JSONResponse(await a.call(request, cancel))


def _proof(jobs, key: ApiKey, job_id: str, raw_index: str):
    job, st, owner = views.owned_job(jobs, key, job_id)
    index = int(raw_index) if raw_index.isdigit() else -1
    if not 0 <= index < st.n_partitions:
        raise ApiError("proof_not_found", f"job {job_id} has partitions 0..{st.n_partitions - 1}",
                       {"expected": f"0..{st.n_partitions - 1}", "found": raw_index})
    p = st.partitions[index]
    res = views.verified_results(job, st).get(index) if p.state == SlotState.VERIFIED else None
    if res is None:
        raise ApiError("proof_not_ready", f"partition {index} has no verified proof: it is {p.phase}, "
                       f"the job {st.state.value}", {"state": p.state.value, "phase": p.phase,
                                                    "job_state": st.state.value, "over": st.state.over})
    return res


async def _verified_proof(request: Request):
    a = api(request)
    job_id, index = request.path_params["job_id"], request.path_params["index"]
    return await a.call(request, lambda key: _proof(a.jobs, key, job_id, index))


async def get_proof(request: Request) -> Response:
    return JSONResponse(views.proof_view(request.path_params["job_id"], await _verified_proof(request)))


async def get_proof_json(request: Request) -> Response:
    return snarkjs_json((await _verified_proof(request)).proof)


async def get_public_json(request: Request) -> Response:
    return snarkjs_json((await _verified_proof(request)).public_signals)


async def job_events(request: Request) -> Response:
    a = api(request)
    job_id = request.path_params["job_id"]
    job, _, _ = await a.call(request, lambda key: views.owned_job(a.jobs, key, job_id))
    # the job's own Redis (its cell's, with ZKQUEUE_CELLS): reads and its notify channel
    return sse.response(job.client, a.aredis_for(job.client), a.blocking, a.proc.api_sse_keepalive_s, job_id)


# -- every route, declared once ------------------------------------------------------------

_INPUTS_OR_WITNESSES = {JSON: models.ProofsFromInputs, MULTIPART: models.ProofsFromWitnesses}
_A_PROOF = ("job_not_found", "proof_not_found", "proof_not_ready")

ENDPOINTS = (
    Endpoint("GET", "/healthz", healthz, "Liveness: Redis answers", public=True,
             responses=(Out(200, models.Health, "ok"),), errors=("unavailable",)),
    Endpoint("GET", "/openapi.json", openapi_document, "This document", public=True,
             responses=(Out(200, models.SnarkjsObject, "the OpenAPI document"),)),
    Endpoint("POST", "/v1/circuits", create_circuit,
             "Register a circuit: upload its files (streamed to the store), or name stored ones by sha256",
             description="Send the sha256 first (JSON) to skip bodies the store has: 409 upload_required lists "
                         "the files to send. Content addressed: the same files are the same circuit.",
             body={JSON: models.CircuitByHash, MULTIPART: models.CircuitUpload},
             responses=(Out(201, models.Circuit, "registered for this key"),
                        Out(200, models.Circuit, "this key had it already")),
             errors=("invalid_json", "invalid_multipart", "digest_mismatch", "upload_timeout", "upload_required",
                     "payload_too_large", "unsupported_media_type", "invalid_request", "invalid_zkey",
                     "invalid_wasm", "invalid_r1cs", "circuit_mismatch")),
    Endpoint("GET", "/v1/circuits/{circuit_id}", get_circuit, "A circuit this key registered",
             responses=(Out(200, models.Circuit, "the circuit"),), errors=("circuit_not_found",)),
    Endpoint("GET", "/v1/circuits/{circuit_id}/verification_key", get_verification_key,
             "verification_key.json, as snarkjs writes it",
             responses=(Out(200, models.SnarkjsObject, "verification_key.json"),), errors=("circuit_not_found",)),
    Endpoint("POST", "/v1/circuits/{circuit_id}/proofs", request_proofs,
             "Request proofs: one per input object (witnesses computed by CPU workers) or per witness file",
             body=_INPUTS_OR_WITNESSES, headers=(Header("Idempotency-Key", models.IdempotencyKey),),
             responses=(Out(201, models.Job, "the job"),
                        Out(200, models.Job, "the job of this Idempotency-Key, submitted before")),
             errors=("circuit_not_found", "invalid_json", "invalid_multipart", "upload_timeout", "payload_too_large",
                     "unsupported_media_type", "invalid_request", "invalid_inputs", "invalid_witness",
                     "circuit_has_no_wasm", "quota_exceeded")),
    Endpoint("GET", "/v1/jobs/{job_id}", get_job,
             "A job: state, each partition's phase, failures, timings, producing workers",
             responses=(Out(200, models.Job, "the job"),), errors=("job_not_found",)),
    Endpoint("DELETE", "/v1/jobs/{job_id}", cancel_job, "Cancel a job",
             responses=(Out(200, models.Cancelled, "cancelled, or already over"),), errors=("job_not_found",)),
    Endpoint("GET", "/v1/jobs/{job_id}/events", job_events,
             "Server-Sent Events until the job is over: status, partition, job, end (or lost)",
             responses=(Out(200, models.EventStream, "the event stream", media_type="text/event-stream"),),
             errors=("job_not_found",)),
    Endpoint("GET", "/v1/jobs/{job_id}/proofs/{index}", get_proof,
             "A verified proof with its public signals and provenance",
             responses=(Out(200, models.Proof, "the proof"),), errors=_A_PROOF),
    Endpoint("GET", "/v1/jobs/{job_id}/proofs/{index}/proof.json", get_proof_json,
             "proof.json, byte for byte as snarkjs writes it",
             responses=(Out(200, models.SnarkjsObject, "proof.json"),), errors=_A_PROOF),
    Endpoint("GET", "/v1/jobs/{job_id}/proofs/{index}/public.json", get_public_json,
             "public.json, byte for byte as snarkjs writes it",
             responses=(Out(200, models.PublicSignals, "public.json"),), errors=_A_PROOF),
)

# The API's routes: exactly the declared ones.
ROUTES = [e.route() for e in ENDPOINTS]
# Pages for people, outside the API's document (as /openapi.json's own rendering, it has no
# contract of its own): the browsable docs.
PAGES = [Route("/docs", docs_page, methods=["GET"])]

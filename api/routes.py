"""The HTTP handlers. Each authenticates, reads its body if it has one, and hands the rest
to a blocking function that runs in a worker thread (Api.blocking): the Client, Redis and
the store are synchronous, and the event loop must stay free for uploads and streams.
"""

from __future__ import annotations

import json
import re
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from zkqueue.coordinator.jobs import SlotState

from . import circuits, openapi, proofs, sse, views
from .auth import ApiKey
from .errors import ApiError
from .uploads import Form, read_form

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")     # printable ASCII, no spaces


def api(request: Request):
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
    return Response(openapi.document_bytes(), media_type="application/json")


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
        form = Form(fields={k: v for k, v in body.items()})
    else:
        form = await read_form(request, a.store, files={role: role for role in circuits.ROLES},
                               fields={f"{role}_sha256" for role in circuits.ROLES},
                               max_bytes=a.upload_limit(key), idle_timeout_s=a.proc.api_upload_idle_timeout_s,
                               max_files=len(circuits.ROLES))
    view, created = await a.blocking(circuits.register_form, a, key, form, timeout_s=None)
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
    if given is not None and not IDEMPOTENCY_KEY.fullmatch(given):
        raise ApiError("invalid_request", "Idempotency-Key: 1 to 200 printable ASCII characters, no spaces",
                       {"found": given[:240]})
    rid = views.request_id(key, cid, given or f"auto:{uuid.uuid4().hex}")
    if given is not None:
        # A retry: the job exists, the body need not be read (nor its witnesses stored again).
        found = await a.blocking(proofs.existing_job, a, key, rid)
        if found is not None:
            return JSONResponse(found, status_code=200)
    if media_type(request) == "application/json":
        body = await a.read_json(request)
        if not isinstance(body, dict):
            raise ApiError("invalid_request", "the body must be a JSON object: {\"inputs\": [...]}")
        view, created = await a.blocking(proofs.submit_inputs, a, key, cid, body, rid)
    else:
        form = await read_form(request, a.store, files={"witness": "wtns"}, fields=set(proofs.OPTIONS),
                               max_bytes=a.upload_limit(key), idle_timeout_s=a.proc.api_upload_idle_timeout_s,
                               max_files=a.proc.api_max_partitions, repeated=frozenset({"witness"}))
        view, created = await a.blocking(proofs.submit_witnesses, a, key, cid, form, rid, timeout_s=None)
    return JSONResponse(view, status_code=201 if created else 200)


# -- jobs ----------------------------------------------------------------------------------

def _job_view(a, key: ApiKey, job_id: str) -> dict:
    job, st, owner = views.owned_job(a.client, key, job_id)
    return views.job_view(st, owner, views.verified_results(job, st))


async def get_job(request: Request) -> Response:
    a = api(request)
    job_id = request.path_params["job_id"]
    return JSONResponse(await a.call(request, lambda key: _job_view(a, key, job_id)))


async def cancel_job(request: Request) -> Response:
    a = api(request)

    job_id = request.path_params["job_id"]

    def cancel(key: ApiKey) -> dict:
        job, st, owner = views.owned_job(a.client, key, job_id)
        cancelled = job.cancel()
        return {"job_id": job_id, "cancelled": cancelled, "state": job.status().state.value}
    return JSONResponse(await a.call(request, cancel))


def _proof(a, key: ApiKey, job_id: str, raw_index: str):
    job, st, owner = views.owned_job(a.client, key, job_id)
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
    return await a.call(request, lambda key: _proof(a, key, job_id, index))


async def get_proof(request: Request) -> Response:
    return JSONResponse(views.proof_view(request.path_params["job_id"], await _verified_proof(request)))


async def get_proof_json(request: Request) -> Response:
    return snarkjs_json((await _verified_proof(request)).proof)


async def get_public_json(request: Request) -> Response:
    return snarkjs_json((await _verified_proof(request)).public_signals)


async def job_events(request: Request) -> Response:
    a = api(request)
    job_id = request.path_params["job_id"]
    await a.call(request, lambda key: views.owned_job(a.client, key, job_id))
    return sse.response(a, job_id)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/openapi.json", openapi_document, methods=["GET"]),
    Route("/v1/circuits", create_circuit, methods=["POST"]),
    Route("/v1/circuits/{circuit_id}", get_circuit, methods=["GET"]),
    Route("/v1/circuits/{circuit_id}/verification_key", get_verification_key, methods=["GET"]),
    Route("/v1/circuits/{circuit_id}/proofs", request_proofs, methods=["POST"]),
    Route("/v1/jobs/{job_id}", get_job, methods=["GET"]),
    Route("/v1/jobs/{job_id}", cancel_job, methods=["DELETE"]),
    Route("/v1/jobs/{job_id}/events", job_events, methods=["GET"]),
    Route("/v1/jobs/{job_id}/proofs/{index}", get_proof, methods=["GET"]),
    Route("/v1/jobs/{job_id}/proofs/{index}/proof.json", get_proof_json, methods=["GET"]),
    Route("/v1/jobs/{job_id}/proofs/{index}/public.json", get_public_json, methods=["GET"]),
]

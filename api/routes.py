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

from zkqueue.coordinator.errors import BadRequest
from zkqueue.coordinator.jobs import Priority, SlotState

from . import circuits, openapi, sse, views
from .auth import ApiKey, QuotaExceeded
from .capture import check
from .errors import ApiError, from_groth16
from .uploads import Form, read_form

SHA256 = re.compile(r"[0-9a-f]{64}")
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
    return JSONResponse(openapi.document())


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
    view, created = await a.blocking(_register, a, key, form, timeout_s=None)
    return JSONResponse(view, status_code=201 if created else 200)


def _register(a, key: ApiKey, form: Form) -> tuple[dict, bool]:
    try:
        return _register_checked(a, key, form)
    finally:
        form.abort()          # whatever was not committed (on success: nothing is left)


def _register_checked(a, key: ApiKey, form: Form) -> tuple[dict, bool]:
    unknown = set(form.fields) - {f"{role}_sha256" for role in circuits.ROLES}
    if unknown:
        raise ApiError("invalid_request", f"unknown fields {sorted(unknown)}",
                       {"expected": [f"{role}_sha256" for role in circuits.ROLES], "found": sorted(unknown)})
    metas, shas, how, missing, vk = {}, {}, {}, [], None
    for role in circuits.ROLES:
        part, named = form.file(role), form.fields.get(f"{role}_sha256")
        if named is not None and (not isinstance(named, str) or not SHA256.fullmatch(named)):
            raise ApiError("invalid_request", f"{role}_sha256 must be 64 lowercase hex digits", {"found": named})
        if part is not None:
            try:
                if role == "wasm":
                    meta = circuits.wasm_meta(part.spooled_bytes(), part.filename)
                else:
                    checked = check(role, part.capture, part.filename)
                    meta, vk = {"kind": role, **checked.meta}, checked.verification_key or vk
            except Exception as exc:
                from zkqueue.groth16.errors import InputError
                if isinstance(exc, InputError):
                    raise from_groth16(f"invalid_{role}", exc, source=part.filename) from None
                raise
            sha = part.upload.sha256
            if named is not None and named != sha:
                raise ApiError("digest_mismatch", f"{part.filename} hashes to {sha}, not the {role}_sha256 sent",
                               {"file": role, "expected": named, "found": sha})
            metas[role], shas[role] = {**meta, "bytes": part.size}, sha
        elif named is not None:
            meta = circuits.check_stored(a.r, a.store, role, named)
            if meta is None:
                missing.append(role)
            else:
                metas[role], shas[role], how[role] = meta, named, "named"
    if "zkey" not in shas and "zkey" not in missing:
        raise ApiError("invalid_request", "a circuit needs its .zkey: a `zkey` file part, or zkey_sha256",
                       {"expected": "zkey"})
    if missing:
        raise ApiError("upload_required", f"the store does not have the {', '.join(missing)} named by sha256: "
                       "send the file(s)", {"missing": missing})
    circuits.cross_check(metas)
    for part in form.files:
        sha, existed = part.upload.commit()
        how[part.name] = "already_stored" if existed else "stored"
        meta = dict(metas[part.name])
        if part.name == "zkey":
            meta["vk"] = a.store.put_bytes(circuits.vk_bytes(vk))
            metas["zkey"] = meta
        circuits.remember(a.r, sha, meta)
    wasm = form.file("wasm")       # its name shows in the witness calculator's messages
    circuit, created = circuits.register(a.r, key, shas, metas, wasm.filename if wasm else "circuit.wasm")
    return {**circuit.view(), "uploaded": how}, created


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
    """POST /v1/circuits/{id}/proofs: {"inputs": [...], "priority": ...} as JSON (CPU workers
    compute the witnesses), or `witness` files (multipart, one per proof, in order) with an
    optional `priority` field. The Idempotency-Key header makes a retry return the same job."""
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
        found = await a.blocking(_existing_job, a, key, rid)
        if found is not None:
            return JSONResponse(found, status_code=200)
    if media_type(request) == "application/json":
        body = await a.read_json(request)
        if not isinstance(body, dict):
            raise ApiError("invalid_request", "the body must be a JSON object: {\"inputs\": [...]}")
        view, created = await a.blocking(_submit_inputs, a, key, cid, body, rid)
    else:
        form = await read_form(request, a.store, files={"witness": "wtns"}, fields={"priority"},
                               max_bytes=a.upload_limit(key), idle_timeout_s=a.proc.api_upload_idle_timeout_s,
                               max_files=a.proc.api_max_partitions)
        view, created = await a.blocking(_submit_witnesses, a, key, cid, form, rid, timeout_s=None)
    return JSONResponse(view, status_code=201 if created else 200)


def _existing_job(a, key: ApiKey, rid: str) -> dict | None:
    from zkqueue.coordinator import keys
    job_id = a.r.get(keys.request(rid))
    if job_id is None:
        return None
    job, st, owner = views.owned_job(a.client, key, job_id.decode())
    return views.job_view(st, owner, views.verified_results(job, st))


def _priority(value) -> Priority:
    try:
        return Priority(value if value is not None else "normal")
    except ValueError:
        raise ApiError("invalid_request", f"unknown priority {value!r}",
                       {"expected": [p.value for p in Priority], "found": value}) from None


def _count(a, n: int, what: str) -> None:
    if not 1 <= n <= a.proc.api_max_partitions:
        raise ApiError("invalid_request", f"send 1 to {a.proc.api_max_partitions} {what}",
                       {"expected": f"1..{a.proc.api_max_partitions}", "found": n})


def _submit_inputs(a, key: ApiKey, cid: str, body: dict, rid: str) -> tuple[dict, bool]:
    from zkqueue.groth16.errors import InputError
    from zkqueue.groth16.witness import parse_inputs

    unknown = set(body) - {"inputs", "priority"}
    if unknown:
        raise ApiError("invalid_request", f"unknown fields {sorted(unknown)}",
                       {"expected": ["inputs", "priority"], "found": sorted(unknown)})
    circuit = circuits.get(a.r, key, cid)
    priority = _priority(body.get("priority"))
    inputs = body.get("inputs")
    if not isinstance(inputs, list):
        raise ApiError("invalid_request", "inputs: a list of input.json objects, one per proof",
                       {"expected": "list", "found": type(inputs).__name__})
    _count(a, len(inputs), "inputs")
    if not circuit.wasm:
        raise ApiError("circuit_has_no_wasm", f"circuit {cid} was registered without its .wasm: send witnesses, "
                       "or register the circuit with its .wasm", {"circuit_id": cid})
    calc = circuits.calculator(a.store.url, circuit.wasm, circuit.wasm_name)
    encoded = []
    for i, item in enumerate(inputs):
        source = f"inputs[{i}]"
        data = json.dumps(item).encode()
        try:
            # The witness calculator's own checks and messages, before any job exists.
            calc.check_inputs(parse_inputs(data, source=source), source=source)
        except InputError as exc:
            raise from_groth16("invalid_inputs", exc, extra={"index": i}) from None
        encoded.append((data, source))
    return _submit(a, key, circuit, rid, priority, len(encoded),
                   lambda: {"inputs": [(a.store.put_bytes(d), name) for d, name in encoded],
                            "wasm_sha": circuit.wasm, "wasm_name": circuit.wasm_name})


def _submit_witnesses(a, key: ApiKey, cid: str, form: Form, rid: str) -> tuple[dict, bool]:
    try:
        circuit = circuits.get(a.r, key, cid)
        priority = _priority(form.fields.get("priority"))
        _count(a, len(form.files), "witness files")
        from zkqueue.groth16.errors import InputError
        for i, part in enumerate(form.files):
            try:
                meta = check("wtns", part.capture, part.filename).meta
            except InputError as exc:
                raise from_groth16("invalid_witness", exc, source=part.filename, extra={"index": i}) from None
            if meta["curve"] != circuit.curve or meta["n_witness"] != circuit.n_vars:
                raise ApiError("invalid_witness", f"{part.filename}: a {meta['curve']} witness of {meta['n_witness']} "
                               f"values; circuit {cid} takes {circuit.curve} witnesses of {circuit.n_vars}",
                               {"index": i, "file": part.filename, "expected": [circuit.curve, circuit.n_vars],
                                "found": [meta["curve"], meta["n_witness"]]})
        return _submit(a, key, circuit, rid, priority, len(form.files),
                       lambda: {"witness_shas": [part.upload.commit()[0] for part in form.files]})
    finally:
        form.abort()


def _submit(a, key: ApiKey, circuit, rid: str, priority: Priority, n: int, files) -> tuple[dict, bool]:
    """Charges the key's quota, stores the files (`files()`), submits; refunds on failure."""
    try:
        a.keys.charge(key, n)
    except QuotaExceeded as exc:
        raise ApiError("quota_exceeded", str(exc), {"limit": exc.limit, "used": exc.used, "asked": n,
                                                     "retry_after_s": exc.retry_after_s},
                       headers={"Retry-After": str(exc.retry_after_s)}) from None
    try:
        job = a.client.submit_stored(circuit.zkey, priority=priority, request_id=rid, **files())
    except BadRequest as exc:
        a.keys.refund(key, n)
        raise ApiError("invalid_request", str(exc)) from None
    except BaseException:
        a.keys.refund(key, n)
        raise
    job, st, owner = views.owned_job(a.client, key, job.id)
    return views.job_view(st, owner, {}), True


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

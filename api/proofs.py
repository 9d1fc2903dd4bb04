"""Proof requests: check what the client sent against its circuit, charge the key's quota,
store the files and submit the job (Client.submit_stored). Every function blocks (Redis,
the store, the witness calculator): the routes call them off the event loop.
"""

from __future__ import annotations

import json

from zkqueue.coordinator.errors import BadRequest
from zkqueue.coordinator.jobs import Priority

from . import circuits, views
from .auth import ApiKey, QuotaExceeded
from .capture import check
from .errors import ApiError, from_groth16
from .uploads import Form

# A proof request's options besides its inputs or witnesses: a JSON body's fields, or a
# multipart body's plain fields.
OPTIONS = ("priority", "all_or_nothing")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .app import Api


def existing_job(a: "Api", key: ApiKey, rid: str) -> dict | None:
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


def _switch(value, name: str) -> bool:
    """A boolean option, from JSON (true/false) or a multipart field ("true"/"false")."""
    if value in (None, False, "false", "0"):
        return False
    if value in (True, "true", "1"):
        return True
    raise ApiError("invalid_request", f"{name}: true or false", {"found": value})


def _count(a: "Api", n: int, what: str) -> None:
    if not 1 <= n <= a.proc.api_max_partitions:
        raise ApiError("invalid_request", f"send 1 to {a.proc.api_max_partitions} {what}",
                       {"expected": f"1..{a.proc.api_max_partitions}", "found": n})


def submit_inputs(a: "Api", key: ApiKey, cid: str, body: dict, rid: str) -> tuple[dict, bool]:
    from zkqueue.groth16.errors import InputError
    from zkqueue.groth16.witness import parse_inputs

    unknown = set(body) - set(OPTIONS) - {"inputs"}
    if unknown:
        raise ApiError("invalid_request", f"unknown fields {sorted(unknown)}",
                       {"expected": ["inputs", *OPTIONS], "found": sorted(unknown)})
    circuit = circuits.get(a.r, key, cid)
    priority = _priority(body.get("priority"))
    all_or_nothing = _switch(body.get("all_or_nothing"), "all_or_nothing")
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
    return _submit(a, key, circuit, rid, priority, all_or_nothing, len(encoded),
                   lambda: {"inputs": [(a.store.put_bytes(d), name) for d, name in encoded],
                            "wasm_sha": circuit.wasm, "wasm_name": circuit.wasm_name})


def submit_witnesses(a: "Api", key: ApiKey, cid: str, form: Form, rid: str) -> tuple[dict, bool]:
    try:
        circuit = circuits.get(a.r, key, cid)
        priority = _priority(form.fields.get("priority"))
        all_or_nothing = _switch(form.fields.get("all_or_nothing"), "all_or_nothing")
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
        # Each witness keeps its file name: the queue's messages about it name it so.
        return _submit(a, key, circuit, rid, priority, all_or_nothing, len(form.files),
                       lambda: {"witnesses": [(part.upload.commit()[0], part.filename) for part in form.files]})
    finally:
        form.abort()


def _submit(a: "Api", key: ApiKey, circuit, rid: str, priority: Priority, all_or_nothing: bool, n: int,
            files) -> tuple[dict, bool]:
    """Charges the key's quota, stores the files (`files()`), submits with the circuit's
    .r1cs (a worker whose proof fails its own check names the broken constraint); refunds
    the quota on failure."""
    try:
        a.keys.charge(key, n)
    except QuotaExceeded as exc:
        raise ApiError("quota_exceeded", str(exc), {"limit": exc.limit, "used": exc.used, "asked": n,
                                                     "retry_after_s": exc.retry_after_s},
                       headers={"Retry-After": str(exc.retry_after_s)}) from None
    try:
        job = a.client.submit_stored(circuit.zkey, priority=priority, request_id=rid, r1cs_sha=circuit.r1cs,
                                     all_or_nothing=all_or_nothing, **files())
    except BadRequest as exc:
        a.keys.refund(key, n)
        raise ApiError("invalid_request", str(exc)) from None
    except BaseException:
        a.keys.refund(key, n)
        raise
    job, st, owner = views.owned_job(a.client, key, job.id)
    return views.job_view(st, owner, {}), True

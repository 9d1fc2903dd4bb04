"""The OpenAPI 3.1 document served at /openapi.json.

Written out here rather than generated: the handlers stream their bodies and Starlette has
no schema of them. tests/test_api_contract.py checks that the document's paths and methods
are exactly the app's routes and that its error codes are errors.CODES.
"""

from __future__ import annotations

from functools import lru_cache

from .errors import CODES

_ERROR = {"$ref": "#/components/schemas/Error"}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: str) -> dict:
    """Responses for the error codes an operation can answer with, grouped by status."""
    out: dict[str, dict] = {}
    for code in ("unauthorized", *codes, "unavailable", "timeout", "internal"):
        status = str(CODES[code])
        entry = out.setdefault(status, _json(_ERROR, ""))
        entry["description"] = ", ".join(filter(None, [entry["description"], code]))
    return out


_PATH_IDS = {
    "circuit_id": {"name": "circuit_id", "in": "path", "required": True, "schema": {"type": "string",
                   "pattern": "^[0-9a-f]{32}$"}},
    "job_id": {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string",
               "pattern": "^[0-9a-f]{32}$"}},
    "index": {"name": "index", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},
}


def _params(*names: str) -> list:
    return [_PATH_IDS[n] for n in names]


_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_FILE = {"type": "string", "format": "binary"}

SCHEMAS = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message", "detail"], "properties": {
            "code": {"type": "string", "enum": sorted(CODES)},
            "message": {"type": "string", "description": "one line for a person (the proving core's own "
                                                         "message for a bad file or input)"},
            "detail": {"description": "expected/found, the partition (index), the missing files, ... or null"}}}}},
    "Circuit": {"type": "object", "properties": {
        "circuit_id": {"type": "string"}, "curve": {"type": "string", "enum": ["bn128", "bls12381"]},
        "n_public": {"type": "integer", "description": "public signals (outputs, then public inputs)"},
        "n_vars": {"type": "integer", "description": "witness length"},
        "domain_size": {"type": "integer"}, "zkey_bytes": {"type": "integer"},
        "files": {"type": "object", "description": "sha256 of each file in the store"},
        "accepts": {"type": "array", "items": {"type": "string", "enum": ["witnesses", "inputs"]}},
        "created_at": {"type": "number"},
        "uploaded": {"type": "object", "description": "POST only: per file, stored, already_stored or named"}}},
    "CircuitByHash": {"type": "object", "required": ["zkey_sha256"], "properties": {
        "zkey_sha256": _SHA, "wasm_sha256": _SHA, "r1cs_sha256": _SHA}},
    "CircuitUpload": {"type": "object", "properties": {
        "zkey": _FILE, "wasm": _FILE, "r1cs": _FILE, "zkey_sha256": _SHA, "wasm_sha256": _SHA, "r1cs_sha256": _SHA}},
    "ProofsFromInputs": {"type": "object", "required": ["inputs"], "properties": {
        "inputs": {"type": "array", "minItems": 1, "items": {"type": "object"},
                   "description": "one input.json object per proof"},
        "priority": {"type": "string", "enum": ["critical", "high", "normal", "low"], "default": "normal"},
        "all_or_nothing": {"type": "boolean", "default": False,
                           "description": "any failed partition fails the job (default: each proof fails alone "
                                          "and the job delivers the others)"}}},
    "ProofsFromWitnesses": {"type": "object", "required": ["witness"], "properties": {
        "witness": {"type": "array", "items": _FILE, "description": "one .wtns per proof, in order"},
        "priority": {"type": "string", "enum": ["critical", "high", "normal", "low"]},
        "all_or_nothing": {"type": "string", "enum": ["true", "false"]}}},
    "Partition": {"type": "object", "properties": {
        "index": {"type": "integer"}, "state": {"type": "string"},
        "phase": {"type": "string", "description": "synthesizing, queued, proving, proved, verified or failed"},
        "attempts": {"type": "integer"}, "synth_attempts": {"type": "integer"},
        "worker": {"type": ["string", "null"]},
        "fingerprint": {"type": ["object", "null"], "description": "the producing worker's host, device, "
                                                                   "driver, backend and build"},
        "timings_s": {"type": "object"},
        "source": {"type": ["string", "null"], "description": "the witness file (or input) it was made from"},
        "error": {"type": ["string", "null"], "description": "why it failed, when it did"},
        "errors": {"type": "array", "items": {"type": "object"}, "description": "why attempts ended without a proof"},
        "proof": {"type": ["string", "null"], "description": "the proof's URL once verified"}}},
    "Job": {"type": "object", "properties": {
        "job_id": {"type": "string"}, "circuit_id": {"type": "string"},
        "state": {"type": "string", "description": "queued, running, done, done-with-failures (the other "
                                                   "partitions' proofs are served), failed, cancelled"},
        "over": {"type": "boolean"}, "delivered": {"type": "boolean", "description": "its verified proofs are served"},
        "priority": {"type": "string"},
        "idempotency_key": {"type": ["string", "null"]}, "n_partitions": {"type": "integer"},
        "created_at": {"type": "number"}, "finished_at": {"type": ["number", "null"]},
        "error": {"type": ["object", "null"], "properties": {"message": {"type": "string"},
                                                             "partition": {"type": ["integer", "string", "null"]}}},
        "timings_s": {"type": "object"}, "partitions": {"type": "array", "items": _ref("Partition")},
        "invalid_proofs": {"type": "array", "items": {"type": "object"}}}},
    "Proof": {"type": "object", "properties": {
        "job_id": {"type": "string"}, "index": {"type": "integer"},
        "proof": {"type": "object", "description": "proof.json's object"},
        "public": {"type": "array", "items": {"type": "string"}, "description": "public.json's array"},
        "worker": {"type": "string"}, "fingerprint": {"type": "object"}, "attempt": {"type": "integer"},
        "timings_s": {"type": "object"}}},
    "Cancelled": {"type": "object", "properties": {
        "job_id": {"type": "string"}, "cancelled": {"type": "boolean", "description": "false: it was already over"},
        "state": {"type": "string"}}},
}

_IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {
    "type": "string", "maxLength": 200}, "description": "the same key again returns the first job (200), "
                                                       "whatever the body"}


def _paths() -> dict:
    return {
        "/healthz": {"get": {"summary": "Liveness: Redis answers", "security": [], "responses": {
            "200": _json({"type": "object"}, "ok"), "503": _json(_ERROR, "unavailable")}}},
        "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {
            "200": _json({"type": "object"}, "the OpenAPI document")}}},
        "/v1/circuits": {"post": {
            "summary": "Register a circuit: upload its files (streamed to the store), or name stored ones by sha256",
            "description": "Send the sha256 first (JSON) to skip bodies the store has: 409 upload_required lists "
                           "the files to send. Content addressed: the same files are the same circuit.",
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": _ref("CircuitByHash")},
                "multipart/form-data": {"schema": _ref("CircuitUpload")}}},
            "responses": {"201": _json(_ref("Circuit"), "registered for this key"),
                          "200": _json(_ref("Circuit"), "this key had it already"),
                          **_errors("invalid_json", "invalid_multipart", "digest_mismatch", "upload_timeout",
                                    "upload_required", "payload_too_large", "unsupported_media_type",
                                    "invalid_request", "invalid_zkey", "invalid_wasm", "invalid_r1cs",
                                    "circuit_mismatch")}}},
        "/v1/circuits/{circuit_id}": {"get": {
            "summary": "A circuit this key registered", "parameters": _params("circuit_id"),
            "responses": {"200": _json(_ref("Circuit"), "the circuit"), **_errors("circuit_not_found")}}},
        "/v1/circuits/{circuit_id}/verification_key": {"get": {
            "summary": "verification_key.json, as snarkjs writes it", "parameters": _params("circuit_id"),
            "responses": {"200": _json({"type": "object"}, "verification_key.json"), **_errors("circuit_not_found")}}},
        "/v1/circuits/{circuit_id}/proofs": {"post": {
            "summary": "Request proofs: one per input object (witnesses computed by CPU workers) or per witness file",
            "parameters": [*_params("circuit_id"), _IDEMPOTENCY],
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": _ref("ProofsFromInputs")},
                "multipart/form-data": {"schema": _ref("ProofsFromWitnesses")}}},
            "responses": {"201": _json(_ref("Job"), "the job"),
                          "200": _json(_ref("Job"), "the job of this Idempotency-Key, submitted before"),
                          **_errors("circuit_not_found", "invalid_json", "invalid_multipart", "upload_timeout",
                                    "payload_too_large", "unsupported_media_type", "invalid_request",
                                    "invalid_inputs", "invalid_witness", "circuit_has_no_wasm", "quota_exceeded")}}},
        "/v1/jobs/{job_id}": {
            "get": {"summary": "A job: state, each partition's phase, failures, timings, producing workers",
                    "parameters": _params("job_id"),
                    "responses": {"200": _json(_ref("Job"), "the job"), **_errors("job_not_found")}},
            "delete": {"summary": "Cancel a job", "parameters": _params("job_id"),
                       "responses": {"200": _json(_ref("Cancelled"), "cancelled, or already over"),
                                     **_errors("job_not_found")}}},
        "/v1/jobs/{job_id}/events": {"get": {
            "summary": "Server-Sent Events until the job is over: status, partition, job, end (or lost)",
            "parameters": _params("job_id"),
            "responses": {"200": {"description": "text/event-stream; each data line is a JSON object",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                          **_errors("job_not_found")}}},
        "/v1/jobs/{job_id}/proofs/{index}": {"get": {
            "summary": "A verified proof with its public signals and provenance",
            "parameters": _params("job_id", "index"),
            "responses": {"200": _json(_ref("Proof"), "the proof"),
                          **_errors("job_not_found", "proof_not_found", "proof_not_ready")}}},
        "/v1/jobs/{job_id}/proofs/{index}/proof.json": {"get": {
            "summary": "proof.json, byte for byte as snarkjs writes it", "parameters": _params("job_id", "index"),
            "responses": {"200": _json({"type": "object"}, "proof.json"),
                          **_errors("job_not_found", "proof_not_found", "proof_not_ready")}}},
        "/v1/jobs/{job_id}/proofs/{index}/public.json": {"get": {
            "summary": "public.json, byte for byte as snarkjs writes it", "parameters": _params("job_id", "index"),
            "responses": {"200": _json({"type": "array", "items": {"type": "string"}}, "public.json"),
                          **_errors("job_not_found", "proof_not_found", "proof_not_ready")}}},
    }


@lru_cache(maxsize=1)
def document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "zkqueue", "version": "1",
                 "description": "Groth16 proofs (snarkjs-compatible) from a distributed proving queue. Every "
                                "endpoint but /healthz and /openapi.json takes an API key: "
                                "`Authorization: Bearer zkq_...` (`zkqueue api-keys create NAME`). "
                                "Errors are {\"error\": {\"code\", \"message\", \"detail\"}}."},
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}}},
        "security": [{"apiKey": []}],
        "paths": _paths(),
    }


@lru_cache(maxsize=1)
def document_bytes() -> bytes:
    """The document as served (encoded once per process)."""
    import json
    return json.dumps(document(), separators=(",", ":")).encode()

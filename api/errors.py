"""The API's one error shape, and the mapping of every failure to it.

Every error response is ``{"error": {"code", "message", "detail"}}`` with the status that
says whose fault it is: `code` is a stable machine-readable word (the OpenAPI document
lists them), `message` one line for a person, `detail` whatever helps (expected/found, the
partition, the missing files) or null. Handlers raise ApiError; `handlers()` turns it,
Starlette's HTTPException and anything unexpected into that shape, so no route writes an
error response by hand and no traceback reaches a client.
"""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger("zkqueue.api")

# Every code the API answers with, and its status (the OpenAPI document is built from this).
CODES = {
    "invalid_json": 400,          # the body is not JSON
    "invalid_multipart": 400,     # a multipart body that cannot be parsed, or has parts it should not
    "digest_mismatch": 400,       # an uploaded file does not hash to the sha256 sent with it
    "unauthorized": 401,          # no bearer token, or one that is unknown or revoked
    "not_found": 404,             # no such route
    "circuit_not_found": 404,     # unknown circuit, or one this key did not register
    "job_not_found": 404,         # unknown job, or another key's
    "proof_not_found": 404,       # no partition with that index
    "method_not_allowed": 405,
    "upload_timeout": 408,        # the client stopped sending an upload
    "upload_required": 409,       # files named by sha256 that the store does not have: send them
    "proof_not_ready": 409,       # that partition has no verified proof (yet, or ever)
    "payload_too_large": 413,     # over the server's or the key's upload limit, or the JSON limit
    "unsupported_media_type": 415,
    "invalid_request": 422,       # well-formed JSON that is not a valid request
    "invalid_inputs": 422,        # circuit inputs the witness calculator refuses (its message)
    "invalid_zkey": 422,          # not a Groth16 .zkey zkqueue proves (the reader's message)
    "invalid_wasm": 422,          # not a circom 2 witness calculator
    "invalid_r1cs": 422,
    "invalid_witness": 422,       # not a .wtns, or one of another curve or length than the circuit's
    "circuit_mismatch": 422,      # files of one circuit that do not belong together
    "circuit_has_no_wasm": 422,   # inputs sent for a circuit registered without its .wasm
    "quota_exceeded": 429,        # the key's proofs per hour are spent (Retry-After says when)
    "internal": 500,
    "unavailable": 503,           # Redis, a job's cell or the artifact store cannot be reached
    "timeout": 504,               # the request took longer than ZKQUEUE_API_REQUEST_TIMEOUT_S
}


class ApiError(Exception):
    """An error answered as {"error": {code, message, detail}} with CODES[code]'s status."""

    def __init__(self, code: str, message: str, detail=None, *, headers: dict | None = None):
        if code not in CODES:
            raise ValueError(f"unknown API error code {code!r}")
        super().__init__(message)
        self.code, self.message, self.detail, self.headers = code, message, detail, headers

    @property
    def status(self) -> int:
        return CODES[self.code]


def error_response(code: str, message: str, detail=None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "detail": detail}},
                        status_code=CODES[code], headers=headers)


def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc.code, exc.message, exc.detail, exc.headers)


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
               415: "unsupported_media_type"}


def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    # Starlette's own (an unknown route, a method the route does not have).
    code = _HTTP_CODES.get(exc.status_code, "invalid_request" if exc.status_code < 500 else "internal")
    return JSONResponse({"error": {"code": code, "message": exc.detail or code, "detail": None}},
                        status_code=exc.status_code, headers=getattr(exc, "headers", None))


def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return error_response("unavailable", f"the queue cannot be reached: {exc}")


def _cell_down(request: Request, exc) -> JSONResponse:
    # coordinator/cells.py's CellDown. The message names the cell, not its Redis URL: the
    # fleet's addresses are no business of an API client's.
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    if exc.job_id:
        message = f"the cell of job {exc.job_id} ({exc.cell}) cannot be reached; try again later"
    else:
        message = "no cell of the queue can be reached to take the job; try again later"
    return error_response("unavailable", message, {"cell": exc.cell})


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Starlette calls this from its outermost middleware and then re-raises, so the server
    # logs the traceback; the client gets one line.
    return error_response("internal", f"internal error ({type(exc).__name__}); the server log has the details")


def handlers() -> dict:
    """Starlette's exception_handlers for the app."""
    from kombu.exceptions import OperationalError
    from redis import RedisError

    from zkqueue.coordinator.cells import CellDown
    from zkqueue.coordinator.errors import StoreError
    return {ApiError: _api_error, HTTPException: _http_error, RedisError: _unavailable,
            StoreError: _unavailable, OperationalError: _unavailable, CellDown: _cell_down, Exception: _unexpected}


def from_groth16(code: str, exc: Exception, *, source: str | None = None, extra: dict | None = None) -> ApiError:
    """An ApiError carrying a proving-core error's own message and its expected/found."""
    message = str(exc)
    detail = {"error": type(exc).__name__}
    for attr in ("expected", "found"):
        value = getattr(exc, attr, None)
        if value is not None:
            detail[attr] = value if isinstance(value, (int, float, str, list)) else str(value)
    if source:
        detail["file"] = source
    detail.update(extra or {})
    return ApiError(code, message, detail)

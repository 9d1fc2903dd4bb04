"""What goes in and out of the API, declared once as pydantic models and annotated types.

The routes' table (api/routes.py: ENDPOINTS) names these for each route's path parameters,
headers, request bodies and responses; api/openapi.py generates the OpenAPI document from
that table alone, and the handlers check requests with the same models (`parse`), so the
document and the checks cannot drift apart. Responses are built by api/views.py; the
models say what they hold.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, WithJsonSchema

from zkqueue.coordinator.jobs import Priority

from .errors import CODES, ApiError

# -- path parameters and headers ---------------------------------------------------------------

CircuitId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$", description="32 hex digits")]
JobId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$", description="32 hex digits")]
PartitionIndex = Annotated[int, Field(ge=0, description="the partition (proof) index, from 0")]
# Every path parameter a route template may name ({circuit_id} ...), with its type.
PATH_PARAMS: dict[str, Any] = {"circuit_id": CircuitId, "job_id": JobId, "index": PartitionIndex}

IdempotencyKey = Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,200}$", description=(
    "1 to 200 printable ASCII characters, no spaces: the same key again returns the first job (200), "
    "whatever the body"))]

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hex digits")]
# A file part of a multipart body (streamed to the store by api/uploads.py, never validated
# here: api/capture.py checks its header as the bytes pass).
File = Annotated[Any, WithJsonSchema({"type": "string", "format": "binary"})]


def _switch(value):
    """A boolean option, from JSON (true/false) or a multipart field ("true"/"false")."""
    if value in (None, False, "false", "0"):
        return False
    if value in (True, "true", "1"):
        return True
    raise ValueError("true or false")


Switch = Annotated[bool, BeforeValidator(_switch)]
FormSwitch = Annotated[bool, BeforeValidator(_switch), WithJsonSchema({"type": "string", "enum": ["true", "false"]})]


class Body(BaseModel):
    """A request body: unknown fields are refused, not ignored (a typo would be silently lost)."""

    model_config = ConfigDict(extra="forbid")


# -- request bodies -----------------------------------------------------------------------------

class CircuitByHash(Body):
    """POST /v1/circuits as JSON: files already in the store, named by sha256."""

    zkey_sha256: Sha256
    wasm_sha256: Sha256 | None = None
    r1cs_sha256: Sha256 | None = None


class CircuitUpload(Body):
    """POST /v1/circuits as multipart: each file uploaded, or named by sha256; the .zkey is
    required either way."""

    zkey: File = None
    wasm: File = None
    r1cs: File = None
    zkey_sha256: Sha256 | None = None
    wasm_sha256: Sha256 | None = None
    r1cs_sha256: Sha256 | None = None


class ProofsFromInputs(Body):
    """POST /v1/circuits/{id}/proofs as JSON: CPU workers compute the witnesses."""

    inputs: list[Any] = Field(min_length=1, description="one input.json object per proof")
    priority: Priority = Priority.NORMAL
    all_or_nothing: Switch = Field(False, description="any failed partition fails the job (default: each proof "
                                                      "fails alone and the job delivers the others)")


class ProofsFromWitnesses(Body):
    """POST /v1/circuits/{id}/proofs as multipart: one witness file per proof."""

    witness: list[File] = Field(min_length=1, description="one .wtns per proof, in order")
    priority: Priority = Priority.NORMAL
    all_or_nothing: FormSwitch = False


# -- responses ----------------------------------------------------------------------------------

class ErrorBody(BaseModel):
    code: Literal[tuple(sorted(CODES))] = Field(description="a stable machine-readable word")
    message: str = Field(description="one line for a person (the proving core's own message for a bad file or "
                                     "input)")
    detail: Any = Field(description="expected/found, the partition (index), the missing files, ... or null")


class Error(BaseModel):
    """Every error response: {"error": {"code", "message", "detail"}}."""

    # Inline, not a reference: a client reads the one error shape in one place.
    error: Annotated[ErrorBody, WithJsonSchema(ErrorBody.model_json_schema())]


class Health(BaseModel):
    ok: bool


class Circuit(BaseModel):
    circuit_id: str
    curve: Literal["bn128", "bls12381"]
    n_public: int = Field(description="public signals (outputs, then public inputs)")
    n_vars: int = Field(description="witness length")
    domain_size: int
    zkey_bytes: int
    files: dict[str, str | None] = Field(description="sha256 of each file in the store")
    accepts: list[Literal["witnesses", "inputs"]]
    created_at: float
    uploaded: dict[str, Literal["stored", "already_stored", "named"]] | None = Field(
        None, description="POST only: per file, stored, already_stored or named")


class Partition(BaseModel):
    index: int
    state: str
    phase: str = Field(description="synthesizing, queued, proving, proved, verified or failed")
    attempts: int
    synth_attempts: int
    worker: str | None
    fingerprint: dict[str, Any] | None = Field(description="the producing worker's host, device, driver, backend "
                                                           "and build")
    timings_s: dict[str, Any]
    source: str | None = Field(description="the witness file (or input) it was made from")
    error: str | None = Field(description="why it failed, when it did")
    waiting: str | None = Field(default=None, description="why it waits holding no worker, e.g. the memory it "
                                                          "needs and the largest worker's")
    errors: list[dict[str, Any]] = Field(description="why attempts ended without a proof")
    proof: str | None = Field(description="the proof's URL once verified")


class JobError(BaseModel):
    message: str
    partition: int | str | None


class Job(BaseModel):
    job_id: str
    circuit_id: str
    state: str = Field(description="queued, running, done, done-with-failures (the other partitions' proofs are "
                                   "served), failed, cancelled")
    over: bool
    delivered: bool = Field(description="its verified proofs are served")
    priority: Priority
    idempotency_key: str | None
    n_partitions: int
    created_at: float
    finished_at: float | None
    error: JobError | None
    timings_s: dict[str, Any]
    partitions: list[Partition]
    invalid_proofs: list[dict[str, Any]]


class Proof(BaseModel):
    job_id: str
    index: int
    proof: dict[str, Any] = Field(description="proof.json's object")
    public: list[str] = Field(description="public.json's array")
    worker: str
    fingerprint: dict[str, Any]
    attempt: int
    timings_s: dict[str, Any]


class Cancelled(BaseModel):
    job_id: str
    cancelled: bool = Field(description="false: it was already over")
    state: str


# Files served as snarkjs writes them: their own formats, described, not modelled.
SnarkjsObject = Annotated[dict[str, Any], Field(description="a JSON object as snarkjs writes it")]
PublicSignals = Annotated[list[str], Field(description="public.json: decimal strings")]
EventStream = Annotated[str, Field(description="text/event-stream; each data line is a JSON object")]


# -- checking a request -------------------------------------------------------------------------

def parse(model: type[Body], data) -> Body:
    """`data` (a JSON body, or a multipart body's fields and files) as `model`.

    Raises:
        ApiError: invalid_request, naming the first field at fault (and how many more are).
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc, allowed=list(model.model_fields)) from None


def check_value(kind, value, message: str):
    """`value` as the annotated type `kind` (a header's, say).

    Raises:
        ApiError: invalid_request with `message`.
    """
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError:
        raise ApiError("invalid_request", message, {"found": str(value)[:240]}) from None


def _invalid(exc: ValidationError, allowed: list[str]) -> ApiError:
    errors = exc.errors(include_url=False, include_context=False)
    found = []
    for e in errors:
        field = ".".join(str(p) for p in e["loc"]) or "the body"
        if e["type"] == "extra_forbidden":
            message = f"unknown field (expected {', '.join(allowed)})"
        elif e["type"] == "missing":
            message = "required"
        else:
            message = e["msg"]
        item = {"field": field, "message": message}
        if isinstance(e.get("input"), (str, int, float, bool)) and e["type"] != "missing":
            item["found"] = e["input"] if not isinstance(e["input"], str) else e["input"][:240]
        found.append(item)
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return ApiError("invalid_request", f"{first['field']}: {first['message']}{more}", {"errors": found})

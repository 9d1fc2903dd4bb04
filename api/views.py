"""What a job looks like over HTTP: JSON views of Job.status() and Job.result().

Everything here reads the public Client/Job API only (coordinator/client.py), so a new job
state or partition state there shows here as its value without a change. A job the API
submitted carries its owner in its request id (coordinator/keys.py: api/{key}/{circuit}/
{idempotency key}); `owned_job` refuses every other job as not found, so a key cannot
learn whether another key's job exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zkqueue.coordinator.cells import Cells
from zkqueue.coordinator.client import Client, Job
from zkqueue.coordinator.errors import JobCancelled, JobFailed, JobNotFound
from zkqueue.coordinator.jobs import JobResult, JobStatus, SlotState

from .auth import ApiKey
from .errors import ApiError

REQUEST_PREFIX = "api"
# A worker names a bad file by its place in the store; a client knows it by its hash.
STORE_PATH = re.compile(r"\S*/sha256/[0-9a-f]{2}/([0-9a-f]{64})")


def public_message(message: str | None) -> str | None:
    """A queue message as a client may see it: store paths become "sha256:<hash>"."""
    return STORE_PATH.sub(r"sha256:\1", message) if message else message


def request_id(key: ApiKey, circuit_id: str, idempotency_key: str) -> str:
    """The request id of a job `key` submits for `circuit_id`."""
    return f"{REQUEST_PREFIX}/{key.id}/{circuit_id}/{idempotency_key}"


@dataclass(frozen=True)
class Owner:
    key_id: str
    circuit_id: str
    idempotency_key: str | None      # None when the client sent none (a random one was used)


def owner_of(st: JobStatus) -> Owner | None:
    parts = (st.request_id or "").split("/", 3)
    if len(parts) != 4 or parts[0] != REQUEST_PREFIX:
        return None
    given = parts[3]
    return Owner(parts[1], parts[2], None if given.startswith("auto:") else given)


def owned_job(jobs: Client | Cells, key: ApiKey, job_id: str) -> tuple[Job, JobStatus, Owner]:
    """The job and a fresh status of it, if `key` submitted it; `jobs` is the Client of the
    one Redis that holds jobs, or the Cells that do (the job's cell found from its id).

    Raises:
        ApiError: job_not_found (no such job, expired, submitted without the API, or another key's).
        CellDown: the cell the id names cannot be reached (answered 503, api/errors.py).
    """
    job, st = None, None
    if len(job_id) == 32:
        try:
            job = jobs.job(job_id) if isinstance(jobs, Cells) else Job(jobs, job_id)
            st = job.status()
        except JobNotFound:
            st = None
    owner = owner_of(st) if st is not None else None
    if owner is None or owner.key_id != key.id:
        raise ApiError("job_not_found", f"no job {job_id}", {"job_id": job_id})
    return job, st, owner


def verified_results(job: Job, st: JobStatus) -> dict[int, object]:
    """index -> PartitionResult of every partition whose proof was verified and released.

    Job.result() answers for a job whose proofs are released (done, or done-with-failures:
    the partitions that did not fail); for any other job there is none.
    """
    if not any(p.state == SlotState.VERIFIED for p in st.partitions):
        return {}
    try:
        result: JobResult = job.result()
    except (JobFailed, JobCancelled, JobNotFound):
        return {}
    return {p.index: p for p in result.partitions}


def _partition_view(p, results: dict, job_id: str) -> dict:
    res = results.get(p.index)
    return {
        "index": p.index, "state": p.state.value, "phase": p.phase, "attempts": p.attempts,
        "synth_attempts": p.synth_attempts, "worker": p.worker,
        "fingerprint": res.fingerprint if res is not None else None,
        "timings_s": p.timings_s,
        "source": p.source,           # the witness file (or input) it was made from
        "error": public_message(p.error),    # why it failed, when it did
        "waiting": p.waiting,                 # why it waits holding no worker (parked)
        # Why an attempt ended without a proof (lost lease, hang, invalid proof, bad input).
        "errors": [{k: public_message(e[k]) if k == "reason" else e[k]
                    for k in ("event", "reason", "worker", "attempt", "at") if k in e}
                   for e in p.events if "reason" in e],
        "proof": f"/v1/jobs/{job_id}/proofs/{p.index}" if res is not None else None,
    }


def job_view(st: JobStatus, owner: Owner, results: dict) -> dict:
    """GET /v1/jobs/{id}'s body."""
    slot = st.error_slot
    return {
        "job_id": st.job_id, "circuit_id": owner.circuit_id, "state": st.state.value,
        "over": st.state.over, "delivered": st.state.delivered, "priority": st.priority.value, "idempotency_key": owner.idempotency_key,
        "n_partitions": st.n_partitions, "created_at": st.created_at, "finished_at": st.finished_at,
        "error": None if not st.error else {
            "message": public_message(st.error), "partition": int(slot) if slot and slot.isdigit() else slot},
        "timings_s": st.timings_s,
        "partitions": [_partition_view(p, results, st.job_id) for p in st.partitions],
        "invalid_proofs": st.bad_workers,
    }


def proof_view(job_id: str, res) -> dict:
    """GET /v1/jobs/{id}/proofs/{i}'s body: proof.json and public.json's objects and provenance."""
    return {"job_id": job_id, "index": res.index, "proof": res.proof, "public": res.public_signals,
            "worker": res.worker, "fingerprint": res.fingerprint, "attempt": res.attempt, "timings_s": res.timings_s}

"""Proof requests: check what the client sent against its circuit, charge the key's quota,
store the files and submit the job (Client.submit_stored). Every function blocks (Redis,
the store, the witness calculator): the routes call them off the event loop.
"""

from __future__ import annotations

import json

from zkqueue.coordinator.cells import Cells
from zkqueue.coordinator.client import Client
from zkqueue.coordinator.errors import BadRequest
from zkqueue.coordinator.jobs import Priority

from . import circuits, models, views
from .auth import ApiKey, KeyStore, QuotaExceeded
from .capture import check
from .errors import ApiError, from_groth16
from .uploads import Form

# A proof request's options besides its inputs or witnesses: a JSON body's fields, or a
# multipart body's plain fields (as api/models.py declares them).
OPTIONS = tuple(name for name in models.ProofsFromWitnesses.model_fields if name != "witness")


def existing_job(jobs: Client | Cells, key: ApiKey, rid: str) -> dict | None:
    """The view of the job `key` submitted under request id `rid` before, if any (`jobs`: the
    Client of the Redis that holds jobs, or the Cells that do)."""
    if isinstance(jobs, Cells):
        found = jobs.existing(rid)
        job_id = found.id if found is not None else None
    else:
        from zkqueue.coordinator import keys
        raw = jobs.r.get(keys.request(rid))
        job_id = raw.decode() if raw is not None else None
    if job_id is None:
        return None
    job, st, owner = views.owned_job(jobs, key, job_id)
    return views.job_view(st, owner, views.verified_results(job, st))


class Submitter:
    """Submits proof requests for API keys: the circuits and files through `client` (its
    Redis, the store), the jobs through `jobs` (the same Client, or the Cells that hold
    jobs), charging `keystore`'s quotas, at most `max_partitions` proofs a request."""

    def __init__(self, client: Client, keystore: KeyStore, max_partitions: int, *,
                 jobs: Client | Cells | None = None):
        self.client, self.keystore, self.max_partitions = client, keystore, max_partitions
        self.jobs = jobs or client

    def _count(self, n: int, what: str) -> None:
        if not 1 <= n <= self.max_partitions:
            raise ApiError("invalid_request", f"send 1 to {self.max_partitions} {what}",
                           {"expected": f"1..{self.max_partitions}", "found": n})

    def inputs(self, key: ApiKey, cid: str, body: models.ProofsFromInputs, rid: str) -> tuple[dict, bool]:
        """A JSON request (checked by its model): each input checked by the circuit's own
        witness calculator before any job exists. Returns (the job's view, True)."""
        from zkqueue.groth16.errors import InputError
        from zkqueue.groth16.witness import parse_inputs

        store = self.client.store
        circuit = circuits.get(self.client.r, key, cid)
        self._count(len(body.inputs), "inputs")
        if not circuit.wasm:
            raise ApiError("circuit_has_no_wasm", f"circuit {cid} was registered without its .wasm: send witnesses, "
                           "or register the circuit with its .wasm", {"circuit_id": cid})
        calc = circuits.calculator(store.url, circuit.wasm, circuit.wasm_name)
        encoded = []
        for i, item in enumerate(body.inputs):
            source = f"inputs[{i}]"
            data = json.dumps(item).encode()
            try:
                # The witness calculator's own checks and messages, before any job exists.
                calc.check_inputs(parse_inputs(data, source=source), source=source)
            except InputError as exc:
                raise from_groth16("invalid_inputs", exc, extra={"index": i}) from None
            encoded.append((data, source))
        return self._submit(key, circuit, rid, body.priority, body.all_or_nothing, len(encoded),
                            lambda: {"inputs": [(store.put_bytes(d), name) for d, name in encoded],
                                     "wasm_sha": circuit.wasm, "wasm_name": circuit.wasm_name})

    def witnesses(self, key: ApiKey, cid: str, form: Form, rid: str) -> tuple[dict, bool]:
        """A multipart request: its fields checked by their model, each witness's header
        against the circuit. Returns (the job's view, True)."""
        try:
            circuit = circuits.get(self.client.r, key, cid)
            opts = models.parse(models.ProofsFromWitnesses, {**form.fields, "witness": form.files})
            self._count(len(form.files), "witness files")
            from zkqueue.groth16.errors import InputError
            for i, part in enumerate(form.files):
                try:
                    meta = check("wtns", part.capture, part.filename).meta
                except InputError as exc:
                    raise from_groth16("invalid_witness", exc, source=part.filename, extra={"index": i}) from None
                if meta["curve"] != circuit.curve or meta["n_witness"] != circuit.n_vars:
                    raise ApiError("invalid_witness", f"{part.filename}: a {meta['curve']} witness of "
                                   f"{meta['n_witness']} values; circuit {cid} takes {circuit.curve} witnesses of "
                                   f"{circuit.n_vars}", {"index": i, "file": part.filename,
                                                         "expected": [circuit.curve, circuit.n_vars],
                                                         "found": [meta["curve"], meta["n_witness"]]})
            # Each witness keeps its file name: the queue's messages about it name it so.
            return self._submit(key, circuit, rid, opts.priority, opts.all_or_nothing, len(form.files),
                                lambda: {"witnesses": [(part.upload.commit()[0], part.filename)
                                                       for part in form.files]})
        finally:
            form.abort()

    def _submit(self, key: ApiKey, circuit, rid: str, priority: Priority, all_or_nothing: bool, n: int,
                files) -> tuple[dict, bool]:
        """Charges the key's quota, stores the files (`files()`), submits with the circuit's
        .r1cs (a worker whose proof fails its own check names the broken constraint); refunds
        the quota on failure."""
        try:
            self.keystore.charge(key, n)
        except QuotaExceeded as exc:
            raise ApiError("quota_exceeded", str(exc), {"limit": exc.limit, "used": exc.used, "asked": n,
                                                         "retry_after_s": exc.retry_after_s},
                           headers={"Retry-After": str(exc.retry_after_s)}) from None
        try:
            shape = {"curve": circuit.curve, "domain_size": circuit.domain_size, "n_vars": circuit.n_vars,
                     "n_public": circuit.n_public, "zkey_bytes": circuit.zkey_bytes}
            job = self.jobs.submit_stored(circuit.zkey, priority=priority, request_id=rid, r1cs_sha=circuit.r1cs,
                                            all_or_nothing=all_or_nothing, key_shape=shape, **files())
        except BadRequest as exc:
            self.keystore.refund(key, n)
            raise ApiError("invalid_request", str(exc)) from None
        except BaseException:
            self.keystore.refund(key, n)
            raise
        job, st, owner = views.owned_job(self.jobs, key, job.id)
        return views.job_view(st, owner, {}), True

"""Independent verification of recorded proofs: a proof is checked against the key's
verification key, and its public signals against its witness's own, by a process other than
the one that produced it (a worker that corrupts a proof after its own check is caught).

Two places run it: workers as they record (record.lua hands each recording worker a few
proofs other workers recorded; this worker's verdicts ride along with its next record of the
job, as check marks), and finalize, which verifies only what carries no mark under its
current token, so the time from the last proof to the result does not grow with the job.
"""

from __future__ import annotations

import json
import logging

from zkqueue.coordinator.replies import ToCheck
from zkqueue.groth16.errors import Groth16Error
from zkqueue.groth16.formats.jsonfiles import proof_from_json

from . import context

log = logging.getLogger("zkqueue.checks")

# Jobs whose check marks a worker keeps until its next record of them.
MARKED_JOBS = 64
# Other workers' proofs a worker takes to verify per proof it records, on average: more than
# one, so the list of unchecked proofs drains while the job runs (to_take).
TAKE_PER_PROOF = 2


def verify_results(ctx: context.Context, zkey_sha: str, items: list[tuple[int, dict, str]]
                   ) -> tuple[list[dict], list[int]]:
    """Verifies each (index, result, witness sha256): (the invalid ones, as finalize reports
    them: index, worker, fingerprint, reason; the indices of the valid ones)."""
    from zkqueue.groth16 import verifier
    from zkqueue.groth16.formats.wtns import read_wtns

    key, _ = ctx.prover.key(zkey_sha, lambda: ctx.store.local_path(zkey_sha))
    bad, checked, proofs, publics = [], [], [], []
    for i, res, witness in items:
        # The public signals must be the witness's own, not whatever the worker reported.
        expected = [str(s) for s in read_wtns(ctx.store.local_path(witness)).public_signals(key.n_public)]
        try:
            proof = proof_from_json(res["proof"], source=f"partition {i}'s proof")
            if proof.curve is not key.curve:
                raise ValueError(f"a proof on {proof.curve.name}, the key is on {key.curve.name}")
            if res["public"] != expected:
                raise ValueError("public signals differ from the witness's")
        except (ValueError, KeyError, TypeError, Groth16Error) as exc:
            # One worker's bad result is that worker's fault: re-prove it, never fail the job.
            bad.append({"index": i, "worker": res.get("worker"), "fingerprint": res.get("fingerprint"),
                        "reason": f"malformed result: {exc}"})
            continue
        checked.append((i, res))
        proofs.append(proof)
        publics.append([int(s) for s in expected])
    valid = []
    if proofs:
        for (i, res), ok in zip(checked, verifier.verify_batch(key.verification_key, proofs, publics)):
            if ok:
                valid.append(i)
            else:
                bad.append({"index": i, "worker": res["worker"], "fingerprint": res["fingerprint"],
                            "reason": "proof does not verify"})
    return sorted(bad, key=lambda b: b["index"]), valid


def check_others(ctx: context.Context, job_id: str, zkey_sha: str, to_check: tuple[ToCheck, ...]) -> None:
    """Verifies the proofs another worker recorded that this worker was handed, and keeps a
    mark for each valid one until its next record of the job. An invalid one gets no mark:
    finalize verifies it again and has it re-proved. Never raises (a check that cannot run is
    left to finalize)."""
    if not to_check:
        return
    try:
        items = [(c.index, json.loads(c.result), c.witness) for c in to_check]
        bad, valid = verify_results(ctx, zkey_sha, items)
    except Exception as exc:  # noqa: BLE001 - finalize verifies whatever is not marked
        log.warning("job %s: could not check partitions %s: %s", job_id, [c.index for c in to_check], exc)
        return
    for b in bad:
        log.warning("job %s partition %d: %s (worker %s); left to finalize", job_id, b["index"], b["reason"],
                    b["worker"])
    tokens = {c.index: c.token for c in to_check}
    marks = ctx.check_marks.setdefault(job_id, [])
    marks.extend((i, tokens[i]) for i in valid)
    while len(ctx.check_marks) > MARKED_JOBS:
        ctx.check_marks.pop(next(iter(ctx.check_marks)))


def take_marks(ctx: context.Context, job_id: str) -> list[tuple[int, int]]:
    """The check marks this worker holds for the job, handed to its record (and forgotten)."""
    return ctx.check_marks.pop(job_id, [])


def to_take(marks: list[tuple[int, int]], proofs: int = 1) -> int:
    """How many of other workers' proofs a record of `proofs` proofs that carries `marks` takes
    to verify: none when it carries marks, twice its share when it carries none. A worker's
    records then alternate, and two of them cost the record script one write of marks and one
    read of proofs to check, not one of each every record; as many proofs are checked."""
    return 0 if marks else 2 * TAKE_PER_PROOF * proofs

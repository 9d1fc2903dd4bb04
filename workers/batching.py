"""How many partitions of one key a worker claims at once (the batch claim's B).

Small circuits (up to about 2^16 constraints) prove in a few milliseconds of GPU work behind
fixed per-proof costs (a claim, a record, the host's share of a proof); a GPU worker claims
up to B partitions of such a key in one transition (coordinator/lua/claim_batch.lua) and
proves them in one device pass (groth16/backends/cuda_prove.prove_batch). Larger keys are
claimed one at a time: one proof already fills the device.

This module only decides B; it reads nothing from Redis and loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

# Keys up to this many constraints (log2 of the domain) are batched.
MAX_BATCHED_LOG2 = 16
# B on a GPU when the worker was not told (`zkqueue worker --batch N`).
GPU_DEFAULT_BATCH = 16
# A GPU batch's device memory per proof, in 32-byte field elements per domain row: the
# witness, A, B, C and H (5n), the MSMs' scalars and sort buffers (a few n each); a
# deliberately generous model until the memory-admission work measures it.
DEVICE_WORDS_PER_ROW = 24
# The share of the device's free memory a batch may plan to use.
DEVICE_SHARE = 0.5


@dataclass(frozen=True)
class KeyShape:
    """What B depends on about a key: log2 of its domain and its number of signals."""

    log2_domain: int
    n_vars: int


# Larger keys on a GPU: two partitions claimed at once and proved in turn, so the second's
# witness is fetched and read while the first proves (a pipeline, not a batch).
PIPELINE_DEPTH = 2


def proves_together(shape: KeyShape) -> bool:
    """Whether a batch of this key goes through the device in one pass (small keys), or its
    members are proved in turn with the next witness read ahead (larger keys)."""
    return shape.log2_domain <= MAX_BATCHED_LOG2


def batch_limit(shape: KeyShape | None, *, backend: str, requested: int | None,
                device_free_bytes: int | None = None) -> int:
    """B for a partition of a key of `shape` on this worker (at least 1).

    `requested`: the worker's `--batch N` (None: the default, GPU_DEFAULT_BATCH on a GPU and
    1 on a CPU, which may be told a B > 1 to amortise its per-partition costs; 1 turns
    batching and pipelining off). `shape` None (not known yet) claims one. A key larger than
    2^MAX_BATCHED_LOG2 is not batched: on a GPU it is pipelined (PIPELINE_DEPTH), elsewhere
    claimed alone. On a GPU, a batch is also capped by what its proofs need next to the free
    device memory (DEVICE_WORDS_PER_ROW per domain row, DEVICE_SHARE of what is free).

    Memory admission (a worker leaving a partition whose key does not fit it at all, without
    spending an attempt) is decided before this, by the caller: this returns B for a key that
    fits.
    """
    if shape is None or requested == 1:
        return 1
    if not proves_together(shape):
        return PIPELINE_DEPTH if backend == "cuda" else 1
    b = requested if requested is not None else (GPU_DEFAULT_BATCH if backend == "cuda" else 1)
    if backend == "cuda" and device_free_bytes:
        per_proof = 32 * (DEVICE_WORDS_PER_ROW * (1 << shape.log2_domain) + shape.n_vars)
        b = min(b, int(device_free_bytes * DEVICE_SHARE) // per_proof)
    return max(1, b)

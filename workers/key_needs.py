"""How much memory a partition of a proving key needs on this worker's backend, from the
.zkey's header alone (before the key is fetched or loaded): what admission compares with what
a worker has free (workers/memory.py).

The CPU prover maps the key and reads every point section once per proof, so the key's bytes
become resident; beside them it holds the witness, the NTT's evaluation vectors over the
domain and the MSM's per-point scratch. The model is linear in those sizes, with constants
fitted to measured peaks (`bench/key_memory --fit`, see docs/operations.md) and rounded up:
admission must not let a worker take a key it cannot hold, so the estimate errs high.
"""

from __future__ import annotations

FIXED_BYTES = 24 << 20          # the proof's own fixed costs: thread stacks, verifier, Python objects
DOMAIN_SCALARS = 8              # scalar-field vectors of the domain's length alive at the NTT's peak
POINT_SCRATCH_BYTES = 16        # per MSM point: signed digits and bucket indices


def host_terms(header, *, threads: int) -> tuple[float, float, float, float]:
    """The model's terms for `header` (a ZKeyHeader): 1, key bytes, domain x scalar bytes,
    points of the largest MSM; needs = the dot product with the constants."""
    return (1.0, float(len(header.file.data)), float(header.domain_size * header.curve.n8r),
            float(max(header.n_vars, header.domain_size)))


def host_needs(header, *, threads: int = 1) -> int:
    """Bytes a CPU worker needs beyond its idle self to prove one partition of this key."""
    fixed, key, domain, points = host_terms(header, threads=threads)
    return int(FIXED_BYTES * fixed + key + DOMAIN_SCALARS * domain + POINT_SCRATCH_BYTES * points * threads)

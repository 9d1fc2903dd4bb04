"""How much memory one partition of a proving key needs on a worker's backend, from the key's
shape alone (curve, domain size, signals, file size: the .zkey header), before the key is
fetched or loaded: what admission compares with the room a worker has (workers/memory.py).

CPU: the prover maps the key and reads every point section once per proof, so the key's bytes
become resident; beside them it holds the witness, the NTT's evaluation vectors over the
domain and the MSM's per-point scratch. Fixed-base MSM tables are not counted: a worker builds
them only in the room its limit leaves beside the proof (workers/proving.py). The constants
are fitted to measured peaks
(`bench/key_memory --fit`, figures in docs/operations.md) and rounded up: admission must not
let a worker take a key it cannot hold, so the estimate errs high.

CUDA: the key's point sections and coefficient index live on the device beside the witness,
the NTT buffers and the MSM's sort arrays. That estimate is from the buffers cuda_prove.py
allocates, not yet checked against a GPU's measured peak.
"""

from __future__ import annotations

from dataclasses import dataclass

CPU_FIXED_BYTES = 10 << 20      # a proof's own fixed costs: thread stacks, verifier, Python objects
CPU_KEY_FACTOR = 1.6            # the mapped key and what its checks and transforms copy of it
CPU_DOMAIN_SCALARS = 8          # scalar-field vectors of the domain's length alive at the NTT's peak
CPU_POINT_SCRATCH = 16          # bytes per MSM point and thread: signed digits, bucket indices
CUDA_DOMAIN_SCALARS = 6         # device NTT buffers: a, b, c, twiddles, coset twiddles, scratch
CUDA_SORT_BYTES = 8 * 16        # per point: (bucket, point) pairs of ~16 windows, 8 bytes each
CUDA_HOST_FIXED_BYTES = 64 << 20


@dataclass(frozen=True)
class KeyShape:
    """What admission knows of a key: its curve, sizes and file size (from the .zkey header)."""
    curve: str
    domain_size: int
    n_vars: int
    n_public: int
    zkey_bytes: int

    @classmethod
    def of_header(cls, header) -> "KeyShape":
        """The shape of a ZKeyHeader (groth16.formats.zkey.read_header)."""
        return cls(header.curve.name, header.domain_size, header.n_vars, header.n_public, len(header.file.data))

    def as_fields(self) -> dict[str, str]:
        """As a Redis hash's fields."""
        return {"curve": self.curve, "domain_size": str(self.domain_size), "n_vars": str(self.n_vars),
                "n_public": str(self.n_public), "zkey_bytes": str(self.zkey_bytes)}

    @classmethod
    def from_fields(cls, fields: dict) -> "KeyShape | None":
        """From a Redis hash's fields (bytes or str); None when they are missing."""
        get = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
               for k, v in (fields or {}).items()}
        try:
            return cls(get["curve"], int(get["domain_size"]), int(get["n_vars"]), int(get["n_public"]),
                       int(get["zkey_bytes"]))
        except (KeyError, ValueError):
            return None


def cpu_terms(shape: KeyShape, *, threads: int) -> tuple[float, float, float, float]:
    """The CPU model's terms: 1, key bytes, domain x 32 (scalar bytes), MSM points x threads."""
    return (1.0, float(shape.zkey_bytes), float(shape.domain_size * 32),
            float(max(shape.n_vars, shape.domain_size) * max(1, threads)))


def host_needs(shape: KeyShape, backend: str, *, threads: int = 1) -> int:
    """Host bytes a worker of `backend` needs beyond its idle self to prove one partition."""
    if backend == "cuda":   # the key is staged through pinned memory section by section
        return CUDA_HOST_FIXED_BYTES + shape.n_vars * 32 + shape.zkey_bytes // 8
    one, key, domain, points = cpu_terms(shape, threads=threads)
    return int(CPU_FIXED_BYTES * one + CPU_KEY_FACTOR * key + CPU_DOMAIN_SCALARS * domain + CPU_POINT_SCRATCH * points)


def needs_by_backend(shape: KeyShape, *, threads: int = 2) -> dict[str, int]:
    """What a partition of this key needs on each kind of worker: host bytes on a CPU worker
    ("cpu") and on a GPU worker ("cuda"), and the GPU's own bytes ("device"); the scheduler
    compares them with the workers' heartbeats (coordinator/scheduler.has_room)."""
    return {"cpu": host_needs(shape, "cpu", threads=threads), "cuda": host_needs(shape, "cuda"),
            "device": device_needs(shape)}


def device_needs(shape: KeyShape) -> int:
    """GPU bytes a CUDA worker needs for the key's sections and one partition's buffers."""
    points = max(shape.n_vars, shape.domain_size)
    return int(shape.zkey_bytes + CUDA_DOMAIN_SCALARS * shape.domain_size * 32 + CUDA_SORT_BYTES * points)

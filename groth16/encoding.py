"""Conversions between Python integers and the byte encodings the files and kernels use.

Points in Python are affine tuples of standard-form integers, with ``None`` for the point
at infinity: G1 ``(x, y)``, G2 ``((x0, x1), (y0, y1))`` (Fq2 = c0 + c1*u). In bytes they are
snarkjs's "LEM" encoding: each coordinate in Montgomery form, little endian, n8q bytes,
infinity as all zeros. The native kernels read and write exactly this encoding, so key
material from a .zkey reaches them without conversion.
"""

from __future__ import annotations

from .curves import Curve

G1 = tuple[int, int] | None
G2 = tuple[tuple[int, int], tuple[int, int]] | None


def _mont_q(curve: Curve) -> int:
    return pow(2, 8 * curve.n8q, curve.q)


def fq_to_lem(curve: Curve, x: int) -> bytes:
    return (x * _mont_q(curve) % curve.q).to_bytes(curve.n8q, "little")


def fq_from_lem(curve: Curve, data: bytes) -> int:
    return int.from_bytes(data, "little") * pow(_mont_q(curve), -1, curve.q) % curve.q


def g1_to_lem(curve: Curve, p: G1) -> bytes:
    if p is None:
        return bytes(curve.g1_bytes)
    return fq_to_lem(curve, p[0]) + fq_to_lem(curve, p[1])


def g1_from_lem(curve: Curve, data: bytes) -> G1:
    n = curve.n8q
    if not any(data[:2 * n]):
        return None
    return fq_from_lem(curve, data[:n]), fq_from_lem(curve, data[n:2 * n])


def g2_to_lem(curve: Curve, p: G2) -> bytes:
    if p is None:
        return bytes(curve.g2_bytes)
    (x0, x1), (y0, y1) = p
    return b"".join(fq_to_lem(curve, v) for v in (x0, x1, y0, y1))


def g2_from_lem(curve: Curve, data: bytes) -> G2:
    n = curve.n8q
    if not any(data[:4 * n]):
        return None
    x0, x1, y0, y1 = (fq_from_lem(curve, data[i * n:(i + 1) * n]) for i in range(4))
    return (x0, x1), (y0, y1)


def scalar_to_bytes(curve: Curve, k: int) -> bytes:
    """A scalar in standard form, 32 bytes little endian (the MSM kernels' input)."""
    return (k % curve.r).to_bytes(curve.n8r, "little")


def scalars_to_bytes(curve: Curve, ks: list[int]) -> bytes:
    return b"".join(scalar_to_bytes(curve, k) for k in ks)

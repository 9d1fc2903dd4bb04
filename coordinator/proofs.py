"""proof.json objects (as stored in a job's results) back into groth16 Proofs, strictly."""

from __future__ import annotations

from zkqueue.groth16 import curves
from zkqueue.groth16.model import Proof


def _num(v, bound: int) -> int:
    if not (isinstance(v, str) and v.isdigit()):
        raise ValueError(f"expected a decimal string, found {v!r}")
    n = int(v)
    if n >= bound:
        raise ValueError(f"{n} is not below the field prime")
    return n


def _g1(v, q: int):
    x, y, z = (_num(c, q) for c in v)
    if z == 0:
        return None
    if z != 1:
        raise ValueError("G1 point is not affine")
    return x, y


def _g2(v, q: int):
    (x0, x1), (y0, y1), (z0, z1) = ((_num(c, q) for c in pair) for pair in v)
    if (z0, z1) == (0, 0):
        return None
    if (z0, z1) != (1, 0):
        raise ValueError("G2 point is not affine")
    return (x0, x1), (y0, y1)


def proof_from_json(obj: dict) -> Proof:
    """The Proof a snarkjs proof.json object describes.

    Raises:
        ValueError: not a groth16 proof, an unknown curve, or a malformed point.
    """
    try:
        if obj.get("protocol") != "groth16":
            raise ValueError(f"protocol {obj.get('protocol')!r} is not groth16")
        curve = curves.by_name(obj["curve"])
        q = curve.q
        return Proof(curve=curve, a=_g1(obj["pi_a"], q), b=_g2(obj["pi_b"], q), c=_g1(obj["pi_c"], q))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed proof: {exc!r}") from None
    except ValueError:
        raise
    except Exception as exc:   # curves.by_name's own error type
        raise ValueError(str(exc)) from None

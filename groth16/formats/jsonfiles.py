"""verification_key.json, proof.json and public.json, exactly as snarkjs 0.7.6 writes them.

Numbers are decimal strings in standard form. G1 is [x, y, "1"], G2 is
[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]; infinity is ["0", "1", "0"] and
[["0","0"],["1","0"],["0","0"]]. Files are written with one-space indentation, as
JSON.stringify(obj, null, 1) does.
"""

from __future__ import annotations

import os

from .. import curves
from ..curves import Curve
from ..encoding import G1, G2, g1_from_lem, g2_from_lem
from ..errors import FormatError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; importing typing costs `zkqueue prove` 2.5 ms
if TYPE_CHECKING:  # and pathlib, which costs it ~10 ms more (re, enum, urllib.parse)
    from pathlib import Path
    from typing import Any

    from ..model import Proof, VerificationKey

# json and groth16/model.py (dataclasses) are imported by the readers below: `zkqueue prove`
# only writes (write_json), and needs neither.

G1_INF = ["0", "1", "0"]
G2_INF = [["0", "0"], ["1", "0"], ["0", "0"]]


class _Parser:
    """Reads numbers and points from parsed JSON, with errors naming the file and field."""

    def __init__(self, path: str, curve: Curve | None = None):
        self.path = path
        self.curve = curve

    def fail(self, field: str, what: str, found: Any = None) -> FormatError:
        return FormatError(f"{field}: {what}", path=self.path, found=found)

    def num(self, value: Any, field: str, bound: int) -> int:
        if isinstance(value, str) and value.isdigit():
            n = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            raise self.fail(field, f"expected a decimal string, found {value!r}", value)
        if not 0 <= n < bound:
            raise self.fail(field, f"{n} is not a field element (must be below {bound})", n)
        return n

    def g1(self, value: Any, field: str) -> G1:
        q = self.curve.q
        if not (isinstance(value, list) and len(value) == 3):
            raise self.fail(field, "expected a G1 point [x, y, z]", value)
        x, y, z = (self.num(v, f"{field}[{i}]", q) for i, v in enumerate(value))
        if z == 0:
            return None
        if z != 1:
            raise self.fail(field, f"expected an affine point (z = 1 or 0), found z = {z}", z)
        return x, y

    def g2(self, value: Any, field: str) -> G2:
        q = self.curve.q
        if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, list) and len(v) == 2
                                                                      for v in value)):
            raise self.fail(field, "expected a G2 point [[x0, x1], [y0, y1], [z0, z1]]", value)
        (x0, x1), (y0, y1), (z0, z1) = ((self.num(c, f"{field}[{i}][{j}]", q) for j, c in enumerate(v))
                                        for i, v in enumerate(value))
        if (z0, z1) == (0, 0):
            return None
        if (z0, z1) != (1, 0):
            raise self.fail(field, f"expected an affine point (z = [1, 0] or [0, 0]), found {[z0, z1]}")
        return (x0, x1), (y0, y1)


def _load(path: str | Path) -> Any:
    import json  # noqa: PLC0415

    try:
        with open(path) as f:
            return json.loads(f.read())
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror}", path=path) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"not valid JSON: {exc}", path=path) from exc


def _curve_of(obj: dict, path: str, kind: str) -> Curve:
    if not isinstance(obj, dict):
        raise FormatError(f"expected a {kind} object", path=path, found=type(obj).__name__)
    if obj.get("protocol") != "groth16":
        raise FormatError(f"protocol is {obj.get('protocol')!r}, expected \"groth16\"", path=path,
                          expected="groth16", found=obj.get("protocol"))
    name = obj.get("curve")
    if not isinstance(name, str):
        raise FormatError("missing \"curve\"", path=path)
    try:
        return curves.by_name(name)
    except Exception as exc:
        raise FormatError(str(exc), path=path, found=name) from None


def _field(obj: dict, key: str, path: str) -> Any:
    if key not in obj:
        raise FormatError(f"missing \"{key}\"", path=path, expected=key)
    return obj[key]


def load_verification_key(path: str | Path) -> VerificationKey:
    """Reads a snarkjs verification_key.json.

    Raises:
        FormatError: unreadable, not groth16, unknown curve, or a malformed field (named).
    """
    from ..model import VerificationKey  # noqa: PLC0415

    path = str(path)
    obj = _load(path)
    curve = _curve_of(obj, path, "verification key")
    p = _Parser(path, curve)
    ic_list = _field(obj, "IC", path)
    if not isinstance(ic_list, list) or not ic_list:
        raise FormatError("\"IC\" must be a non-empty list of G1 points", path=path)
    vk = VerificationKey(
        curve=curve,
        alpha1=p.g1(_field(obj, "vk_alpha_1", path), "vk_alpha_1"),
        beta2=p.g2(_field(obj, "vk_beta_2", path), "vk_beta_2"),
        gamma2=p.g2(_field(obj, "vk_gamma_2", path), "vk_gamma_2"),
        delta2=p.g2(_field(obj, "vk_delta_2", path), "vk_delta_2"),
        ic=tuple(p.g1(pt, f"IC[{i}]") for i, pt in enumerate(ic_list)),
    )
    n_public = obj.get("nPublic", vk.n_public)
    if n_public != vk.n_public:
        raise FormatError(f"nPublic is {n_public} but IC has {len(ic_list)} points (expected nPublic + 1)",
                          path=path, expected=len(ic_list) - 1, found=n_public)
    return vk


def load_proof(path: str | Path) -> Proof:
    """Reads a snarkjs proof.json.

    Raises:
        FormatError: unreadable, not groth16, unknown curve, or a malformed point (named).
    """
    path = str(path)
    return proof_from_json(_load(path), source=path)


def proof_from_json(obj: Any, *, source: str = "proof.json") -> Proof:
    """The Proof a parsed proof.json object describes (a file's, or one a worker recorded in
    a job's results), checked as strictly as a file: groth16, a known curve, every
    coordinate a field element, affine points. `source` names it in errors.

    Raises:
        FormatError: not groth16, unknown curve, or a malformed point (named).
    """
    from ..model import Proof  # noqa: PLC0415

    curve = _curve_of(obj, source, "proof")
    p = _Parser(source, curve)
    return Proof(curve=curve, a=p.g1(_field(obj, "pi_a", source), "pi_a"),
                 b=p.g2(_field(obj, "pi_b", source), "pi_b"), c=p.g1(_field(obj, "pi_c", source), "pi_c"))


def load_public(path: str | Path, curve: Curve | None = None) -> list[int]:
    """Reads public.json: a list of decimal strings (below r when `curve` is given).

    Raises:
        FormatError: unreadable, not a list, or an entry that is not a decimal number below r.
    """
    path = str(path)
    obj = _load(path)
    if not isinstance(obj, list):
        raise FormatError("expected a list of decimal strings", path=path, found=type(obj).__name__)
    bound = curve.r if curve else 1 << 256
    parser = _Parser(path, curve)
    return [parser.num(v, f"public[{i}]", bound) for i, v in enumerate(obj)]


def g1_json(p: G1) -> list[str]:
    return list(G1_INF) if p is None else [str(p[0]), str(p[1]), "1"]


def g2_json(p: G2) -> list[list[str]]:
    if p is None:
        return [list(v) for v in G2_INF]
    (x0, x1), (y0, y1) = p
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def proof_json(proof: Proof) -> dict:
    """proof.json's object, with snarkjs's key order."""
    return {"pi_a": g1_json(proof.a), "pi_b": g2_json(proof.b), "pi_c": g1_json(proof.c),
            "protocol": "groth16", "curve": proof.curve.name}


def proof_json_lem(curve: Curve, pi_a: bytes, pi_b: bytes, pi_c: bytes) -> dict:
    """proof_json of a proof whose points are LEM bytes (native_prove.prove_lem's)."""
    return {"pi_a": g1_json(g1_from_lem(curve, pi_a)), "pi_b": g2_json(g2_from_lem(curve, pi_b)),
            "pi_c": g1_json(g1_from_lem(curve, pi_c)), "protocol": "groth16", "curve": curve.name}


def verification_key_json(vk: VerificationKey, alphabeta_12: list) -> dict:
    """verification_key.json's object; alphabeta_12 is e(alpha1, beta2) as nested decimal strings."""
    return {
        "protocol": "groth16", "curve": vk.curve.name, "nPublic": vk.n_public,
        "vk_alpha_1": g1_json(vk.alpha1), "vk_beta_2": g2_json(vk.beta2),
        "vk_gamma_2": g2_json(vk.gamma2), "vk_delta_2": g2_json(vk.delta2),
        "vk_alphabeta_12": alphabeta_12, "IC": [g1_json(p) for p in vk.ic],
    }


def write_json(path: str | Path, obj: Any) -> None:
    """Writes obj as snarkjs does (JSON.stringify(obj, null, 1)), atomically."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(_dumps(obj))
    os.replace(tmp, path)


# What json.dumps writes unchanged between quotes: printable ASCII but the quote and backslash.
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7f)) - {'"', "\\"}


def _dumps(obj: Any, indent: str = "\n") -> str:
    """json.dumps(obj, indent=1), for what snarkjs's files hold (dicts and lists of plain
    strings, as proofs and public signals are) without importing json; anything else goes
    to json.dumps. (tests/test_formats.py checks both agree.)"""
    inner = indent + " "
    if isinstance(obj, str) and _PLAIN.issuperset(obj):
        return f'"{obj}"'
    if isinstance(obj, list) and obj:
        return "[" + ",".join(inner + _dumps(v, inner) for v in obj) + indent + "]"
    if isinstance(obj, dict) and obj and all(isinstance(k, str) and _PLAIN.issuperset(k) for k in obj):
        return "{" + ",".join(f'{inner}"{k}": {_dumps(v, inner)}' for k, v in obj.items()) + indent + "}"
    import json  # noqa: PLC0415
    return json.dumps(obj, indent=1).replace("\n", indent)


def write_public(path: str | Path, signals: list[int]) -> None:
    write_json(path, [str(s) for s in signals])

"""The native pairing (kernels/pairing.cuh, kernels/cpu/pairing.cpp) and groth16.verifier.

py_ecc is an independent oracle here (point arithmetic, and a couple of pairings); the
verifier itself never uses it. The snarkjs fixtures are the committed copies under
tests/fixtures/.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from pathlib import Path

import pytest
from py_ecc import optimized_bls12_381 as pe_bls
from py_ecc import optimized_bn128 as pe_bn

from zkqueue.groth16 import native_abi, verifier
from zkqueue.groth16.curves import BLS12381, BN128, Curve
from zkqueue.groth16.encoding import g1_to_lem, g2_to_lem
from zkqueue.groth16.errors import MismatchError
from zkqueue.groth16.formats.jsonfiles import load_proof, load_public, load_verification_key
from zkqueue.groth16.model import Proof

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PYECC = {"bn128": pe_bn, "bls12381": pe_bls}
CURVES = [BN128, BLS12381]
ids = [c.name for c in CURVES]


@pytest.fixture(scope="module")
def lib():
    return native_abi.library()


# --- small affine arithmetic over Fq and Fq2 = Fq[u]/(u^2+1) (test oracle) -----------------

class _F1:
    def __init__(self, q): self.q = q
    def add(self, a, b): return (a + b) % self.q
    def sub(self, a, b): return (a - b) % self.q
    def mul(self, a, b): return a * b % self.q
    def inv(self, a): return pow(a, -1, self.q)
    def small(self, k): return k % self.q
    zero = 0


class _F2:
    def __init__(self, q): self.q = q
    def add(self, a, b): return ((a[0] + b[0]) % self.q, (a[1] + b[1]) % self.q)
    def sub(self, a, b): return ((a[0] - b[0]) % self.q, (a[1] - b[1]) % self.q)
    def mul(self, a, b):
        q = self.q
        return ((a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)
    def inv(self, a):
        n = pow(a[0] * a[0] + a[1] * a[1], -1, self.q)
        return (a[0] * n % self.q, -a[1] * n % self.q)
    def small(self, k): return (k % self.q, 0)
    zero = (0, 0)


def _add(F, A, B):
    if A is None:
        return B
    if B is None:
        return A
    if A[0] == B[0]:
        if F.add(A[1], B[1]) == F.zero:
            return None
        lam = F.mul(F.mul(F.small(3), F.mul(A[0], A[0])), F.inv(F.mul(F.small(2), A[1])))
    else:
        lam = F.mul(F.sub(B[1], A[1]), F.inv(F.sub(B[0], A[0])))
    x = F.sub(F.sub(F.mul(lam, lam), A[0]), B[0])
    return (x, F.sub(F.mul(lam, F.sub(A[0], x)), A[1]))


def _mul(F, P, k):
    R = None
    for bit in bin(k)[2:]:
        R = _add(F, R, R)
        if bit == "1":
            R = _add(F, R, P)
    return R


def _neg(F, P):
    return None if P is None else (P[0], F.sub(F.zero, P[1]))


def g1_mul(curve: Curve, P, k):
    return _mul(_F1(curve.q), P, k)


def g2_mul(curve: Curve, Q, k):
    """k*Q with py_ecc (independent of the code under test), as affine integer tuples."""
    pe = PYECC[curve.name]
    (x0, x1), (y0, y1) = Q
    pt = pe.multiply((pe.FQ2([x0, x1]), pe.FQ2([y0, y1]), pe.FQ2.one()), k)
    if pe.is_inf(pt):
        return None
    x, y = pe.normalize(pt)
    return (tuple(int(c) for c in x.coeffs), tuple(int(c) for c in y.coeffs))


def g1_neg(curve, P):
    return _neg(_F1(curve.q), P)


def pairing_check(lib, curve: Curve, pairs) -> int:
    g1s = b"".join(g1_to_lem(curve, p) for p, _ in pairs)
    g2s = b"".join(g2_to_lem(curve, q) for _, q in pairs)
    return lib.zkq_pairing_check(curve.native_id, g1s, g2s, len(pairs))


# --- pairing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("curve", CURVES, ids=ids)
def test_bilinearity(lib, curve):
    rng = random.Random(curve.name)
    P, Q = curve.g1, curve.g2
    a, b = rng.randrange(1, curve.r), rng.randrange(1, curve.r)
    aP, bQ = g1_mul(curve, P, a), g2_mul(curve, Q, b)
    ab = a * b % curve.r
    assert pairing_check(lib, curve, [(aP, bQ), (g1_neg(curve, g1_mul(curve, P, ab)), Q)]) == 1
    assert pairing_check(lib, curve, [(aP, bQ), (g1_neg(curve, g1_mul(curve, P, ab + 1)), Q)]) == 0
    # bilinearity in the second argument too: e(abP, Q) e(-aP, bQ) == 1
    assert pairing_check(lib, curve, [(g1_mul(curve, P, ab), Q), (g1_neg(curve, aP), bQ)]) == 1
    # three pairs in one multi-Miller loop: e(aP, bQ) e(cP, dQ) e(-(ab + cd)P, Q) == 1
    c, d = rng.randrange(1, curve.r), rng.randrange(1, curve.r)
    s = (a * b + c * d) % curve.r
    pairs = [(aP, bQ), (g1_mul(curve, P, c), g2_mul(curve, Q, d)), (g1_neg(curve, g1_mul(curve, P, s)), Q)]
    assert pairing_check(lib, curve, pairs) == 1
    pairs[1] = (g1_mul(curve, P, c + 1), pairs[1][1])
    assert pairing_check(lib, curve, pairs) == 0


@pytest.mark.parametrize("curve", CURVES, ids=ids)
def test_non_degenerate_and_infinity(lib, curve):
    P, Q = curve.g1, curve.g2
    assert pairing_check(lib, curve, [(P, Q)]) == 0
    assert pairing_check(lib, curve, [(None, Q)]) == 1
    assert pairing_check(lib, curve, [(P, None)]) == 1
    assert pairing_check(lib, curve, [(None, None)]) == 1
    assert pairing_check(lib, curve, []) == 1
    assert pairing_check(lib, curve, [(P, Q), (None, Q), (g1_neg(curve, P), Q), (P, None)]) == 1
    assert pairing_check(lib, curve, [(P, Q), (None, Q)]) == 0
    # e(P, Q)^r == 1 and e(P, Q)^k != 1 for 0 < k < r: e(kP, Q) e(-P, kQ) == 1
    assert pairing_check(lib, curve, [(g1_mul(curve, P, 5), Q), (g1_neg(curve, P), g2_mul(curve, Q, 5))]) == 1


@pytest.mark.parametrize("curve", CURVES, ids=ids)
def test_pairing_agrees_with_py_ecc(lib, curve):
    pe = PYECC[curve.name]
    a, b = 0x1234567890ABCDEF, 0xFEDCBA987654321
    aP, bQ, abP = g1_mul(curve, curve.g1, a), g2_mul(curve, curve.g2, b), g1_mul(curve, curve.g1, a * b)

    def pe_g1(p): return (pe.FQ(p[0]), pe.FQ(p[1]), pe.FQ.one())
    def pe_g2(q): return (pe.FQ2(list(q[0])), pe.FQ2(list(q[1])), pe.FQ2.one())

    lhs = pe.pairing(pe_g2(bQ), pe_g1(aP))
    rhs = pe.pairing(pe_g2(curve.g2), pe_g1(abP))
    assert lhs == rhs and lhs != pe.FQ12.one()              # py_ecc: e(aP, bQ) = e(abP, Q) != 1
    assert pairing_check(lib, curve, [(aP, bQ), (g1_neg(curve, abP), curve.g2)]) == 1
    assert pairing_check(lib, curve, [(aP, bQ)]) == 0


def test_pairing_check_rejects_bad_input(lib):
    c = BN128
    off = (1, 3)  # 9 != 1 + 3: not on the curve
    assert pairing_check(lib, c, [(off, c.g2)]) < 0
    assert lib.zkq_pairing_check(7, b"", b"", 0) < 0


# --- point validation ------------------------------------------------------------------------

def _sqrt_fq(a, q):
    assert q % 4 == 3
    s = pow(a, (q + 1) // 4, q)
    return s if s * s % q == a % q else None


def _sqrt_fq2(a, q):
    """A square root in Fq2 = Fq[u]/(u^2+1) via the norm (q = 3 mod 4), or None."""
    n = _sqrt_fq((a[0] * a[0] + a[1] * a[1]) % q, q)
    if n is None:
        return None
    half = pow(2, -1, q)
    for t in ((a[0] + n) * half % q, (a[0] - n) * half % q):
        x0 = _sqrt_fq(t, q)
        if x0:
            x = (x0, a[1] * pow(2 * x0, -1, q) % q)
            if _F2(q).mul(x, x) == (a[0] % q, a[1] % q):
                return x
    return None


@functools.cache
def non_subgroup_g1(curve: Curve):
    """A point on y^2 = x^3 + b not multiplied by the cofactor (so not of order r)."""
    q = curve.q
    for x in range(1, 1000):
        y = _sqrt_fq((x ** 3 + curve.b) % q, q)
        if y is not None and g1_mul(curve, (x, y), curve.r) is not None:
            return (x, y)
    raise AssertionError("no point found")


@functools.cache
def non_subgroup_g2(curve: Curve):
    q, F = curve.q, _F2(curve.q)
    for x0 in range(1, 1000):
        x = (x0, 1)
        y = _sqrt_fq2(F.add(F.mul(F.mul(x, x), x), curve.b2), q)
        if y is not None and _mul(F, (x, y), curve.r) is not None:
            return (x, y)
    raise AssertionError("no point found")


@pytest.mark.parametrize("curve", CURVES, ids=ids)
def test_validate(lib, curve):
    v1 = lambda p: lib.zkq_g1_validate(curve.native_id, p if isinstance(p, bytes) else g1_to_lem(curve, p))
    v2 = lambda p: lib.zkq_g2_validate(curve.native_id, p if isinstance(p, bytes) else g2_to_lem(curve, p))
    assert v1(curve.g1) == 0 and v1(None) == 0 and v1(g1_mul(curve, curve.g1, 12345)) == 0
    assert v2(curve.g2) == 0 and v2(None) == 0 and v2(g2_mul(curve, curve.g2, 12345)) == 0
    x, y = curve.g1
    assert v1((x, y + 1)) == 2
    (x0, x1), yy = curve.g2
    assert v2(((x0 + 1, x1), yy)) == 2
    n = curve.n8q
    raw_q = curve.q.to_bytes(n, "little")  # a raw Montgomery word >= q
    assert v1(raw_q + g1_to_lem(curve, curve.g1)[n:]) == 1
    assert v2(g2_to_lem(curve, curve.g2)[:3 * n] + raw_q) == 1
    g2_bad = non_subgroup_g2(curve)
    assert v2(g2_bad) == 3
    g1_other = non_subgroup_g1(curve) if curve is BLS12381 else (1, _sqrt_fq(1 + curve.b, curve.q))
    if curve is BLS12381:
        assert v1(g1_other) == 3
    else:
        assert g1_other[1] is not None and v1(g1_other) == 0  # BN254 G1: cofactor 1
    assert lib.zkq_g1_validate(9, g1_to_lem(curve, curve.g1)) < 0


# --- Groth16 on the snarkjs fixtures ---------------------------------------------------------

FIXTURE_NAMES = ["bn128_chain_10", "bls12381_chain_10"]


@pytest.fixture(scope="module", params=FIXTURE_NAMES)
def fx(request):
    d = FIXTURES / request.param
    vk = load_verification_key(d / "verification_key.json")
    proof = load_proof(d / "proof.json")
    public = load_public(d / "public.json", vk.curve)
    return vk, proof, public


def test_snarkjs_proof_verifies(fx):
    vk, proof, public = fx
    assert verifier.verify(vk, proof, public) is True


def _bump_g1(p):
    return (p[0], p[1] + 1)


def _bump_g2(p):
    (x0, x1), y = p
    return ((x0, x1 + 1), y)


def test_tampered_points_rejected(fx):
    vk, proof, public = fx
    c = vk.curve
    r = dataclasses.replace
    cases = {
        "A=2A": r(proof, a=g1_mul(c, proof.a, 2)),
        "A off curve": r(proof, a=_bump_g1(proof.a)),
        "A.x+q": r(proof, a=(proof.a[0] + c.q, proof.a[1])),
        "A=(0,0)": r(proof, a=(0, 0)),
        "B=2B": r(proof, b=g2_mul(c, proof.b, 2)),
        "B off curve": r(proof, b=_bump_g2(proof.b)),
        "B not in G2": r(proof, b=non_subgroup_g2(c)),
        "C=2C": r(proof, c=g1_mul(c, proof.c, 2)),
        "C off curve": r(proof, c=_bump_g1(proof.c)),
        "C=infinity": r(proof, c=None),
    }
    if c is BLS12381:
        cases["A not in G1"] = r(proof, a=non_subgroup_g1(c))
    for name, bad in cases.items():
        assert verifier.verify(vk, bad, public) is False, name


def test_tampered_public_rejected(fx):
    vk, proof, public = fx
    for j in (0, len(public) - 1):
        changed = list(public)
        changed[j] = (changed[j] + 1) % vk.curve.r
        assert verifier.verify(vk, proof, changed) is False


def test_input_mismatch_raises(fx):
    vk, proof, public = fx
    with pytest.raises(MismatchError, match=f"expected {vk.n_public} public signals, found {vk.n_public - 1}"):
        verifier.verify(vk, proof, public[:-1])
    with pytest.raises(MismatchError, match="public signal 2 is not in"):
        verifier.verify(vk, proof, public[:2] + [vk.curve.r] + public[3:])
    with pytest.raises(MismatchError, match="public signal 0"):
        verifier.verify(vk, proof, [-1] + public[1:])
    other = BLS12381 if vk.curve is BN128 else BN128
    with pytest.raises(MismatchError, match="proof is on"):
        verifier.verify(vk, dataclasses.replace(proof, curve=other), public)
    with pytest.raises(MismatchError):
        verifier.verify_batch(vk, [proof, proof], [public])


def _rerandomized(vk, proof: Proof, seed: int) -> Proof:
    """Another valid proof of the same statement: (tA, B/t + s delta, C + s t A)."""
    c = vk.curve
    rng = random.Random(seed)
    t, s = rng.randrange(2, c.r), rng.randrange(2, c.r)
    F2 = _F2(c.q)
    b = _add(F2, g2_mul(c, proof.b, pow(t, -1, c.r)), g2_mul(c, vk.delta2, s))
    return Proof(curve=c, a=g1_mul(c, proof.a, t), b=b,
                 c=_add(_F1(c.q), proof.c, g1_mul(c, proof.a, s * t % c.r)))


def test_verify_batch(fx):
    vk, proof, public = fx
    proofs = [proof] + [_rerandomized(vk, proof, i) for i in range(3)]
    assert len({p.a for p in proofs}) == 4
    for p in proofs:
        assert verifier.verify(vk, p, public)
    assert verifier.verify_batch(vk, proofs, [public] * 4) == [True] * 4
    assert verifier.verify_batch(vk, [], []) == []

    # one tampered among four: exactly that one is False
    bad = list(proofs)
    bad[2] = dataclasses.replace(bad[2], c=g1_mul(vk.curve, bad[2].c, 2))
    assert verifier.verify_batch(vk, bad, [public] * 4) == [True, True, False, True]
    # a wrong public signal for one proof
    pubs = [public] * 4
    pubs[1] = [public[0] + 1] + public[1:]
    assert verifier.verify_batch(vk, proofs, pubs) == [True, False, True, True]
    # invalid points (off the curve, outside the subgroup) and a wrong point together
    bad = list(proofs)
    bad[0] = dataclasses.replace(bad[0], b=_bump_g2(bad[0].b))
    bad[3] = dataclasses.replace(bad[3], b=non_subgroup_g2(vk.curve))
    bad[1] = dataclasses.replace(bad[1], a=g1_mul(vk.curve, bad[1].a, 3))
    assert verifier.verify_batch(vk, bad, [public] * 4) == [False, False, True, False]


def test_native_batch_abi(lib, fx):
    """The raw ABI: rho scaling, rho >= r, a bad point's code."""
    vk, proof, public = fx
    c = vk.curve
    enc = verifier._encode_vk(vk)

    def call(proofs, rhos, pubs=None):
        pubs = pubs if pubs is not None else public * len(proofs)
        return lib.zkq_groth16_verify_batch(
            c.native_id, *enc[:4], enc[4], len(vk.ic),
            b"".join(g1_to_lem(c, p.a) for p in proofs), b"".join(g2_to_lem(c, p.b) for p in proofs),
            b"".join(g1_to_lem(c, p.c) for p in proofs),
            b"".join(s.to_bytes(32, "little") for s in pubs), b"".join(k.to_bytes(32, "little") for k in rhos),
            len(proofs))

    assert call([proof], [1]) == 1
    assert call([proof, proof], [3, c.r - 1]) == 1
    assert call([proof], [c.r]) < 0 and call([proof], [1], [c.r] + public[1:]) < 0
    bad = dataclasses.replace(proof, b=_bump_g2(proof.b))
    assert call([proof, bad], [5, 7]) == -(1000 + 3 * 1 + 1)

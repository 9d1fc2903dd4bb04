"""The native CPU kernels against the pure-Python oracle (tests/oracle.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from zkqueue import config
from zkqueue.groth16 import encoding, native
from zkqueue.groth16.backends.cpu import CpuBackend, library
from zkqueue.groth16.curves import BLS12381, BN128
from zkqueue.groth16.errors import FormatError, InputError, NativeBuildError

import oracle
from conftest import select_arith

CURVES = [BN128, BLS12381]
IDS = [c.name for c in CURVES]
R256 = 1 << 256
# Every test below runs on each arithmetic variant this CPU can execute: the mulx/adx
# assembly where the CPU has it, and always the portable fallback.
ARITH = (["x86-adx"] if native.has_adx() else []) + ["portable"]


@pytest.fixture(autouse=True, params=ARITH)
def arith(request, monkeypatch):
    """Selects the native arithmetic variant for the test (through ZKQUEUE_CPU_ARITH)."""
    return select_arith(monkeypatch, request.param)


def test_variant_choice(arith, monkeypatch):
    """ZKQUEUE_CPU_ARITH forces a variant; unset, the CPU's features decide; a typo is an error."""
    assert native.default_variant() == arith
    assert library().zkq_msm_g1 is not None and native.load() is native.load(arith)
    monkeypatch.delenv("ZKQUEUE_CPU_ARITH")
    config.set_process(None)
    assert native.default_variant() == ("x86-adx" if native.has_adx() else "portable")
    assert native.library_path("portable") != native.library_path(arith) or arith == "portable"
    select_arith(monkeypatch, "fast")
    with pytest.raises(NativeBuildError, match="ZKQUEUE_CPU_ARITH"):
        native.default_variant()


# ---- helpers ---------------------------------------------------------------------------

def fr_words(curve, values, mont=True):
    """Fr integers -> (n, 4) uint64 words (Montgomery form unless mont=False)."""
    f = (lambda v: v * R256 % curve.r) if mont else (lambda v: v % curve.r)
    data = b"".join(f(v).to_bytes(32, "little") for v in values)
    return np.frombuffer(data, dtype=np.uint64).reshape(-1, 4).copy()


def fr_ints(curve, words, mont=True):
    rinv = pow(R256, -1, curve.r)
    raw = [int.from_bytes(row.tobytes(), "little") for row in np.asarray(words).reshape(-1, 4)]
    return [v * rinv % curve.r for v in raw] if mont else raw


def points_words(curve, pts, g2):
    enc = encoding.g2_to_lem if g2 else encoding.g1_to_lem
    width = (4 if g2 else 2) * curve.n8q // 8
    data = b"".join(enc(curve, p) for p in pts)
    return np.frombuffer(data, dtype=np.uint64).reshape(-1, width).copy()


def decode_point(curve, data, g2):
    return (encoding.g2_from_lem if g2 else encoding.g1_from_lem)(curve, bytes(data))


class Pool:
    """Random points with known discrete logs, made cheaply: sums of a few k*G."""

    def __init__(self, curve, g2, rng, size=6):
        self.grp = oracle.g2(curve) if g2 else oracle.g1(curve)
        self.base = [self.grp.random_point(rng) for _ in range(size)]
        self.rng = rng

    def point(self):
        (p, a), (q, b) = self.rng.sample(self.base, 2)
        return self.grp.add(p, q), a + b


def msm_case(curve, g2, n, rng):
    """Points (with infinity, repeats, negations) and scalars (0, r-1, >= r/2, random), and
    the expected sum computed through the discrete logs."""
    pool = Pool(curve, g2, rng)
    grp, r = pool.grp, curve.r
    pts, logs = [], []
    for i in range(n):
        kind = rng.randrange(8)
        if kind == 0 and pts:          # repeat: P and P land in the same bucket
            j = rng.randrange(len(pts))
            pts.append(pts[j]); logs.append(logs[j])
        elif kind == 1 and pts:        # negation: P + (-P)
            j = rng.randrange(len(pts))
            pts.append(grp.neg(pts[j])); logs.append(-logs[j])
        elif kind == 2:                # infinity
            pts.append(None); logs.append(0)
        else:
            p, a = pool.point()
            pts.append(p); logs.append(a)
    special = [0, r - 1, r // 2, r // 2 + 1, 1, 2]
    scalars = [special[i] if i < len(special) and rng.random() < 0.7 else
               rng.choice([0, rng.randrange(r), rng.randrange(r // 2, r), rng.randrange(1 << 20)])
               for i in range(n)]
    rng.shuffle(scalars)
    if n >= 4:  # the same scalar on a point and its negation cancels within one bucket
        scalars[1] = scalars[0]
    expected = grp.mul(grp.gen, sum(k * a for k, a in zip(scalars, logs)) % r)
    return pts, scalars, expected, grp


# ---- MSM -------------------------------------------------------------------------------

@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 100])
def test_msm_small(curve, g2, n):
    rng = random.Random(1000 * n + 10 * g2 + curve.native_id)
    pts, scalars, expected, grp = msm_case(curve, g2, n, rng)
    if n <= 5:  # and the naive oracle MSM agrees with the discrete-log shortcut
        assert grp.msm(pts, scalars) == expected
    results = set()
    for threads in (1, 2):
        be = CpuBackend(curve, threads=threads)
        fn = be.msm_g2 if g2 else be.msm_g1
        out = fn(points_words(curve, pts, g2), fr_words(curve, scalars, mont=False))
        assert decode_point(curve, out, g2) == expected
        results.add(out)
    assert len(results) == 1


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_msm_3000(curve, g2):
    rng = random.Random(77 + g2 + 2 * curve.native_id)
    pts, scalars, expected, _ = msm_case(curve, g2, 3000, rng)
    pw, sw = points_words(curve, pts, g2), fr_words(curve, scalars, mont=False)
    outs = []
    for threads in (1, 2):
        be = CpuBackend(curve, threads=threads)
        outs.append((be.msm_g2 if g2 else be.msm_g1)(pw, sw))
    assert outs[0] == outs[1]
    assert decode_point(curve, outs[0], g2) == expected


def test_msm_all_in_one_bucket():
    """Every point with the same scalar: one bucket holds all n, the tree goes log n deep."""
    rng = random.Random(5)
    pool = Pool(BN128, False, rng)
    pts, logs = zip(*(pool.point() for _ in range(257)))
    k = rng.randrange(BN128.r)
    out = CpuBackend(BN128, threads=2).msm_g1(points_words(BN128, pts, False), fr_words(BN128, [k] * 257, mont=False))
    assert decode_point(BN128, out, False) == pool.grp.mul(pool.grp.gen, k * sum(logs))


def test_msm_rejects_scalar_not_below_r():
    be = CpuBackend(BN128, threads=1)
    pts = points_words(BN128, [BN128.g1, BN128.g1], False)
    bad = np.zeros((2, 4), dtype=np.uint64)
    bad[1] = np.frombuffer(BN128.r.to_bytes(32, "little"), dtype=np.uint64)
    with pytest.raises(InputError, match="scalar"):
        be.msm_g1(pts, bad)
    with pytest.raises(InputError):
        be.msm_g1(pts, bad[:1])


# ---- NTT -------------------------------------------------------------------------------

@pytest.mark.parametrize("curve", CURVES, ids=IDS)
@pytest.mark.parametrize("log_n", [0, 1, 2, 3, 4, 6])
def test_ntt_vs_dft(curve, log_n):
    rng = random.Random(log_n)
    n = 1 << log_n
    coefs = [rng.randrange(curve.r) for _ in range(n)]
    shift = curve.coset_shift(log_n)
    be = CpuBackend(curve, threads=2)
    for g in (None, shift):
        values = oracle.dft(curve, coefs, g)
        assert fr_ints(curve, be.ntt(fr_words(curve, coefs), coset_shift=g)) == values
        assert fr_ints(curve, be.ntt(fr_words(curve, values), inverse=True, coset_shift=g)) == coefs


def test_oracle_roots_match_curves():
    for c in CURVES:
        for k in (0, 1, 5, c.two_adicity):
            assert oracle.root_of_unity(c, k) == c.root_of_unity(k)
        assert pow(oracle.root_of_unity(c, 5), 16, c.r) == c.r - 1


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_ntt_round_trip_4096(curve):
    rng = random.Random(12)
    x = fr_words(curve, [rng.randrange(curve.r) for _ in range(4096)])
    shift = curve.coset_shift(12)
    outs = [CpuBackend(curve, threads=t).ntt(x, coset_shift=shift) for t in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], x)
    be = CpuBackend(curve, threads=2)
    assert np.array_equal(be.ntt(outs[0], inverse=True, coset_shift=shift), x)
    assert np.array_equal(be.ntt(be.ntt(x), inverse=True), x)


def test_ntt_rejects_bad_size():
    be = CpuBackend(BN128, threads=1)
    with pytest.raises(InputError, match="power of two"):
        be.ntt(np.zeros((6, 4), dtype=np.uint64))
    with pytest.raises(InputError, match="power of two"):
        be.ntt(np.zeros((0, 4), dtype=np.uint64))


# ---- pointwise -------------------------------------------------------------------------

@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_mul_and_h_scalars(curve):
    rng = random.Random(3)
    r = curve.r
    a, b, c = ([rng.randrange(r) for _ in range(1000)] + [r - 1, 0, 1] for _ in range(3))
    be = CpuBackend(curve, threads=2)
    aw, bw, cw = (fr_words(curve, v) for v in (a, b, c))
    assert fr_ints(curve, be.mul(aw, bw)) == [x * y % r for x, y in zip(a, b)]
    h = be.h_scalars(aw, bw, cw)
    assert fr_ints(curve, h, mont=False) == [(x * y - z) % r for x, y, z in zip(a, b, c)]


# ---- evaluate_ab -----------------------------------------------------------------------

def coef_bytes(curve, entries):
    """(matrix, constraint, signal, coef) -> 44-byte .zkey records (value = coef * R^2)."""
    out = b""
    for m, c, s, v in entries:
        val = v * R256 * R256 % curve.r if v >= 0 else -v  # negative: raw value, for bad input
        out += m.to_bytes(4, "little") + c.to_bytes(4, "little") + s.to_bytes(4, "little") + val.to_bytes(32, "little")
    return np.frombuffer(out, dtype=np.uint8)


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_evaluate_ab(curve):
    r = curve.r
    w = [1, 7, r - 3]
    entries = [(0, 0, 0, 5), (1, 0, 1, 2), (0, 0, 2, 3), (0, 2, 1, r - 1), (1, 3, 2, 11), (1, 0, 1, 4),
               (0, 1, 0, 9)]
    domain = 4
    a_exp, b_exp = [0] * domain, [0] * domain
    for m, c, s, v in entries:
        (b_exp if m else a_exp)[c] = ((b_exp if m else a_exp)[c] + v * w[s]) % r
    for threads in (1, 2):
        a, b = CpuBackend(curve, threads=threads).evaluate_ab(coef_bytes(curve, entries), fr_words(curve, w, False), domain)
        assert fr_ints(curve, a) == a_exp and fr_ints(curve, b) == b_exp
    # as a structured array, the way a .zkey reader views the section
    dt = np.dtype([("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"), ("value", "<u8", (4,))])
    a, _ = CpuBackend(curve).evaluate_ab(coef_bytes(curve, entries).view(dt), fr_words(curve, w, False), domain)
    assert fr_ints(curve, a) == a_exp


@pytest.mark.parametrize("bad, what", [((2, 0, 0, 1), "matrix"), ((0, 4, 0, 1), "constraint"),
                                       ((1, 0, 3, 1), "signal"), ((0, 0, 0, -BN128.r), "value")])
def test_evaluate_ab_rejects(bad, what):
    entries = [(0, 0, 0, 1), (1, 1, 1, 2), bad, (0, 2, 2, 3), bad]
    w = fr_words(BN128, [1, 2, 3], False)
    with pytest.raises(FormatError, match=what) as e:
        CpuBackend(BN128, threads=2).evaluate_ab(coef_bytes(BN128, entries), w, 4)
    assert e.value.found == 2 and "entry 2" in str(e.value)


# ---- point checks ----------------------------------------------------------------------

@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_check_points(curve, g2):
    rng = random.Random(9)
    grp = oracle.g2(curve) if g2 else oracle.g1(curve)
    pts = [grp.random_point(rng)[0] for _ in range(3)] + [None, grp.gen]
    be = CpuBackend(curve, threads=2)
    check = be.check_g2 if g2 else be.check_g1
    words = points_words(curve, pts, g2)
    check(words)  # valid: no error
    flipped = words.copy()
    flipped[2, 1] ^= np.uint64(1 << 17)
    with pytest.raises(FormatError, match="not on the curve") as e:
        check(flipped)
    assert e.value.found == 2
    big = words.copy()  # coordinate = q: out of range, whatever the curve equation says
    big[4, :curve.n8q // 8] = np.frombuffer(curve.q.to_bytes(curve.n8q, "little"), dtype=np.uint64)
    with pytest.raises(FormatError, match="not below") as e:
        check(big)
    assert e.value.found == 4
    off = points_words(curve, [grp.random_off_curve(rng)], g2)
    with pytest.raises(FormatError, match="point 0"):
        check(off)


# ---- 32-bit and 64-bit limbs -----------------------------------------------------------

FIELDS = [(0, BN128.q, 4), (1, BN128.r, 4), (2, BLS12381.q, 6), (3, BLS12381.r, 4)]


@pytest.mark.parametrize("limb_bits", [32, 64])
@pytest.mark.parametrize("field_id, p, nw", FIELDS, ids=["bn_fq", "bn_fr", "bls_fq", "bls_fr"])
def test_field_limbs(field_id, p, nw, limb_bits):
    rng = random.Random(field_id)
    edge = [0, 1, 2, p - 1, p - 2, p // 2, (1 << 64) - 1, 1 << 64, (1 << (64 * nw - 2)) % p]
    a = edge + [rng.randrange(p) for _ in range(200)] + [p - 1 - rng.randrange(1 << 70) for _ in range(20)]
    b = list(reversed(edge)) + [rng.randrange(p) for _ in range(220)]
    R = 1 << (64 * nw)
    rinv = pow(R, -1, p)
    enc = lambda vs: np.frombuffer(b"".join(v.to_bytes(8 * nw, "little") for v in vs), dtype=np.uint64).copy()
    lib = library()
    expect = {0: [x * y * rinv % p for x, y in zip(a, b)], 1: [(x + y) % p for x, y in zip(a, b)],
              2: [(x - y) % p for x, y in zip(a, b)], 3: [x * x * rinv % p for x in a],
              4: [pow(x * rinv, -1, p) * R % p if x else 0 for x in a],
              5: [x * rinv % p for x in a], 6: [x * R % p for x in a]}
    for op, exp in expect.items():
        out = np.zeros(len(a) * nw, dtype=np.uint64)
        assert lib.zkq_test_field_op(field_id, limb_bits, op, enc(a).ctypes.data, enc(b).ctypes.data,
                                     out.ctypes.data, len(a)) == 0
        got = [int.from_bytes(out[i * nw:(i + 1) * nw].tobytes(), "little") for i in range(len(a))]
        assert got == exp, f"op {op}"


@pytest.mark.parametrize("limb_bits", [32, 64])
@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_point_add_limbs(curve, g2, limb_bits):
    rng = random.Random(4)
    grp = oracle.g2(curve) if g2 else oracle.g1(curve)
    p1, p2 = grp.random_point(rng)[0], grp.random_point(rng)[0]
    pairs = [(p1, p2), (p1, p1), (p1, grp.neg(p1)), (None, p2), (p1, None), (None, None), (p2, grp.gen)]
    ps = points_words(curve, [a for a, _ in pairs], g2)
    qs = points_words(curve, [b for _, b in pairs], g2)
    out = np.zeros((3 * len(pairs), ps.shape[1]), dtype=np.uint64)
    fn = library().zkq_test_g2_add if g2 else library().zkq_test_g1_add
    assert fn(curve.native_id, limb_bits, ps.ctypes.data, qs.ctypes.data, out.ctypes.data, len(pairs)) == 0
    for i, (a, b) in enumerate(pairs):
        s = grp.add(a, b)
        assert decode_point(curve, out[3 * i].tobytes(), g2) == s
        assert decode_point(curve, out[3 * i + 1].tobytes(), g2) == s
        assert decode_point(curve, out[3 * i + 2].tobytes(), g2) == grp.double(a)


@pytest.mark.skipif(not native.has_adx(), reason="this CPU has no BMI2/ADX: only the portable arithmetic runs")
@pytest.mark.parametrize("field_id, p, nw", FIELDS, ids=["bn_fq", "bn_fr", "bls_fq", "bls_fr"])
def test_adx_matches_portable_and_oracle(field_id, p, nw):
    """The mulx/adx assembly against the portable C++ and Python integers, on values where
    carries and the final subtraction are most likely to go wrong: near p, near 2^(64k)
    word boundaries, and products whose Montgomery result lands just below or above p."""
    rng = random.Random(99 + field_id)
    near_p = [p - 1 - rng.randrange(1 << 64) for _ in range(300)]
    words = [((1 << (64 * rng.randrange(1, nw))) - 1 - rng.randrange(1 << 8)) % p for _ in range(300)]
    rand = [rng.randrange(p) for _ in range(1400)]
    a = near_p + words + rand
    b = [rng.choice([p - 1, 1, 0, p - 2, rng.randrange(p)]) for _ in range(600)] + rand[::-1]
    R = 1 << (64 * nw)
    rinv = pow(R, -1, p)
    enc = lambda vs: np.frombuffer(b"".join(v.to_bytes(8 * nw, "little") for v in vs), dtype=np.uint64).copy()
    ea, eb = enc(a), enc(b)
    expect = {0: [x * y * rinv % p for x, y in zip(a, b)], 1: [(x + y) % p for x, y in zip(a, b)],
              2: [(x - y) % p for x, y in zip(a, b)], 3: [x * x * rinv % p for x in a]}
    for op, exp in expect.items():
        outs = []
        for variant in ("x86-adx", "portable"):
            out = np.zeros(len(a) * nw, dtype=np.uint64)
            assert library(variant).zkq_test_field_op(field_id, 64, op, ea.ctypes.data, eb.ctypes.data,
                                                      out.ctypes.data, len(a)) == 0
            outs.append(out)
        got = [int.from_bytes(outs[0][i * nw:(i + 1) * nw].tobytes(), "little") for i in range(len(a))]
        assert got == exp, f"op {op}"
        assert np.array_equal(outs[0], outs[1]), f"op {op}: variants differ"


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_fq2_product_matches_oracle(curve):
    """Fq2 products (on x86-adx: double-width products, two reductions), squares and norms
    (one reduction of a0^2 + a1^2: the G2 MSM's batch inversion) against Python integers,
    where the lazy reduction could go wrong: a0 b0 below and above a1 b1 (c0's borrow),
    sums a0 + a1 near 2p (unreduced), zero, one and p - 1."""
    p, nw = curve.q, curve.n8q // 8
    R = 1 << (64 * nw)
    rinv = pow(R, -1, p)
    rng = random.Random(curve.name)
    edge = [0, 1, p - 1, p - 2, p // 2, R % p]
    pairs = [((x, y), (u, v)) for x in edge for y in edge for u in (0, 1, p - 1) for v in (p - 1, 1)]
    pairs += [((rng.randrange(p), rng.randrange(p)), (rng.randrange(p), rng.randrange(p))) for _ in range(500)]
    pairs += [((p - 1 - rng.randrange(1 << 64), p - 1 - rng.randrange(1 << 64)),
               (p - 1 - rng.randrange(1 << 64), rng.randrange(1 << 64))) for _ in range(200)]
    enc = lambda xs: np.frombuffer(b"".join(c.to_bytes(8 * nw, "little") for x in xs for c in x),
                                   dtype=np.uint64).copy()
    a, b = enc([x for x, _ in pairs]), enc([y for _, y in pairs])
    mul = [((x0 * y0 - x1 * y1) * rinv % p, (x0 * y1 + x1 * y0) * rinv % p) for (x0, x1), (y0, y1) in pairs]
    sqr = [((x0 * x0 - x1 * x1) * rinv % p, 2 * x0 * x1 * rinv % p) for (x0, x1), _ in pairs]
    norm = [((x0 * x0 + x1 * x1) * rinv % p, 0) for (x0, x1), _ in pairs]
    for op, expect in ((0, mul), (1, sqr), (2, norm)):
        out = np.zeros_like(a)
        assert library().zkq_test_fq2_op(curve.native_id, op, a.ctypes.data, b.ctypes.data, out.ctypes.data,
                                         len(pairs)) == 0
        words = out.reshape(len(pairs), 2, nw)
        got = [tuple(int.from_bytes(words[i, k].tobytes(), "little") for k in (0, 1)) for i in range(len(pairs))]
        assert got == expect, f"op {op}"


@pytest.mark.skipif("avx512ifma" not in native._cpu_flags().split(),
                    reason="this CPU has no AVX-512 IFMA: the MSM's additions run one at a time")
@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_ifma_affine_sums_match_oracle(arith, curve, g2):
    """The MSM's eight-lane IFMA code (the batch inversion's chains, then the additions;
    52-bit limbs, lazily reduced inside) against Python integers, where a bound or a carry
    would break: coordinates 0, 1, p - 1, p - 2, just below word boundaries and random, on
    G1 and G2, with a partial group and batch at the end. The formula is algebraic, so the
    coordinates need not lie on the curve. The portable build has none of this code (it
    stays the scalar reference the MSM tests compare with)."""
    p, nw = curve.q, curve.n8q // 8
    deg = 2 if g2 else 1
    R = 1 << (64 * nw)
    rng = random.Random(f"ifma {curve.name} {g2}")
    edge = [0, 1, 2, p - 1, p - 2, p // 2, R % p] + [((1 << (64 * k)) - 1) % p for k in range(1, nw)]
    coord = lambda: tuple(rng.choice(edge) if rng.random() < 0.4 else rng.randrange(p) for _ in range(deg))
    pairs = []
    while len(pairs) < 8 * 40 + 5:
        a, b = (coord(), coord()), (coord(), coord())
        if a[0] != b[0] and any(a[0] + a[1]) and any(b[0] + b[1]):  # p.x != q.x, neither (0, 0)
            pairs.append((a, b))
    # Field arithmetic on raw (Montgomery) words: the value is raw / R; u^2 = -1 in Fq2.
    rinv = pow(R, -1, p)
    mul = lambda x, y: ((x[0] * y[0] - x[1] * y[1]) % p, (x[0] * y[1] + x[1] * y[0]) % p) if g2 \
        else (x[0] * y[0] % p,)
    sub = lambda x, y: tuple((u - v) % p for u, v in zip(x, y))
    val = lambda x: tuple(c * rinv % p for c in x)
    raw = lambda x: tuple(c * R % p for c in x)

    def inv(x):
        if not g2:
            return (pow(x[0], -1, p),)
        n = pow(x[0] * x[0] + x[1] * x[1], -1, p)
        return (x[0] * n % p, -x[1] * n % p)

    expect = []
    for (px, py), (qx, qy) in pairs:
        px, py, qx, qy = val(px), val(py), val(qx), val(qy)
        lam = mul(sub(qy, py), inv(sub(qx, px)))
        x3 = sub(sub(mul(lam, lam), px), qx)
        expect.append((raw(x3), raw(sub(mul(lam, sub(px, x3)), py))))
    enc = lambda pts: np.frombuffer(b"".join(c.to_bytes(8 * nw, "little") for pt in pts for xy in pt for c in xy),
                                    dtype=np.uint64).copy()
    ep, eq = enc([a for a, _ in pairs]), enc([b for _, b in pairs])
    out = np.zeros_like(ep)
    rc = library().zkq_test_affine_add8(curve.native_id, int(g2), ep.ctypes.data, eq.ctypes.data,
                                        out.ctypes.data, len(pairs))
    if arith == "portable":
        assert rc == 2  # ZKQ_ERR_ARG: not built in
        return
    assert rc == 0
    words = out.reshape(len(pairs), 2, deg, nw)
    got = [tuple(tuple(int.from_bytes(words[i, j, d].tobytes(), "little") for d in range(deg)) for j in (0, 1))
           for i in range(len(pairs))]
    assert got == expect

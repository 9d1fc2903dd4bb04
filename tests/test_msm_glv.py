"""The MSM's GLV endomorphism, its window plans and its fixed-base tables against the
pure-Python oracle (tests/oracle.py), on every native arithmetic variant this CPU runs."""

from __future__ import annotations

import gc
import logging
import random

import numpy as np
import pytest

from zkqueue.groth16 import native, prover, verifier
from zkqueue.groth16.backends.cpu import CpuBackend, library
from zkqueue.groth16.curves import BLS12381, BN128
from zkqueue.groth16.errors import BackendError, InputError
from zkqueue.groth16.formats import jsonfiles, wtns, zkey

import oracle
from conftest import fixture_dir, select_arith, snarkjs_verifies
from test_cpu_kernels import Pool, decode_point, fr_words, points_words

CURVES = [BN128, BLS12381]
IDS = [c.name for c in CURVES]
ARITH = (["x86-adx"] if native.has_adx() else []) + ["portable"]
HALF = 1 << 128


@pytest.fixture(autouse=True, params=ARITH)
def arith(request, monkeypatch):
    """Selects the native arithmetic variant for the test (through ZKQUEUE_CPU_ARITH)."""
    return select_arith(monkeypatch, request.param)


def glv_constants(curve):
    """(lambda, beta of G1, beta of G2) as the native library holds them."""
    out = np.zeros(16, dtype=np.uint64)
    assert library().zkq_test_glv_constants(curve.native_id, out.ctypes.data) == 0
    as_int = lambda words: int.from_bytes(words.tobytes(), "little")  # noqa: E731
    return as_int(out[:4]), as_int(out[4:10]), as_int(out[10:16])


def decompose(curve, ks):
    """[(k1, k2)] signed, from the native GLV decomposition."""
    out = np.zeros(6 * len(ks), dtype=np.uint64)
    words = fr_words(curve, ks, mont=False)
    rc = library().zkq_test_glv_decompose(curve.native_id, words.ctypes.data, out.ctypes.data, len(ks))
    assert rc == 0
    res = []
    for i in range(len(ks)):
        o = [int(x) for x in out[6 * i:6 * i + 6]]
        k1 = o[0] | o[1] << 64
        k2 = o[3] | o[4] << 64
        res.append((-k1 if o[2] else k1, -k2 if o[5] else k2))
    return res


def edge_scalars(curve, lam, rng):
    r = curve.r
    ks = [0, 1, 2, 3, r - 1, r - 2, r - 3, r // 2, r // 2 + 1, lam, lam - 1, lam + 1, r - lam, r - lam - 1,
          2 * lam, lam * lam % r, HALF - 1, HALF, HALF + 1, HALF // 2, (1 << 192) - 1, 1 << 192, (1 << 64) - 1,
          1 << 64, (1 << 254) % r, ((1 << 255) - 1) % r]
    ks += [r - 1 - rng.randrange(1 << 64) for _ in range(8)] + [HALF - 1 - rng.randrange(1 << 32) for _ in range(4)]
    ks += [rng.randrange(r) for _ in range(60)] + [rng.randrange(1 << 20) for _ in range(4)]
    return [k % r for k in ks]


# ---- the endomorphism and the decomposition ------------------------------------------

@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_glv_constants_match_the_groups(curve):
    """lambda is a cube root of unity mod r, beta one mod q, and phi(P) = (beta x, y) equals
    lambda * P on G1 and G2 (the two groups pair lambda with different betas)."""
    lam, beta1, beta2 = glv_constants(curve)
    r, q = curve.r, curve.q
    assert (lam * lam + lam + 1) % r == 0 and lam != 1
    for beta in (beta1, beta2):
        assert pow(beta, 3, q) == 1 and beta != 1
    assert beta2 == beta1 * beta1 % q
    assert lam.bit_length() == {"bn128": 192, "bls12381": 128}[curve.name]
    rng = random.Random(curve.native_id)
    for g2, beta in ((False, beta1), (True, beta2)):
        grp = oracle.g2(curve) if g2 else oracle.g1(curve)
        for p in (grp.gen, grp.random_point(rng)[0]):
            x, y = p
            phi = (((x[0] * beta) % q, (x[1] * beta) % q), y) if g2 else ((x * beta) % q, y)
            assert grp.mul(p, lam) == phi
            assert grp.mul(p, lam * lam % r) != phi  # the other cube root is the other map


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_glv_decomposition_edges(curve):
    """k = k1 + k2 lambda (mod r) exactly, |k1|, |k2| < 2^128, at 0, 1, r-1, r-2, near r,
    lambda and its neighbours, the 2^128 boundary and random values; short scalars stay whole."""
    lam, _, _ = glv_constants(curve)
    ks = edge_scalars(curve, lam, random.Random(7))
    for k, (k1, k2) in zip(ks, decompose(curve, ks)):
        assert (k1 + k2 * lam - k) % curve.r == 0, hex(k)
        assert abs(k1) < HALF and abs(k2) < HALF, hex(k)
        if k < HALF:
            assert (k1, k2) == (k, 0)
    assert decompose(curve, [0]) == [(0, 0)]


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
def test_msm_edge_scalars_vs_reference(curve, g2):
    """Every edge scalar on its own point, against k * P computed by the oracle, and all of
    them in one MSM, for window widths from 1 to 15 bits and the automatic one."""
    rng = random.Random(11 + g2 + 2 * curve.native_id)
    lam, _, _ = glv_constants(curve)
    ks = edge_scalars(curve, lam, rng)[:40]
    pool = Pool(curve, g2, rng)
    pts, logs = zip(*(pool.point() for _ in ks))
    grp = pool.grp
    be = CpuBackend(curve, threads=2)
    msm = be.msm_g2 if g2 else be.msm_g1
    pw, sw = points_words(curve, pts, g2), fr_words(curve, ks, mont=False)
    for i in range(0, len(ks), 7):  # one point at a time: n = 1
        out = msm(pw[i:i + 1], sw[i:i + 1])
        assert decode_point(curve, out, g2) == grp.mul(grp.gen, ks[i] * logs[i] % curve.r), hex(ks[i])
    expected = grp.mul(grp.gen, sum(k * a for k, a in zip(ks, logs)) % curve.r)
    for c in (0, 1, 2, 5, 11, 15):
        assert decode_point(curve, msm(pw, sw, window_bits=c), g2) == expected, f"c={c}"


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
def test_msm_rejects_scalars_not_below_r(g2):
    be = CpuBackend(BLS12381, threads=2)
    grp = oracle.g2(BLS12381) if g2 else oracle.g1(BLS12381)
    pts = points_words(BLS12381, [grp.gen] * 3, g2)
    msm = be.msm_g2 if g2 else be.msm_g1
    for bad in (BLS12381.r, BLS12381.r + 1, (1 << 256) - 1):
        words = fr_words(BLS12381, [1, 2, 0], mont=False)
        words[2] = np.frombuffer(bad.to_bytes(32, "little"), dtype=np.uint64)
        with pytest.raises(InputError, match="scalar"):
            msm(pts, words)
    with pytest.raises(InputError, match="window_bits"):
        msm(pts, fr_words(BLS12381, [1, 2, 3], mont=False), window_bits=16)


# ---- plans ----------------------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("log_n", [0, 6, 12, 16, 20])
def test_plans_cover_the_scalar_bits(log_n, threads):
    """Windows cover 128 bits plus the recoding's carry; a table plan stays within its
    budget and needs levels-1 copies of the points."""
    be = CpuBackend(BN128, threads=threads)
    n = 1 << log_n
    plain = be.msm_plan(n)
    assert plain.levels == 1 and plain.table_bytes == 0 and plain.stride == plain.windows
    assert plain.windows * plain.window_bits >= 129 and 1 <= plain.window_bits <= 15
    for g2, point_bytes in ((False, 64), (True, 128)):
        for budget in (1 << 40, 40 * n * point_bytes, 3 * n * point_bytes):
            p = be.msm_plan(n, g2=g2, budget_bytes=budget)
            assert p.table_bytes <= budget
            assert p.windows == p.stride * p.levels and p.windows * p.window_bits >= 129
            if p.levels > 1:
                assert p.table_bytes == 64 + (p.levels - 1) * n * point_bytes
    # tables where they paid on the bench (msm.hpp, TABLE_MIN_SAVING): a full table at
    # 2^12 (1.15x), none at 2^16 (0.87-1.03x)
    if log_n == 12 and threads <= 2:
        assert be.msm_plan(n, budget_bytes=1 << 40).stride == 1
    if log_n == 16:
        assert be.msm_plan(n, budget_bytes=1 << 40).levels == 1


# ---- fixed-base tables ------------------------------------------------------------------

def table_case(curve, g2, n, rng):
    """Points with infinity and repeats, scalars with 0, 1, r-1 and random, the expected sum."""
    pool = Pool(curve, g2, rng)
    pts, logs = [], []
    for i in range(n):
        if i % 9 == 4:
            pts.append(None); logs.append(0)
        else:
            p, a = pool.point()
            pts.append(p); logs.append(a)
    special = [0, 1, curve.r - 1, curve.r - 2]
    ks = [special[i % 4] if i % 3 == 0 else rng.randrange(curve.r) for i in range(n)]
    expected = pool.grp.mul(pool.grp.gen, sum(k * a for k, a in zip(ks, logs)) % curve.r)
    return points_words(curve, pts, g2), fr_words(curve, ks, mont=False), expected


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("curve", CURVES, ids=IDS)
@pytest.mark.parametrize("n", [1, 2, 37])
def test_table_msm_matches_plain_and_reference(curve, g2, n):
    """Full and shrunk tables (several bucket sets) on 1 and 2 threads give the plain MSM's
    point, which is the oracle's."""
    rng = random.Random(n + 3 * g2 + 7 * curve.native_id)
    pw, sw, expected = table_case(curve, g2, n, rng)
    point_bytes = pw.shape[1] * 8
    for threads in (1, 2):
        be = CpuBackend(curve, threads=threads)
        msm = be.msm_g2 if g2 else be.msm_g1
        precompute = be.precompute_g2 if g2 else be.precompute_g1
        plain = msm(pw, sw)
        assert decode_point(curve, plain, g2) == expected
        plans = set()
        for budget in (1 << 30, 64 + 4 * n * point_bytes, 64 + n * point_bytes):
            table = precompute(pw, budget)
            if table is None:  # n = 1: a table never pays; the model says so
                assert be.msm_plan(n, g2=g2, budget_bytes=budget).table_bytes == 0
                continue
            assert table.nbytes <= budget
            plans.add((table.plan.stride, table.plan.levels))
            assert msm(pw, sw, table) == plain
            zeros = np.zeros_like(sw)
            assert decode_point(curve, msm(pw, zeros, table), g2) is None
        if n == 37:
            assert len(plans) >= 2  # a full table and a shrunk one were both exercised


def test_table_msm_spanning_several_chunks():
    """A table sub-window of more points than one pass of the bucket sort takes (2^15): the
    buckets' partial sums are carried from pass to pass."""
    rng = random.Random(21)
    pw, sw, expected = table_case(BN128, False, 2048, rng)
    be = CpuBackend(BN128, threads=1)
    table = be.precompute_g1(pw, 1 << 30)
    assert 2 * 2048 * table.plan.levels > 1 << 15
    assert decode_point(BN128, be.msm_g1(pw, sw, table), False) == expected
    assert decode_point(BN128, be.msm_g1(pw, sw), False) == expected


def test_table_forced_for_tiny_inputs_and_level_edges():
    """A table with many levels over one point: scalars r-1, 0 and 2^128 boundaries all
    cross levels (each level is 2^(stride*c) times the last)."""
    curve = BN128
    rng = random.Random(5)
    grp = oracle.g1(curve)
    p, a = grp.random_point(rng)
    be = CpuBackend(curve, threads=2)
    pw = points_words(curve, [p, None, grp.gen], False)
    table = be.precompute_g1(pw, 1 << 30)
    assert table is not None and table.plan.levels > 1
    for k in (curve.r - 1, 0, 1, HALF - 1, HALF, HALF + 1, curve.r // 3):
        sw = fr_words(curve, [k, k, 5], mont=False)
        out = be.msm_g1(pw, sw, table)
        assert decode_point(curve, out, False) == grp.mul(grp.gen, (k * a + 5) % curve.r)


def test_table_of_other_points_is_refused():
    rng = random.Random(6)
    pw, sw, _ = table_case(BN128, False, 40, rng)
    be = CpuBackend(BN128, threads=2)
    table = be.precompute_g1(pw, 1 << 30)
    other = pw.copy()
    with pytest.raises(InputError, match="other points"):
        be.msm_g1(other, sw, table)
    with pytest.raises(InputError, match="other points"):
        be.msm_g2(pw, sw, table)
    table.buffer[7] ^= np.uint64(1)  # the header's fingerprint no longer matches the points
    with pytest.raises(BackendError, match="bad argument"):
        be.msm_g1(pw, sw, table)


# ---- prepared keys ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_prepared_key_proves_and_snarkjs_accepts(name, tmp_path):
    """prepare() registers tables for the key's five queries; the prover's whole prove then
    uses them, which the proof's acceptance by snarkjs checks; dropping the PreparedKey frees them."""
    d = fixture_dir(name)
    key = zkey.read_zkey(d / "circuit_final.zkey")
    witness = wtns.read_wtns(d / "witness.wtns")
    be = CpuBackend(key.curve, threads=2)
    prepared = be.prepare(key, budget_bytes=1 << 30)
    assert len(prepared.tables) == 5 and prepared.nbytes == prepared.full_bytes
    # The registered table is what msm_g1 uses on that array: break it and the MSM says so.
    table = next(t for t in prepared.tables if t.points is key.h_query)
    saved = table.buffer[7].copy()
    table.buffer[7] ^= np.uint64(1)
    with pytest.raises(BackendError):
        be.msm_g1(key.h_query, np.zeros((len(key.h_query), 4), dtype=np.uint64))
    with pytest.raises(BackendError):  # and so does the whole prove
        prover.prove(key, witness, be)
    table.buffer[7] = saved
    result = prover.prove(key, witness, be)
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    jsonfiles.write_json(proof, jsonfiles.proof_json(result.proof))
    jsonfiles.write_public(public, result.public_signals)
    assert snarkjs_verifies(d / "verification_key.json", public, proof)
    del prepared, table
    gc.collect()
    assert len(be._registered) == 0
    assert verifier.verify(key.verification_key, prover.prove(key, witness, be, self_check=False).proof,
                           result.public_signals)


def test_prepare_shrinks_to_its_budget():
    key = zkey.read_zkey(fixture_dir("bn128_chain_10") / "circuit_final.zkey")
    be = CpuBackend(key.curve, threads=2)
    full = be.prepare(key, budget_bytes=1 << 30).full_bytes
    small = be.prepare(key, budget_bytes=full // 3)
    assert 0 < small.nbytes <= full // 3
    assert be.prepare(key, budget_bytes=0).tables == []


@pytest.mark.parametrize("name", ["bn128_chain_12", "bls12381_chain_10"])
def test_background_tables_prove_before_during_and_after(name, tmp_path):
    """prepare(background=True) returns before its tables exist; a proof started at once
    runs with whichever tables are registered by then, and one after wait() with all five;
    snarkjs accepts both. Dropping the PreparedKey mid-build stops the build and leaves
    nothing registered."""
    d = fixture_dir(name)
    key = zkey.read_zkey(d / "circuit_final.zkey")
    witness = wtns.read_wtns(d / "witness.wtns")
    be = CpuBackend(key.curve, threads=2)
    full = be.prepare(key, budget_bytes=1 << 30)
    planned, full_bytes = full.nbytes, full.full_bytes
    del full
    gc.collect()
    prepared = be.prepare(key, budget_bytes=1 << 30, background=True)
    assert prepared.planned_bytes == planned and prepared.full_bytes == full_bytes
    early = prover.prove(key, witness, be)          # the build is under way on another thread
    assert prepared.wait(120) and prepared.error is None
    assert len(prepared.tables) == 5 and prepared.nbytes == planned
    assert all(be._registered_table(t.points, t.g2) is t for t in prepared.tables)
    late = prover.prove(key, witness, be)
    for tag, result in (("early", early), ("late", late)):
        proof, public = tmp_path / f"{tag}.json", tmp_path / f"{tag}.public.json"
        jsonfiles.write_json(proof, jsonfiles.proof_json(result.proof))
        jsonfiles.write_public(public, result.public_signals)
        assert snarkjs_verifies(d / "verification_key.json", public, proof), tag

    del prepared
    gc.collect()
    assert len(be._registered) == 0
    dropped = be.prepare(key, budget_bytes=1 << 30, background=True)
    done = dropped._done
    del dropped                                      # at once, whatever the build has reached
    gc.collect()
    assert done.wait(120)
    gc.collect()
    assert len(be._registered) == 0


def test_worker_key_cache_holds_tables_within_budget(caplog, tmp_path):
    """A worker's key load builds tables in the room its key cache has left, counts them in
    the cache's bytes, and says when it had to shrink or skip them."""
    from zkqueue.workers.faults import Faults
    from zkqueue.workers.proving import PartitionProver

    d = fixture_dir("bn128_chain_10")
    path = d / "circuit_final.zkey"
    size = path.stat().st_size
    roomy = PartitionProver("cpu", threads=2, cache_bytes=1 << 30, faults=Faults())
    roomy.key("k", lambda: path)
    resident = roomy.cache._items["k"][0]
    # the tables build in the background; their planned bytes count from the start
    assert resident.prepared is not None and resident.prepared.planned_bytes > 0
    assert roomy.cache.used_bytes == size + resident.prepared.planned_bytes
    assert resident.prepared.wait(120) and resident.prepared.error is None
    assert len(resident.prepared.tables) == 5 and resident.prepared.nbytes == resident.prepared.planned_bytes

    full = resident.prepared.full_bytes
    caplog.set_level(logging.INFO, logger="zkqueue.proving")
    tight = PartitionProver("cpu", threads=2, cache_bytes=size + full // 2, faults=Faults())
    tight.key("k", lambda: path)
    assert tight.cache.used_bytes <= size + full // 2
    assert "shrunk" in caplog.text
    none = PartitionProver("cpu", threads=2, cache_bytes=size, faults=Faults())
    none.key("k", lambda: path)
    assert none.cache._items["k"][0].prepared is None and "no MSM tables" in caplog.text
    stop = __import__("threading").Event()
    proved = roomy.prove("k", lambda: path, d / "witness.wtns", attempt=1, stop=stop)
    assert proved is not None
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    jsonfiles.write_json(proof, proved.proof)
    public.write_text(__import__("json").dumps(proved.public))
    assert snarkjs_verifies(d / "verification_key.json", public, proof)

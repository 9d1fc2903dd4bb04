"""The CUDA backend on machines without a GPU: its real kernels compiled by g++ (cuda_emu).

Every kernel of groth16/kernels/*.cu runs here through CudaBackend's own orchestration, on
the GPU's 32-bit limbs, against independent references: Python curve arithmetic with known
discrete logs for the MSMs, a quadratic DFT for the NTT, a Python loop for A and B, and the
verifier for whole proofs. What this cannot see (races, warp intrinsics, NVRTC) is left to
tests/test_cuda_backend.py on a GPU.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ec_reference import Group, expected_msm, random_points, scalar_rows, special_scalars
from conftest import fixture_dir
from zkqueue.groth16 import curves
from zkqueue.groth16.backends import cuda
from zkqueue.groth16.backends.cuda import CudaBackend
from zkqueue.groth16.errors import FormatError, InputError

CURVES = [curves.BN128, curves.BLS12381]


@pytest.fixture(scope="module", params=CURVES, ids=lambda c: c.name)
def emu(request):
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    curve = request.param
    return CudaBackend(curve, runtime=EmulatedRuntime(curve))


def mont(curve, values):
    return cuda._mont_words([v % curve.r for v in values], curve.r, 4)


def from_mont(curve, rows):
    r_inv = pow(2, -256, curve.r)
    return [int.from_bytes(row.tobytes(), "little") * r_inv % curve.r for row in rows]


# ---- MSM --------------------------------------------------------------------------------

@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 33, 150])
def test_msm_matches_reference(emu, g2, n):
    curve = emu.curve
    rng = random.Random(n * 7 + g2)
    group = Group(curve, g2)
    logs, pts = random_points(group, n, rng)
    ks = special_scalars(curve, n, rng)
    got = (emu.msm_g2 if g2 else emu.msm_g1)(group.rows(pts), scalar_rows(curve, ks))
    assert got == group.lem(expected_msm(group, logs, ks))


@pytest.mark.parametrize("scalar", ["zero", "one", "minus_one", "same_big"])
def test_msm_skewed_buckets(emu, scalar, monkeypatch):
    """Every scalar equal: one bucket per window holds all points, over several levels."""
    curve = emu.curve
    monkeypatch.setattr(cuda, "LEVEL_SLICE", 4)  # more levels with few points
    rng = random.Random(5)
    group = Group(curve, False)
    logs, pts = random_points(group, 90, rng)
    k = {"zero": 0, "one": 1, "minus_one": curve.r - 1, "same_big": curve.r // 2 + 12345}[scalar]
    ks = [k] * 90
    assert emu.msm_g1(group.rows(pts), scalar_rows(curve, ks)) == group.lem(expected_msm(group, logs, ks))


def test_msm_in_chunks(emu, monkeypatch):
    """Buckets accumulate over chunks of points (how large MSMs bound their sort memory)."""
    curve = emu.curve
    monkeypatch.setattr(cuda, "SORT_ENTRIES", 2000)
    rng = random.Random(9)
    group = Group(curve, False)
    logs, pts = random_points(group, 120, rng)
    ks = special_scalars(curve, 120, rng)
    assert emu.msm_g1(group.rows(pts), scalar_rows(curve, ks)) == group.lem(expected_msm(group, logs, ks))


def test_msm_refuses_scalar_not_below_r(emu):
    group = Group(emu.curve, False)
    pts = group.rows([group.gen] * 4)
    sc = scalar_rows(emu.curve, [1, 2, 3, 4])
    sc[2] = np.frombuffer(emu.curve.r.to_bytes(32, "little"), dtype="<u8")
    with pytest.raises(InputError, match="scalar 2 is not below r"):
        emu.msm_g1(pts, sc)


def test_msm_length_mismatch(emu):
    group = Group(emu.curve, False)
    with pytest.raises(InputError):
        emu.msm_g1(group.rows([group.gen] * 3), scalar_rows(emu.curve, [1, 2]))


def test_window_choice_is_sane():
    assert cuda.choose_window(1, 255) >= 2
    assert 12 <= cuda.choose_window(1 << 16, 255) <= 14
    assert 18 <= cuda.choose_window(1 << 24, 255) <= cuda.MAX_WINDOW


# ---- NTT and pointwise ------------------------------------------------------------------

def dft(curve, xs, inverse=False, shift=None):
    n, r = len(xs), curve.r
    k = n.bit_length() - 1
    w = curve.root_of_unity(k)
    if inverse:
        w = pow(w, -1, r)
    if shift is not None and not inverse:
        xs = [x * pow(shift, i, r) % r for i, x in enumerate(xs)]
    out = [sum(x * pow(w, i * j, r) for j, x in enumerate(xs)) % r for i in range(n)]
    if inverse:
        n_inv = pow(n, -1, r)
        g_inv = pow(shift, -1, r) if shift is not None else 1
        out = [y * n_inv * pow(g_inv, i, r) % r for i, y in enumerate(out)]
    return out


@pytest.mark.parametrize("n", [1, 2, 4, 8, 32])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("shifted", [False, True])
def test_ntt_matches_dft(emu, n, inverse, shifted):
    curve = emu.curve
    rng = random.Random(n)
    xs = [rng.randrange(curve.r) for _ in range(n)]
    if n > 2:
        xs[0], xs[1] = 0, curve.r - 1
    shift = curve.coset_shift(max(n.bit_length() - 1, 0)) if shifted else None
    got = emu.ntt(mont(curve, xs), inverse=inverse, coset_shift=shift)
    assert from_mont(curve, got) == dft(curve, xs, inverse, shift)


def test_ntt_round_trip_and_bad_size(emu):
    curve = emu.curve
    rng = random.Random(3)
    xs = mont(curve, [rng.randrange(curve.r) for _ in range(1024)])
    shift = curve.coset_shift(10)
    back = emu.ntt(emu.ntt(xs, inverse=True), coset_shift=shift)
    back = emu.ntt(emu.ntt(back, inverse=True, coset_shift=shift))
    assert np.array_equal(back, xs)
    with pytest.raises(InputError):
        emu.ntt(xs[:12])


def test_pointwise(emu):
    curve, r = emu.curve, emu.curve.r
    rng = random.Random(4)
    a, b, c = ([rng.randrange(r) for _ in range(37)] for _ in range(3))
    a[0], b[1] = 0, r - 1
    prod = emu.mul(mont(curve, a), mont(curve, b))
    assert from_mont(curve, prod) == [x * y % r for x, y in zip(a, b)]
    h = emu.h_scalars(mont(curve, a), mont(curve, b), mont(curve, c))
    assert [int.from_bytes(row.tobytes(), "little") for row in h] == [(x * y - z) % r for x, y, z in zip(a, b, c)]


def test_outputs_are_read_only_and_reused_without_upload(emu):
    curve = emu.curve
    x = mont(curve, list(range(1, 17)))
    y = emu.ntt(x)
    assert not y.flags.writeable
    assert emu._input(y) is emu._outputs[id(y)][1]


# ---- A and B, point checks, whole proofs ------------------------------------------------

@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_evaluate_ab_and_checks_on_fixture(name):
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    from zkqueue.groth16.formats import wtns, zkey

    d = fixture_dir(name)
    key = zkey.read_zkey(d / "circuit_final.zkey")
    w = wtns.read_wtns(d / "witness.wtns")
    be = CudaBackend(key.curve, runtime=EmulatedRuntime(key.curve))
    a, b = be.evaluate_ab(key.coefs, w.values, key.domain_size)
    r = key.curve.r
    r_inv2 = pow(2, -512, r)  # values are coef * R^2; products are taken Montgomery-style
    want = [[0] * key.domain_size, [0] * key.domain_size]
    wint = [int.from_bytes(row.tobytes(), "little") for row in w.values]
    for e in key.coefs:
        v = int.from_bytes(e["value"].tobytes(), "little") * r_inv2 % r
        want[e["matrix"]][e["constraint"]] += v * wint[e["signal"]]
    assert from_mont(key.curve, a) == [x % r for x in want[0]]
    assert from_mont(key.curve, b) == [x % r for x in want[1]]
    # The key's points pass the device checks (and stay mirrored on the "device").
    key.check_points(be)
    assert be.memory()["cache_bytes"] > 0


def test_check_points_names_the_bad_point(emu):
    group = Group(emu.curve, True)
    rows = group.rows([group.gen, None, group.gen])
    rows[2, 0] ^= 1
    with pytest.raises(FormatError, match="point 2 is not on the curve"):
        emu.check_g2(rows)
    rows = group.rows([group.gen, group.gen])
    rows[1, :emu.curve.n8q // 8] = np.uint64(0xFFFFFFFFFFFFFFFF)
    with pytest.raises(FormatError, match="point 1 has a coordinate"):
        emu.check_g2(rows)


def test_bad_coefficient_is_named():
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    from zkqueue.groth16.formats import wtns, zkey

    d = fixture_dir("bn128_chain_10")
    key = zkey.read_zkey(d / "circuit_final.zkey")
    w = wtns.read_wtns(d / "witness.wtns")
    coefs = key.coefs.copy()
    coefs[7]["constraint"] = key.domain_size + 3
    be = CudaBackend(key.curve, runtime=EmulatedRuntime(key.curve))
    with pytest.raises(FormatError, match="entry 7"):
        be.evaluate_ab(coefs, w.values, key.domain_size)


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_full_proof_verifies(name):
    verifier = pytest.importorskip("zkqueue.groth16.verifier")
    from zkqueue.groth16 import prover
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    from zkqueue.groth16.formats import wtns, zkey

    d = fixture_dir(name)
    key = zkey.read_zkey(d / "circuit_final.zkey")
    w = wtns.read_wtns(d / "witness.wtns")
    be = CudaBackend(key.curve, runtime=EmulatedRuntime(key.curve))
    result = prover.prove(key, w, be, self_check=False)
    assert verifier.verify(key.verification_key, result.proof, result.public_signals)


# ---- backend choice ----------------------------------------------------------------------
# (the error boundary: tests/test_cuda_errors.py)


def test_cuda_backend_is_never_a_silent_fallback(monkeypatch):
    from zkqueue.groth16 import backends
    from zkqueue.groth16.errors import BackendUnavailable
    monkeypatch.setattr(backends, "cuda_status", lambda device=None: (False, "no device here"))
    with pytest.raises(BackendUnavailable, match="no device here"):
        backends.get_backend("cuda", curves.BN128)
    assert backends.get_backend("auto", curves.BN128).name == "cpu"

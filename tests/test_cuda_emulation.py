"""The CUDA backend on machines without a GPU: its real kernels, compiled by g++, run as
blocks of threads with their races checked (cuda_emu, groth16/kernels/emu.cuh).

Every kernel of groth16/kernels/*.cu runs here through CudaBackend's own orchestration, on
the GPU's 32-bit limbs, against independent references: Python curve arithmetic with known
discrete logs for the MSMs, the CPU backend for large MSMs (by folding the scalars of tiled
points) and for NTTs, a quadratic DFT, a Python loop for A and B, and the verifier for whole
proofs. The carry-chain arithmetic the GPU runs is checked here as an exact model of its
instructions. The race checker is shown to catch races injected into copies of real
kernels. What this cannot see (NVRTC, the PTX instructions themselves, timing) is left to
tests/test_cuda_backend.py on a GPU.
"""

from __future__ import annotations

import random
import shutil
import sys

import numpy as np
import pytest

from conftest import ROOT, fixture_dir
from ec_reference import Group, expected_msm, random_points, scalar_rows, special_scalars
from zkqueue.groth16 import curves
from zkqueue.groth16.backends import cuda, cuda_msm, cuda_ntt, cuda_source
from zkqueue.groth16.backends.cuda import CudaBackend
from zkqueue.groth16.errors import FormatError, InputError

sys.path.insert(0, str(ROOT / "bench"))
from gpu_fold import fold_scalars, tiled  # noqa: E402

CURVES = [curves.BN128, curves.BLS12381]


def emulated(curve, **kw) -> CudaBackend:
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    return CudaBackend(curve, runtime=EmulatedRuntime(curve, **kw))


@pytest.fixture(scope="module", params=CURVES, ids=lambda c: c.name)
def emu(request):
    return emulated(request.param)


def mont(curve, values):
    return cuda.mont_words([v % curve.r for v in values], curve.r, 4)


def from_mont(curve, rows):
    r_inv = pow(2, -256, curve.r)
    return [int.from_bytes(row.tobytes(), "little") * r_inv % curve.r for row in rows]


def fixture(name):
    from zkqueue.groth16.formats import wtns, zkey
    d = fixture_dir(name)
    return zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")


# ---- field arithmetic: the GPU's carry chains as an exact model ----------------------------

@pytest.mark.parametrize("field", ["fq", "fr"])
def test_carry_chain_model_matches_python(emu, field):
    """selftest.cu's columns (portable CIOS, the PTX instruction sequence with a modelled
    carry flag, and what the kernels use) against Python's Montgomery arithmetic."""
    curve = emu.curve
    p = curve.q if field == "fq" else curve.r
    words = curve.n8q // 8 if field == "fq" else 4
    rng = random.Random(7)
    edge = [0, 1, 2, p - 1, p - 2, pow(2, 64 * words, p), p // 2, p // 2 + 1, (1 << (32 * 2 * words - 2)) % p]
    xs = edge + [rng.randrange(p) for _ in range(200)]
    ys = edge[::-1] + [rng.randrange(p) for _ in range(200)]
    n = len(xs)

    def rows(vals):
        return np.frombuffer(b"".join(v.to_bytes(8 * words, "little") for v in vals), "<u8").reshape(n, words).copy()

    out = np.zeros((n * 9, words), dtype=np.uint64)
    emu.rt.launch(f"selftest_{field}", n, (rows(xs), rows(ys), np.uint64(n), out))
    got = [int.from_bytes(row.tobytes(), "little") for row in out]
    r_inv = pow(2, -64 * words, p)
    for i, (x, y) in enumerate(zip(xs, ys)):
        want = [x * y * r_inv % p] * 3 + [x * x * r_inv % p] * 2 + [(x + y) % p] * 2 + [(x - y) % p] * 2
        assert got[9 * i:9 * i + 9] == want, (i, x, y)


# ---- MSM ------------------------------------------------------------------------------------

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
def test_msm_heavy_buckets_split_into_units(emu, scalar, monkeypatch):
    """Every scalar equal: one bucket per window holds every point; with units of 4 entries
    it is split into 23 units, folded by the units' tree over two rounds."""
    curve = emu.curve
    monkeypatch.setattr(cuda_msm, "split_length", lambda n, c: 4)
    monkeypatch.setattr(cuda_msm, "UNIT_FAN", 3)
    rng = random.Random(5)
    group = Group(curve, False)
    logs, pts = random_points(group, 90, rng)
    k = {"zero": 0, "one": 1, "minus_one": curve.r - 1, "same_big": curve.r // 2 + 12345}[scalar]
    ks = [k] * 90
    assert emu.msm_g1(group.rows(pts), scalar_rows(curve, ks)) == group.lem(expected_msm(group, logs, ks))


def test_msm_in_chunks(emu, monkeypatch):
    """Buckets accumulate over chunks of points (how large MSMs bound their sort memory)."""
    curve = emu.curve
    monkeypatch.setattr(cuda_msm, "SORT_ENTRIES", 2000)
    rng = random.Random(9)
    group = Group(curve, False)
    logs, pts = random_points(group, 120, rng)
    ks = special_scalars(curve, 120, rng)
    assert emu.msm_g1(group.rows(pts), scalar_rows(curve, ks)) == group.lem(expected_msm(group, logs, ks))


@pytest.mark.parametrize("curve,g2", [(curves.BN128, False), (curves.BLS12381, False), (curves.BN128, True)],
                         ids=["bn128-g1", "bls12381-g1", "bn128-g2"])
def test_msm_folded_check_at_16_bit_windows(curve, g2, monkeypatch):
    """The exact check used at 2^24 and 2^26 on a GPU, here with the GPU's window at that
    size forced (c = 16: 2^15 buckets per window): an MSM over tiled fixture points equals
    the CPU backend's MSM over the base points with folded scalars. (G2 on BN254: its
    windows are the same, and BLS12-381's G2 case alone takes half a minute here.)"""
    from zkqueue.groth16.backends.cpu import CpuBackend
    emu = emulated(curve, units=("g2",) if g2 else ("g1",))
    monkeypatch.setattr(cuda_msm, "choose_window", lambda n, bits: 16)
    key, _ = fixture(f"{curve.name}_chain_10")
    base = np.asarray(key.b2_query[:23] if g2 else key.h_query[:61])
    n = 1500 if g2 else 4000
    rng = np.random.default_rng(16)
    sc = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    sc[:, 3] &= np.uint64((1 << (curve.r.bit_length() - 1 - 192)) - 1)
    sc[::7] = scalar_rows(curve, [curve.r - 1])   # digits that carry through every window
    pts = tiled(base, n)
    got = (emu.msm_g2 if g2 else emu.msm_g1)(pts, sc)
    cpu = CpuBackend(curve, threads=1)
    assert got == (cpu.msm_g2 if g2 else cpu.msm_g1)(base, fold_scalars(sc, len(base), curve.r))
    assert cuda_msm.plan(n, emu.scalar_bits).c == 16


def test_msm_refuses_scalar_not_below_r(emu):
    group = Group(emu.curve, False)
    for n in (4, 40):   # the small path and the sorted one
        pts = group.rows([group.gen] * n)
        sc = scalar_rows(emu.curve, list(range(1, n + 1)))
        sc[2] = np.frombuffer(emu.curve.r.to_bytes(32, "little"), dtype="<u8")
        with pytest.raises(InputError, match="scalar 2 is not below r"):
            emu.msm_g1(pts, sc)


def test_msm_length_mismatch(emu):
    group = Group(emu.curve, False)
    with pytest.raises(InputError):
        emu.msm_g1(group.rows([group.gen] * 3), scalar_rows(emu.curve, [1, 2]))


def test_window_choice_is_capped():
    assert cuda_msm.choose_window(40, 255) >= cuda_msm.MIN_WINDOW
    assert 11 <= cuda_msm.choose_window(1 << 16, 255) <= 13
    assert cuda_msm.choose_window(1 << 24, 255) == cuda_msm.MAX_WINDOW == 16
    assert cuda_msm.choose_window(1 << 26, 255) == 16


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


@pytest.mark.parametrize("k", [9, 12, 13])
def test_ntt_passes_match_cpu(emu, k, monkeypatch):
    """Several shared-memory passes (radix 2^7..2^11, and 2^3 per pass with the radix capped)
    against the CPU backend, in all four modes."""
    from zkqueue.groth16.backends.cpu import CpuBackend
    cpu = CpuBackend(emu.curve, threads=1)
    x = mont(emu.curve, [int(v) for v in np.random.default_rng(k).integers(0, 2**62, 1 << k)])
    shift = emu.curve.coset_shift(k)
    for cap in (cuda_ntt.MAX_LOG_RADIX, 3):
        monkeypatch.setattr(cuda_ntt, "MAX_LOG_RADIX", cap)
        for kw in ({}, {"inverse": True}, {"coset_shift": shift}, {"inverse": True, "coset_shift": shift}):
            assert np.array_equal(emu.ntt(x, **kw), cpu.ntt(x, **kw)), (cap, kw)


def test_ntt_plan():
    assert cuda_ntt.passes(24) == [(0, 8), (8, 8), (16, 8)]
    assert cuda_ntt.passes(20) == [(0, 10), (10, 10)]
    assert cuda_ntt.passes(22) == [(0, 11), (11, 11)]
    assert cuda_ntt.passes(11) == [(0, 11)]
    # 2^8..2^11 per pass from 2^16 up, but for 2^23 (8 + 8 + 7: three passes either way)
    assert all(8 <= r <= 11 or (k, r) == (23, 7) for k in range(16, 29) for _, r in cuda_ntt.passes(k))


def test_coset_evaluations_without_bit_reversal(emu):
    """The prover's pair (inverse, then forward on the coset) done in place with no
    permutation equals the two natural-order transforms."""
    curve, k = emu.curve, 10
    x = mont(curve, [int(v) for v in np.random.default_rng(3).integers(0, 2**62, 1 << k)])
    want = emu.ntt(emu.ntt(x, inverse=True), coset_shift=curve.coset_shift(k))
    dev = emu.rt.upload(x)
    before = len(emu.rt.launches)
    cuda_ntt.coset_evaluations(emu, dev, k)
    assert np.array_equal(dev, want)
    assert "ntt_permute" not in emu.rt.launches[before:]


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
    assert emu.input(y) is emu.remembered(y)


# ---- A and B, point checks, whole proofs ------------------------------------------------

@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_evaluate_ab_and_checks_on_fixture(name):
    key, w = fixture(name)
    be = emulated(key.curve)
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
    key, w = fixture("bn128_chain_10")
    coefs = key.coefs.copy()
    coefs[7]["constraint"] = key.domain_size + 3
    be = emulated(key.curve)
    with pytest.raises(FormatError, match="entry 7"):
        be.evaluate_ab(coefs, w.values, key.domain_size)


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_whole_proof_on_the_device_verifies_and_matches(name, monkeypatch):
    """prove_whole (every intermediate on the device) gives the step-by-step path's proof
    and the CPU backend's for the same r and s, and the proof verifies; the witness is not
    left in the key cache."""
    from zkqueue.groth16 import prover, verifier
    from zkqueue.groth16.backends.cpu import CpuBackend
    key, w = fixture(name)
    be = emulated(key.curve)
    monkeypatch.setattr(prover, "blinding_scalars", lambda _curve: (123456789, 987654321))
    whole = prover.prove(key, w, be, self_check=False)
    assert "fr_evaluate_ab" in be.rt.launches and "ntt_permute" not in be.rt.launches
    cached = be.memory()["cache_bytes"]
    steps = prover.prove(key, w, be, self_check=False, fused=False)
    cpu = prover.prove(key, w, CpuBackend(key.curve, threads=1), self_check=False)
    assert whole.proof == steps.proof == cpu.proof
    assert verifier.verify(key.verification_key, whole.proof, whole.public_signals)
    sections = sum(np.asarray(q).nbytes for q in (key.a_query, key.b1_query, key.b2_query, key.l_query,
                                                  key.h_query))
    assert sections <= cached < sections + 64 * len(key.coefs) + 8 * key.domain_size + (1 << 16)


def test_whole_proof_stops_when_cancelled():
    import ctypes

    from zkqueue.groth16.errors import Cancelled
    key, w = fixture("bn128_chain_10")
    with pytest.raises(Cancelled):
        emulated(key.curve).prove_whole(key, w.values, 5, 7, cancel=ctypes.c_int(1))


# ---- the emulator sees threads ------------------------------------------------------------

@pytest.mark.parametrize("curve", CURVES, ids=lambda c: c.name)
def test_every_kernel_runs_under_the_race_checker(curve, monkeypatch):
    """One of each operation on a fresh runtime launches every kernel of every unit, each as
    several blocks of many threads, and none races (a race would raise)."""
    from zkqueue.groth16 import prover
    be = emulated(curve)
    key, w = fixture(f"{curve.name}_chain_10")
    monkeypatch.setattr(prover, "blinding_scalars", lambda _curve: (3, 5))
    prover.prove(key, w, be, self_check=False)                       # evaluate, transforms, 5 MSMs, blinding
    key.check_points(be)
    monkeypatch.setattr(cuda_msm, "choose_window", lambda n, bits: 8)   # 4 segments per window: a row sum
    monkeypatch.setattr(cuda_msm, "split_length", lambda n, c: 8)       # units, folded by the tree
    for g2 in (False, True):
        group = Group(curve, g2)
        pts = group.rows(random_points(group, 40, random.Random(1))[1])
        (be.msm_g2 if g2 else be.msm_g1)(pts, scalar_rows(curve, [1] * 40))
    be.mul(mont(curve, [1, 2]), mont(curve, [3, 4]))
    be.h_scalars(*(mont(curve, [1, 2]) for _ in range(3)))
    be.ntt(mont(curve, list(range(16))), inverse=True)
    for field, words in (("fq", curve.n8q // 8), ("fr", 4)):
        x = np.zeros((2, words), dtype=np.uint64)
        be.rt.launch(f"selftest_{field}", 2, (x, x, np.uint64(2), np.zeros((18, words), dtype=np.uint64)))
    every = {k for unit in cuda_source.UNITS for k in cuda_source.kernel_names(unit)}
    assert every - set(be.rt.launches) == set()


def _injected_copy(tmp_path, monkeypatch, file: str, old: str, new: str):
    """A copy of groth16/kernels with one edit, that cuda and the emulation now build from."""
    copy = tmp_path / "kernels"
    shutil.copytree(cuda_source.KERNEL_DIR, copy, ignore=shutil.ignore_patterns("cpu"))
    text = (copy / file).read_text()
    assert text.count(old) == 1, f"the injection site moved: {old!r}"
    (copy / file).write_text(text.replace(old, new))
    monkeypatch.setattr(cuda_source, "KERNEL_DIR", copy)


INJECTED = {
    # The units' tree with its leader test dropped: every unit folds in its neighbours
    # while they fold theirs (read-after-write / write-after-read across threads).
    "msm-tree-without-leaders": ("msm.cu", "if (rel % (fan * stride) != 0 || rel + stride >= end - first) continue;",
                                 "if (rel + stride >= end - first) continue;"),
    # An NTT pass that forgets the barrier between loading its group and the butterflies:
    # threads read shared-memory elements other threads stored (shared read-after-write).
    "ntt-missing-barrier": ("ntt.cu", "st(sh + e, ld(a + index(blk, e)));\n        block_sync();",
                            "st(sh + e, ld(a + index(blk, e)));"),
    # The counting sort's histogram with a plain read-modify-write instead of the atomic.
    "count-without-atomic": ("device.cuh", "atomic_add(counts + key, popc(peers));",
                             "st(counts + key, ld(counts + key) + popc(peers));"),
}


@pytest.mark.parametrize("fault", sorted(INJECTED))
def test_injected_race_is_caught(fault, tmp_path, monkeypatch):
    from zkqueue.groth16.backends.cuda_emu import EmulatedRaceError
    curve = curves.BN128
    _injected_copy(tmp_path, monkeypatch, *INJECTED[fault])
    be = emulated(curve, seed=1)
    group = Group(curve, False)
    if fault == "ntt-missing-barrier":
        run = lambda: be.ntt(mont(curve, list(range(1 << 9))))  # noqa: E731
    else:
        monkeypatch.setattr(cuda_msm, "split_length", lambda n, c: 4)
        pts = group.rows(random_points(group, 200, random.Random(2))[1])
        run = lambda: be.msm_g1(pts, scalar_rows(curve, [1] * 200))  # noqa: E731
    with pytest.raises(EmulatedRaceError, match="data race") as info:
        run()
    assert "kernel " in str(info.value) and "thread" in str(info.value)


def test_out_of_bounds_access_is_caught(tmp_path, monkeypatch):
    from zkqueue.groth16.backends.cuda_emu import EmulatedRaceError
    _injected_copy(tmp_path, monkeypatch, "fr_ops.cu", "st(out + i, ld(a + i) * ld(b + i));",
                   "st(out + i, ld(a + i + 1) * ld(b + i));")
    be = emulated(curves.BN128)
    with pytest.raises(EmulatedRaceError, match="out of bounds"):
        be.mul(mont(curves.BN128, [1, 2, 3]), mont(curves.BN128, [4, 5, 6]))


# ---- backend choice ----------------------------------------------------------------------
# (the error boundary: tests/test_cuda_errors.py)


def test_cuda_backend_is_never_a_silent_fallback(monkeypatch):
    from zkqueue.groth16 import backends
    from zkqueue.groth16.errors import BackendUnavailable
    monkeypatch.setattr(backends, "cuda_status", lambda device=None: (False, "no device here"))
    with pytest.raises(BackendUnavailable, match="no device here"):
        backends.get_backend("cuda", curves.BN128)
    assert backends.get_backend("auto", curves.BN128).name == "cpu"

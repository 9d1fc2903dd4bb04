"""The CUDA backend on a real GPU against the CPU backend, the Python reference and the verifier.

Marked `gpu`: skipped wherever CuPy sees no usable device (cuda_status says why). On a GPU
machine, bench/gpu_check.sh runs this file first. Inputs mix zeros, infinity, repeated and
negated points, scalars >= r/2 and odd sizes, and sizes large enough to exercise what the
host emulation (test_cuda_emulation.py) cannot: the PTX carry chains themselves, thousands
of threads per launch, heavy buckets split into thousands of units, chunked sorts, NVRTC's
cubins, streams.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from conftest import ROOT, fixture_dir
from ec_reference import Group, expected_msm, random_points, scalar_rows, special_scalars
from zkqueue.groth16 import curves
from zkqueue.groth16.errors import InputError

sys.path.insert(0, str(ROOT / "bench"))
from gpu_fold import fold_scalars  # noqa: E402

pytestmark = pytest.mark.gpu
CURVES = [curves.BN128, curves.BLS12381]


@pytest.fixture(scope="module")
def gpu_ready():
    from zkqueue.groth16.backends import cuda_status
    ok, why = cuda_status()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    return why


@pytest.fixture(scope="module", params=CURVES, ids=lambda c: c.name)
def pair(request, gpu_ready):
    """(cuda backend, cpu backend) for one curve."""
    from zkqueue.groth16.backends.cpu import CpuBackend
    from zkqueue.groth16.backends.cuda import CudaBackend
    curve = request.param
    return CudaBackend(curve), CpuBackend(curve)


def fixture_key(curve_name: str, log2: int = 12):
    from zkqueue.groth16.formats import wtns, zkey
    d = fixture_dir(f"{curve_name}_chain_{log2}")
    return zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")


def random_scalars(curve, n, rng: np.random.Generator, kind: str) -> np.ndarray:
    """n scalars < r: 'random', 'bits' (0/1), 'small', 'high' (>= r/2), 'same', 'zeros'."""
    r = curve.r
    if kind == "random":
        vals = [int(x) % r for x in (int.from_bytes(rng.bytes(32), "little") for _ in range(n))]
    elif kind == "bits":
        vals = rng.integers(0, 2, n).tolist()
    elif kind == "small":
        vals = rng.integers(0, 1 << 20, n).tolist()
    elif kind == "high":
        vals = [r - 1 - int.from_bytes(rng.bytes(31), "little") % (r // 2) for _ in range(n)]
    elif kind == "same":
        vals = [r // 2 + 7] * n
    else:
        vals = [0] * n
    return scalar_rows(curve, vals)


def tiled(points: np.ndarray, n: int) -> np.ndarray:
    reps = -(-n // len(points))
    out = np.tile(points, (reps, 1))[:n].copy()
    out[::97] = 0  # sprinkle infinity
    return out


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 31, 257, 1000])
def test_msm_small_against_reference(pair, g2, n):
    cu, _ = pair
    rng = random.Random(n)
    group = Group(cu.curve, g2)
    logs, pts = random_points(group, n, rng)
    ks = special_scalars(cu.curve, n, rng)
    got = (cu.msm_g2 if g2 else cu.msm_g1)(group.rows(pts), scalar_rows(cu.curve, ks))
    assert got == group.lem(expected_msm(group, logs, ks))


@pytest.mark.parametrize("kind", ["random", "bits", "small", "high", "same", "zeros"])
@pytest.mark.parametrize("n", [4097, 65537, 300001])
def test_msm_g1_against_cpu(pair, kind, n):
    cu, cpu = pair
    key, _ = fixture_key(cu.curve.name)
    pts = tiled(np.asarray(key.h_query), n)
    sc = random_scalars(cu.curve, n, np.random.default_rng(n), kind)
    assert cu.msm_g1(pts, sc) == cpu.msm_g1(pts, sc)


@pytest.mark.parametrize("kind", ["random", "bits", "high"])
@pytest.mark.parametrize("n", [4097, 70001])
def test_msm_g2_against_cpu(pair, kind, n):
    cu, cpu = pair
    key, _ = fixture_key(cu.curve.name)
    pts = tiled(np.asarray(key.b2_query), n)
    sc = random_scalars(cu.curve, n, np.random.default_rng(n + 1), kind)
    assert cu.msm_g2(pts, sc) == cpu.msm_g2(pts, sc)


def test_msm_chunked_sort(pair, monkeypatch):
    from zkqueue.groth16.backends import cuda_msm
    cu, cpu = pair
    key, _ = fixture_key(cu.curve.name)
    pts = tiled(np.asarray(key.h_query), 50000)
    sc = random_scalars(cu.curve, 50000, np.random.default_rng(3), "random")
    monkeypatch.setattr(cuda_msm, "SORT_ENTRIES", 100000)
    assert cu.msm_g1(pts, sc) == cpu.msm_g1(pts, sc)


def test_msm_bad_scalar(pair):
    cu, _ = pair
    key, _ = fixture_key(cu.curve.name)
    sc = random_scalars(cu.curve, 100, np.random.default_rng(1), "random")
    sc[42] = np.frombuffer((cu.curve.r + 5).to_bytes(32, "little"), dtype="<u8")
    with pytest.raises(InputError, match="scalar 42"):
        cu.msm_g1(np.asarray(key.h_query[:100]), sc)


@pytest.mark.parametrize("field", ["fq", "fr"])
def test_ptx_carry_chains_match_the_model_and_python(pair, field):
    """selftest.cu on the GPU: the PTX product, square, sum and difference (the hardware's
    carry flag) equal the portable path, the instruction model and Python."""
    cu, _ = pair
    curve = cu.curve
    p = curve.q if field == "fq" else curve.r
    words = curve.n8q // 8 if field == "fq" else 4
    rng = random.Random(11)
    edge = [0, 1, 2, p - 1, p - 2, pow(2, 64 * words, p), p // 2, p // 2 + 1]
    xs = edge + [rng.randrange(p) for _ in range(5000)]
    ys = edge[::-1] + [rng.randrange(p) for _ in range(5000)]
    n = len(xs)

    def rows(vals):
        return np.frombuffer(b"".join(v.to_bytes(8 * words, "little") for v in vals), "<u8").reshape(n, words)

    out = cu.xp.zeros((n * 9, words), dtype=cu.xp.uint64)
    cu.rt.launch(f"selftest_{field}", n, (cu.rt.upload(rows(xs)), cu.rt.upload(rows(ys)), np.uint64(n), out))
    got = [int.from_bytes(row.tobytes(), "little") for row in cu.rt.download(out)]
    r_inv = pow(2, -64 * words, p)
    for i, (x, y) in enumerate(zip(xs, ys)):
        want = [x * y * r_inv % p] * 3 + [x * x * r_inv % p] * 2 + [(x + y) % p] * 2 + [(x - y) % p] * 2
        assert got[9 * i:9 * i + 9] == want, (i, x, y)


@pytest.mark.parametrize("g2", [False, True], ids=["g1", "g2"])
@pytest.mark.parametrize("kind", ["random", "bits"])
def test_msm_folded_at_2_20(pair, g2, kind):
    """2^20 tiled fixture points (16-bit windows are chosen at 2^24; 2^20 takes 12-13): the
    sum equals the CPU backend's MSM over the base points with folded scalars."""
    cu, cpu = pair
    key, _ = fixture_key(cu.curve.name)
    base = np.asarray(key.b2_query if g2 else key.h_query)[:1021]
    n = 1 << 20
    pts = np.tile(base, (-(-n // len(base)), 1))[:n].copy()
    sc = random_scalars(cu.curve, n, np.random.default_rng(20 + g2), kind)
    got = (cu.msm_g2 if g2 else cu.msm_g1)(pts, sc)
    assert got == (cpu.msm_g2 if g2 else cpu.msm_g1)(base, fold_scalars(sc, len(base), cu.curve.r))


def test_msm_forced_16_bit_windows_with_a_hot_bucket(pair, monkeypatch):
    """c = 16 at 2^18 with one scalar value for a third of the points: a hot bucket in every
    window, split into units and folded by the tree, on real hardware."""
    from zkqueue.groth16.backends import cuda_msm
    cu, cpu = pair
    key, _ = fixture_key(cu.curve.name)
    base = np.asarray(key.h_query)[:997]
    n = 1 << 18
    pts = np.tile(base, (-(-n // len(base)), 1))[:n].copy()
    sc = random_scalars(cu.curve, n, np.random.default_rng(5), "random")
    sc[::3] = sc[0]
    monkeypatch.setattr(cuda_msm, "choose_window", lambda n, bits: 16)
    assert cu.msm_g1(pts, sc) == cpu.msm_g1(base, fold_scalars(sc, len(base), cu.curve.r))


def random_fr(curve, n, seed):
    rng = np.random.default_rng(seed)
    vals = [int.from_bytes(rng.bytes(32), "little") % curve.r for _ in range(n)]
    if n > 3:
        vals[0], vals[1], vals[2] = 0, 1, curve.r - 1
    return scalar_rows(curve, vals)  # any value < r is a valid Montgomery-form element too


@pytest.mark.parametrize("log_n", [0, 1, 2, 5, 10, 13, 16])
def test_ntt_against_cpu(pair, log_n):
    cu, cpu = pair
    x = random_fr(cu.curve, 1 << log_n, log_n)
    shift = cu.curve.coset_shift(log_n)
    for kwargs in ({}, {"inverse": True}, {"coset_shift": shift}, {"inverse": True, "coset_shift": shift}):
        assert np.array_equal(cu.ntt(x, **kwargs), cpu.ntt(x, **kwargs)), kwargs


@pytest.mark.parametrize("n", [1, 7, 1000, 65537])
def test_pointwise_against_cpu(pair, n):
    cu, cpu = pair
    a, b, c = (random_fr(cu.curve, n, s) for s in (1, 2, 3))
    assert np.array_equal(cu.mul(a, b), cpu.mul(a, b))
    assert np.array_equal(cu.h_scalars(a, b, c), cpu.h_scalars(a, b, c))


@pytest.mark.parametrize("log2", [10, 12])
def test_evaluate_ab_and_checks_against_cpu(pair, log2):
    cu, cpu = pair
    key, w = fixture_key(cu.curve.name, log2)
    for got, want in zip(cu.evaluate_ab(key.coefs, w.values, key.domain_size),
                         cpu.evaluate_ab(key.coefs, w.values, key.domain_size)):
        assert np.array_equal(got, want)
    key.check_points(cu)
    assert cu.memory()["cache_bytes"] > 0  # the key's sections stay on the device
    cu.release_memory()
    assert cu.memory()["cache_bytes"] == 0


@pytest.mark.parametrize("name", ["chain_10", "chain_12", "poseidon_10"])
def test_full_proof_matches_cpu_and_verifies(pair, name, monkeypatch):
    """The proof on the device (prove_whole), the step-by-step path and the CPU backend's
    are the same points for the same r and s, and verify."""
    from zkqueue.groth16 import prover, verifier
    from zkqueue.groth16.formats import wtns, zkey
    cu, cpu = pair
    d = fixture_dir(f"{cu.curve.name}_{name}")
    key, w = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
    proofs = []
    for backend, fused in ((cu, True), (cu, False), (cpu, True)):
        monkeypatch.setattr(prover, "blinding_scalars", lambda _curve: (123456789, 987654321))
        proofs.append(prover.prove(key, w, backend, self_check=False, fused=fused))
    assert proofs[0].proof == proofs[1].proof == proofs[2].proof
    assert verifier.verify(key.verification_key, proofs[0].proof, proofs[0].public_signals)
    # A second partition with the same key reuses the points already on the device, and
    # only key sections stay cached (the witness and the intermediates are freed).
    monkeypatch.undo()
    cu.release_memory()
    again = prover.prove(key, w, cu)
    assert verifier.verify(key.verification_key, again.proof, again.public_signals)
    sections = sum(np.asarray(q).nbytes for q in (key.a_query, key.b1_query, key.b2_query, key.l_query,
                                                  key.h_query))
    cached = cu.memory()["cache_bytes"]
    assert sections <= cached < sections + 64 * len(key.coefs) + 8 * key.domain_size + (1 << 16)


def test_cli_backend_cuda(gpu_ready, tmp_path):
    from conftest import zkqueue
    d = fixture_dir("bn128_chain_10")
    proc = zkqueue("-v", "prove", d / "circuit_final.zkey", d / "witness.wtns", tmp_path / "p.json",
                   tmp_path / "pub.json", "--backend", "cuda")
    assert proc.returncode == 0, proc.stderr
    proc = zkqueue("verify", d / "verification_key.json", tmp_path / "pub.json", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr

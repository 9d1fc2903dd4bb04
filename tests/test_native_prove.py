"""The native whole-prove (groth16/native_prove.py, kernels/cpu/prove.cpp) and the NTT it uses.

Checked against the backend-op prover (groth16/prover.py, the path CUDA and the workers
take), snarkjs as the independent verifier, and a Python NTT; on each arithmetic variant
this CPU runs. And `zkqueue prove --backend cpu` must not import numpy.
"""

from __future__ import annotations

import ctypes
import random
import subprocess
import sys
import threading

import numpy as np
import pytest

from zkqueue.groth16 import native, native_prove, prover, verifier
from zkqueue.groth16.backends.cpu import CpuBackend
from zkqueue.groth16.curves import BLS12381, BN128
from zkqueue.groth16.errors import Cancelled, FormatError
from zkqueue.groth16.formats import wtns, zkey
from zkqueue.workers.attempt_backend import AttemptBackend, Stopped
from zkqueue.workers.faults import Faults

from conftest import fixture_dir, select_arith, snarkjs_verifies
from test_bad_input import copy, flip, prove_fails, section_offset

CURVES = [BN128, BLS12381]
IDS = [c.name for c in CURVES]
ARITH = (["x86-adx"] if native.has_adx() else []) + ["portable"]
R256 = 1 << 256


@pytest.fixture(params=ARITH)
def arith(request, monkeypatch):
    """Selects the native arithmetic variant for the test (through ZKQUEUE_CPU_ARITH)."""
    return select_arith(monkeypatch, request.param)


# ---- the command line --------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bn128_chain_12", "bls12381_chain_10"])
def test_cli_prove_cpu_loads_no_numpy(tmp_path, name):
    """The `zkqueue` console script's prove (zkqueue/cli.py) imports neither numpy nor
    OpenSSL (hashlib's _hashlib: 3.7 MB of resident memory), nor any module of the queue
    (its errors, jobs, Redis, Celery: the prove's start-up is part of its wall time), and
    snarkjs accepts the proof it writes."""
    d = fixture_dir(name)
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    for backend in ("cpu", "auto"):  # auto: no CuPy on a CPU-only machine
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "zkqueue.cli", "prove",
                               str(d / "circuit_final.zkey"), str(d / "witness.wtns"), str(proof), str(public),
                               "--backend", backend], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
        assert "zkqueue.groth16.native_prove" in imported
        assert not [m for m in imported if m.split(".")[0] in ("numpy", "_hashlib", "_ssl")], proc.stderr[-6000:]
        queue = [m for m in imported if m.split(".")[0] in ("redis", "celery", "kombu") or
                 m.split(".")[:2] == ["zkqueue", "coordinator"]]
        assert not queue, queue
        if backend == "cpu":  # nothing logs on this path, and argparse's help width needs no shutil
            assert not {"logging", "shutil"} & set(imported)
        # a plain prove builds no parser, no dataclass (model.py's), and writes its JSON itself
        assert not {"argparse", "dataclasses", "inspect", "json"} & set(imported)
        assert snarkjs_verifies(d / "verification_key.json", public, proof)


_PLAIN = [["prove", "k", "w", "p", "q"], ["-v", "prove", "k", "w", "p", "q"], ["--verbose", "-v", "prove", "k", "w", "p", "q"],
          ["prove", "--backend", "cpu", "k", "w", "--threads", "2", "p", "q"], ["prove", "k", "w", "p", "q", "--threads=07"],
          ["prove", "--backend=auto", "k", "w", "p", "q"], ["prove", "", "w", "p", "q"]]
# argparse's: help, errors, and the forms plain parsing leaves to it (abbreviated or repeated
# flags, --r1cs, "--", "-"), whatever argparse makes of them
_NOT_PLAIN = [["prove", "-h"], ["prove", "k", "w", "p"], ["prove", "k", "w", "p", "q", "r"], ["prove", "k", "w", "p", "q", "-v"],
              ["prove", "k", "w", "p", "q", "--threads", "0"], ["prove", "k", "w", "p", "q", "--threads", "x"],
              ["prove", "k", "w", "p", "q", "--threads", "-1"], ["prove", "k", "w", "p", "q", "--threads="],
              ["prove", "k", "w", "p", "q", "--backend", "gpu"], ["prove", "k", "w", "p", "q", "--back", "cpu"],
              ["prove", "k", "w", "p", "q", "--threads", "1", "--threads", "2"], ["prove", "k", "w", "p", "q", "--r1cs", "c"],
              ["prove", "--", "k", "w", "p", "q"], ["prove", "-", "w", "p", "q"], ["prove", "k", "w", "p", "q", "--threads"],
              ["-vv", "prove", "k", "w", "p", "q"], ["verify", "k", "w", "p"], [], ["-v"]]


@pytest.mark.parametrize("words", _PLAIN + _NOT_PLAIN)
def test_plain_prove_parses_as_argparse_does(words):
    """groth16.cli.parse_plain_prove (a plain `zkqueue prove` builds no parser) gives
    argparse's arguments, or None: argparse then parses the command line, with its help and
    its messages."""
    from zkqueue.groth16 import cli
    got = cli.parse_plain_prove(words)
    if words not in _PLAIN:
        assert got is None
        return
    parser, sub = cli.new_parser()
    cli.add_commands(sub)
    assert vars(got) == vars(parser.parse_args(words))


# ---- the same proof as the backend-op prover -----------------------------------------------

@pytest.mark.parametrize("name", ["bn128_chain_12", "bls12381_chain_12", "bn128_poseidon_10"])
def test_native_prove_equals_backend_prover(name, arith, monkeypatch):
    """With r and s fixed, the native whole-prove yields exactly the backend-op prover's
    proof, whatever the thread count (its steps are scheduled dynamically on two lanes):
    from the files (`zkqueue prove`) and on a worker's resident key, with and without the
    key's fixed-base tables."""
    d = fixture_dir(name)
    key, witness = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
    rng = random.Random(name)
    r, s = rng.randrange(1, key.curve.r), rng.randrange(1, key.curve.r)
    monkeypatch.setattr(prover, "blinding_scalars", lambda curve: (r, s))
    monkeypatch.setattr(native_prove, "blinding_scalars", lambda curve: (r, s))
    expected = prover.prove(key, witness, CpuBackend(key.curve, threads=2, variant=arith), fused=False)
    for threads in (1, 2, 3):
        got = native_prove.prove_files(d / "circuit_final.zkey", d / "witness.wtns", threads=threads,
                                       variant=arith)
        assert got.proof == expected.proof, threads
        assert got.public_signals == expected.public_signals
        be = CpuBackend(key.curve, threads=threads, variant=arith)
        assert prover.prove(key, witness, be).proof == expected.proof, threads
        prepared = be.prepare(key, budget_bytes=1 << 30)
        # a table for every query, but at 2^12 on 3 threads, where none is modelled to pay
        # for its build (msm.hpp, TABLE_MIN_SAVING)
        assert len(prepared.tables) == (0 if threads == 3 and key.domain_size >= 1 << 12 else 5)
        assert prover.prove(key, witness, be).proof == expected.proof, threads


def test_resident_prove_stops_when_cancelled():
    """The cancel flag a worker's attempt raises when its lease is lost stops the native
    prove before its next step, with Cancelled and no proof."""
    d = fixture_dir("bn128_chain_10")
    key, witness = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
    be = CpuBackend(key.curve, threads=2)
    with pytest.raises(Cancelled, match="cancelled by the caller"):
        be.prove_whole(key, witness.values, 1, 2, cancel=ctypes.c_int(1))
    pi_a, pi_b, pi_c = be.prove_whole(key, witness.values, 1, 2, cancel=ctypes.c_int(0))
    assert len(pi_a) == key.curve.g1_bytes and len(pi_b) == key.curve.g2_bytes


def test_native_prove_is_fresh_each_time():
    d = fixture_dir("bn128_chain_10")
    a, b = (native_prove.prove_files(d / "circuit_final.zkey", d / "witness.wtns") for _ in range(2))
    assert a.proof != b.proof and a.public_signals == b.public_signals


# ---- bad input on the native path ------------------------------------------------------------

def test_corrupt_coefficient_names_file_section_and_entry(tmp_path):
    """A coefficient entry whose signal index is out of range (section 4, entry 7)."""
    d = fixture_dir("bn128_chain_10")

    def bad_signal(data: bytearray) -> bytearray:
        at = section_offset(data, 4) + 4 + 7 * 44 + 8
        data[at:at + 4] = (10**6).to_bytes(4, "little")
        return data
    z = copy(d / "circuit_final.zkey", tmp_path / "coef.zkey", bad_signal)
    err = prove_fails(tmp_path, z, d / "witness.wtns", "--backend", "cpu")
    assert "coef.zkey" in err and "section 4 (coefficients)" in err and "(entry 7)" in err
    assert "signal index is not below the number of variables" in err


@pytest.mark.parametrize("section", [5, 7, 9])
def test_bad_point_message_matches_backend_path(tmp_path, section):
    """A point off the curve gets the same message from the native path as from ZKey.check_points."""
    d = fixture_dir("bls12381_chain_10")
    point_bytes = BLS12381.g2_bytes if section == 7 else BLS12381.g1_bytes
    z = copy(d / "circuit_final.zkey", tmp_path / "p.zkey", flip(section, point_bytes * 3 + 5, 0x04))
    key = zkey.read_zkey(z)
    with pytest.raises(FormatError) as backend_err:
        key.check_points(CpuBackend(key.curve, threads=2))
    with pytest.raises(FormatError) as native_err:
        native_prove.prove_files(z, d / "witness.wtns")
    assert str(native_err.value) == str(backend_err.value)
    assert f"section {section}" in str(native_err.value) and "(point 3)" in str(native_err.value)


# ---- the NTT ----------------------------------------------------------------------------------

def ntt_ref(values: list[int], w: int, r: int) -> list[int]:
    """out[j] = sum_i values[i] w^(ij) mod r, by recursive radix-2 (O(n log n) on Python ints)."""
    n = len(values)
    if n == 1:
        return list(values)
    even, odd = ntt_ref(values[0::2], w * w % r, r), ntt_ref(values[1::2], w * w % r, r)
    out, t = [0] * n, 1
    for j in range(n // 2):
        x = odd[j] * t % r
        out[j], out[j + n // 2] = (even[j] + x) % r, (even[j] - x) % r
        t = t * w % r
    return out


def to_words(curve, ints: list[int], mont: bool = True) -> ctypes.Array:
    data = b"".join((v * R256 % curve.r if mont else v).to_bytes(32, "little") for v in ints)
    return ctypes.create_string_buffer(data, len(data))


def from_words(buf: ctypes.Array, mont: bool = True, r: int = 0) -> list[int]:
    data = buf.raw   # a copy of the whole buffer on each access: read it once
    raw = [int.from_bytes(data[i:i + 32], "little") for i in range(0, len(data), 32)]
    return [v * pow(R256, -1, r) % r for v in raw] if mont else raw


def shifted(values: list[int], g: int, r: int) -> list[int]:
    """values[i] * g^i mod r."""
    out, t = [], 1
    for v in values:
        out.append(v * t % r)
        t = t * g % r
    return out


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
@pytest.mark.parametrize("log_n", [0, 1, 2, 5, 13, 14, 15])
def test_h_from_ab_vs_python(curve, log_n, arith):
    """h = A*B - C on the odd coset from A, B on the domain (the transform half of the prove):
    sizes below, at and above the cache block (outer stages: one, two fused, fused + one)."""
    rng = random.Random(log_n * 7 + curve.native_id)
    n, r = 1 << log_n, curve.r
    a = [rng.randrange(r) for _ in range(n)]
    b = [rng.randrange(r) for _ in range(n)]
    w, g = curve.root_of_unity(log_n), curve.coset_shift(log_n)
    n_inv, w_inv = pow(n, -1, r), pow(w, -1, r)

    def odd_coset(values):
        return ntt_ref(shifted([x * n_inv % r for x in ntt_ref(values, w_inv, r)], g, r), w, r)
    ao, bo, co = odd_coset(a), odd_coset(b), odd_coset([x * y % r for x, y in zip(a, b)])
    expected = [(x * y - z) % r for x, y, z in zip(ao, bo, co)]

    lib = native_prove.library(arith)
    for threads in (1, 2):
        aw, bw = to_words(curve, a), to_words(curve, b)
        rc = lib.zkq_h_from_ab(curve.native_id, aw, bw, n, native_prove.coset_shift_mont(curve, log_n), threads)
        assert rc == 0
        assert from_words(aw, mont=False) == expected, threads


@pytest.mark.parametrize("curve", CURVES, ids=IDS)
@pytest.mark.parametrize("log_n", [13, 14, 15])
def test_ntt_large_vs_python(curve, log_n, arith):
    """The backend op's NTT (forward with a coset shift, inverse) above the cache block."""
    rng = random.Random(log_n + 100 * curve.native_id)
    n, r = 1 << log_n, curve.r
    x = [rng.randrange(r) for _ in range(n)]
    g = curve.coset_shift(log_n)
    w = curve.root_of_unity(log_n)
    be = CpuBackend(curve, threads=2, variant=arith)
    words = np.frombuffer(to_words(curve, x).raw, dtype=np.uint64).reshape(-1, 4)
    fwd = be.ntt(words, coset_shift=g)
    assert from_words(ctypes.create_string_buffer(fwd.tobytes(), n * 32), r=r) == ntt_ref(shifted(x, g, r), w, r)
    assert np.array_equal(be.ntt(fwd, inverse=True, coset_shift=g), words)


# ---- a worker's attempt around the whole prove -----------------------------------------------

class _StopsWhileProving(CpuBackend):
    """A CPU backend whose prove is stopped from outside once it has begun: it sets the
    attempt's stop flag, waits (30 s at most) for the attempt's relay thread to pass it into
    the native cancel flag and end, then runs the native prove with that flag."""

    def __init__(self, curve, stop):
        super().__init__(curve, threads=2)
        self.stop = stop

    def prove_whole(self, zkey, witness_std, r, s, *, cancel=None):
        self.stop.set()
        for relay in [t for t in threading.enumerate() if t.name == "stop-relay"]:
            relay.join(timeout=30)
        return super().prove_whole(zkey, witness_std, r, s, cancel=cancel)


def test_attempt_stopped_during_the_whole_prove_ends_with_no_proof():
    d = fixture_dir("bn128_chain_10")
    key, witness = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
    stop = threading.Event()
    attempt = AttemptBackend(_StopsWhileProving(key.curve, stop), stop, Faults(), attempt=1)
    with pytest.raises(Stopped):
        prover.prove(key, witness, attempt, self_check=False)
    with pytest.raises(Stopped):  # and an attempt stopped before it starts does not start
        prover.prove(key, witness, attempt, self_check=False)


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_msm_wrong_fault_strikes_inside_the_whole_prove(name):
    """The msm-wrong fault (a bad build) yields a proof that parses but never verifies, so
    the worker's own check must catch it; without the fault the same path verifies."""
    d = fixture_dir(name)
    key, witness = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
    be = CpuBackend(key.curve, threads=2)
    for faults, valid in ((Faults(msm_wrong=True), False), (Faults(), True)):
        attempt = AttemptBackend(be, threading.Event(), faults, attempt=1)
        assert attempt.prove_whole  # the fused path is the one under test
        result = prover.prove(key, witness, attempt, self_check=False)
        assert verifier.verify(key.verification_key, result.proof, result.public_signals) is valid

"""Batched proving on the CUDA backend (groth16/backends/cuda_prove.prove_batch), run on the
host emulation of its kernels: B proofs of one key in one device pass, each the proof a
proof made alone would be, and a bad witness failing only its own proof."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from conftest import fixture_dir
from zkqueue.groth16 import verifier
from zkqueue.groth16.backends.cuda import CudaBackend
from zkqueue.groth16.encoding import g1_from_lem, g2_from_lem
from zkqueue.groth16.errors import Cancelled, InputError, MismatchError
from zkqueue.groth16.formats import wtns, zkey
from zkqueue.groth16.model import Proof

CHAIN = fixture_dir("bn128_chain_10")


def _emulated(curve) -> CudaBackend:
    from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
    return CudaBackend(curve, runtime=EmulatedRuntime(curve))


def _proof(curve, points) -> Proof:
    a, b, c = points
    return Proof(curve=curve, a=g1_from_lem(curve, a), b=g2_from_lem(curve, b), c=g1_from_lem(curve, c))


def test_a_batch_gives_each_witness_its_own_valid_proof_and_a_bad_witness_fails_alone():
    key = zkey.read_zkey(CHAIN / "circuit_final.zkey")
    ws = [wtns.read_wtns(CHAIN / "partitions" / f"witness_{i}.wtns") for i in range(3)]
    be = _emulated(key.curve)
    too_big = np.array(ws[1].values, copy=True)
    too_big[5] = np.frombuffer(key.curve.r.to_bytes(32, "little"), dtype="<u8")     # value 5 == r
    short = np.asarray(ws[2].values)[:-1]
    unreadable = OSError("the store lost it")
    items = [ws[0].values, too_big, ws[1].values, short, unreadable, ws[2].values]
    blinding = [(11 + j, 1000 + j) for j in range(len(items))]
    out = be.prove_batch(key, iter(items), blinding)
    blinding_launches = [n for n in be.rt.launches if n.startswith("msm_small_")]

    assert isinstance(out[1], InputError) and "witness value 5 is not below r" in str(out[1])
    assert isinstance(out[3], MismatchError) and out[4] is unreadable
    for j, w in ((0, ws[0]), (2, ws[1]), (5, ws[2])):
        proof = _proof(key.curve, out[j])
        assert verifier.verify(key.verification_key, proof, w.public_signals(key.n_public)), j
        # the very points a proof made alone with the same r and s has
        assert out[j] == be.prove_whole(key, w.values, *blinding[j])
    # three small-MSM launches blind the whole batch, whatever its size
    assert sorted(blinding_launches) == ["msm_small_g1", "msm_small_g1", "msm_small_g2"]


def test_a_cancelled_batch_stops():
    key = zkey.read_zkey(CHAIN / "circuit_final.zkey")
    w = wtns.read_wtns(CHAIN / "partitions" / "witness_0.wtns")
    with pytest.raises(Cancelled):
        _emulated(key.curve).prove_batch(key, [w.values, w.values], [(1, 2), (3, 4)], cancel=ctypes.c_int(1))


@pytest.mark.parametrize("together", [True, False])
def test_the_workers_prover_yields_each_member_alone(tmp_path, together):
    """workers/proving.PartitionProver.prove_batch on the CPU backend (proved in turn, the next
    witness read ahead) and on the emulated CUDA backend (in one device pass, `together`):
    each member's proof verified, a corrupt witness file and a witness that does not satisfy
    the circuit ending only their own members."""
    import threading

    from zkqueue.workers import faults
    from zkqueue.workers.proving import BatchItem, PartitionProver, Proved, SelfCheckFailed

    corrupt = tmp_path / "corrupt.wtns"
    corrupt.write_bytes(b"not a witness")
    unsatisfying = tmp_path / "witness_2_stale_wasm.wtns"
    data = bytearray((CHAIN / "partitions" / "witness_2.wtns").read_bytes())
    data[-40] ^= 0x5A
    unsatisfying.write_bytes(bytes(data))
    paths = [CHAIN / "partitions" / "witness_0.wtns", corrupt, unsatisfying, CHAIN / "partitions" / "witness_1.wtns"]
    prover = PartitionProver("cpu", threads=1, cache_bytes=1 << 30, faults=faults.parse(""))
    if together:    # the emulated CUDA backend, made here (a worker makes it from its settings)
        key = zkey.read_zkey(CHAIN / "circuit_final.zkey")
        prover._backends[key.curve.name] = _emulated(key.curve)
    items = [BatchItem(witness_path=(lambda p=p: p), attempt=1) for p in paths]
    out = dict(prover.prove_batch("k", lambda: CHAIN / "circuit_final.zkey", items, stop=threading.Event(),
                                  together=together))
    assert sorted(out) == [0, 1, 2, 3]
    assert isinstance(out[0], Proved) and isinstance(out[3], Proved)
    assert isinstance(out[1], InputError) and isinstance(out[2], SelfCheckFailed)
    key = zkey.read_zkey(CHAIN / "circuit_final.zkey")
    from zkqueue.groth16.formats.jsonfiles import proof_from_json
    for i in (0, 3):
        assert verifier.verify(key.verification_key, proof_from_json(out[i].proof), [int(s) for s in out[i].public])


def test_the_coefficient_index_is_kept_on_disk_and_read_back(tmp_path):
    """CudaBackend.resident_coefs: a key's coefficient index built once, kept on disk, read
    back by another process's backend (no rebuild) for the same proofs; a damaged or foreign
    file is rebuilt, never trusted."""
    key = zkey.read_zkey(CHAIN / "circuit_final.zkey")
    w = wtns.read_wtns(CHAIN / "partitions" / "witness_0.wtns")
    index = tmp_path / "coef-index" / "thekey.npz"
    be = _emulated(key.curve)
    assert be.resident_coefs(key.coefs, key.domain_size, index) == "built" and index.exists()
    assert be.resident_coefs(key.coefs, key.domain_size, index) == "resident"
    expected = be.prove_whole(key, w.values, 5, 7)
    again = _emulated(key.curve)
    assert again.resident_coefs(key.coefs, key.domain_size, index) == "disk"
    assert again.prove_whole(key, w.values, 5, 7) == expected
    other = zkey.read_zkey(fixture_dir("bn128_chain_12") / "circuit_final.zkey")     # another key's shape
    assert _emulated(key.curve).resident_coefs(other.coefs, other.domain_size, index) == "built"
    index.write_bytes(index.read_bytes()[:100])                                      # damaged
    third = _emulated(key.curve)
    assert third.resident_coefs(key.coefs, key.domain_size, index) == "built"
    assert third.prove_whole(key, w.values, 5, 7) == expected

"""Our proofs against snarkjs, and snarkjs's proofs against our verifier, on real circuits.

Every proof `zkqueue prove` writes must be accepted by `snarkjs groth16 verify`; every
proof snarkjs writes must be accepted by `zkqueue verify`, and a tampered one rejected.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURE_NAMES, fixture_dir, snarkjs, snarkjs_verifies, zkqueue


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_our_proof_verifies_with_snarkjs(name, tmp_path):
    d = fixture_dir(name)
    proc = zkqueue("prove", d / "circuit_final.zkey", d / "witness.wtns", tmp_path / "proof.json",
                   tmp_path / "public.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "public.json").read_text()) == json.loads((d / "public.json").read_text())
    assert snarkjs_verifies(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")
    # and our own verifier agrees
    assert zkqueue("verify", d / "verification_key.json", tmp_path / "public.json",
                   tmp_path / "proof.json").returncode == 0


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_snarkjs_proof_verifies_with_us(name):
    d = fixture_dir(name)
    proc = zkqueue("verify", d / "verification_key.json", d / "public.json", d / "proof.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout


def test_partition_witnesses_each_prove(tmp_path):
    """The four extra witnesses of one circuit: four different valid proofs."""
    d = fixture_dir("bn128_chain_10")
    seen = set()
    for wtns in sorted((d / "partitions").glob("witness_*.wtns")):
        proof, public = tmp_path / f"{wtns.stem}.proof.json", tmp_path / f"{wtns.stem}.public.json"
        assert zkqueue("prove", d / "circuit_final.zkey", wtns, proof, public).returncode == 0
        assert snarkjs_verifies(d / "verification_key.json", public, proof)
        seen.add(public.read_text())
    assert len(seen) == 4


def test_proofs_are_blinded(tmp_path):
    """Two proofs of the same witness differ (fresh r, s) and both verify."""
    d = fixture_dir("bls12381_chain_10")
    for i in (1, 2):
        assert zkqueue("prove", d / "circuit_final.zkey", d / "witness.wtns", tmp_path / f"p{i}.json",
                       tmp_path / f"pub{i}.json").returncode == 0
    assert (tmp_path / "p1.json").read_text() != (tmp_path / "p2.json").read_text()


@pytest.mark.parametrize("curve", ["bn128", "bls12381"])
@pytest.mark.parametrize("key", ["circuit_final", "circuit_0000"])
def test_circuit_built_now(built_circuits, curve, key, tmp_path):
    """A circuit compiled and set up in this test run (4,017 constraints, 8 public signals).

    circuit_0000.zkey is what `groth16 setup` writes, sections in the order 1,2,4,3,9,8,5,6,7,10;
    circuit_final.zkey is the contributed key, in numeric order. Both must prove.
    """
    d = built_circuits[curve]
    vk = d / ("verification_key.json" if key == "circuit_final" else "verification_key_0000.json")
    proc = zkqueue("prove", d / f"{key}.zkey", d / "witness.wtns", tmp_path / "proof.json",
                   tmp_path / "public.json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((tmp_path / "public.json").read_text())) == 8
    assert snarkjs_verifies(vk, tmp_path / "public.json", tmp_path / "proof.json")
    # snarkjs's own proof of the same witness verifies with us
    snarkjs("groth16", "prove", d / f"{key}.zkey", d / "witness.wtns", tmp_path / "sj_proof.json",
            tmp_path / "sj_public.json")
    assert zkqueue("verify", vk, tmp_path / "sj_public.json", tmp_path / "sj_proof.json").returncode == 0


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
def test_export_vk_matches_snarkjs(name, tmp_path):
    d = fixture_dir(name)
    assert zkqueue("export-vk", d / "circuit_final.zkey", tmp_path / "vk.json").returncode == 0
    assert (tmp_path / "vk.json").read_text() == (d / "verification_key.json").read_text()


TAMPERS = {
    "pi_a": lambda p: p["pi_a"].__setitem__(0, str(int(p["pi_a"][0]) + 1)),
    "pi_b": lambda p: p["pi_b"][0].__setitem__(1, str(int(p["pi_b"][0][1]) + 1)),
    "pi_c": lambda p: p["pi_c"].__setitem__(1, str(int(p["pi_c"][1]) + 1)),
}


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_chain_10"])
@pytest.mark.parametrize("field", [*TAMPERS, "public"])
def test_tampered_snarkjs_proof_is_rejected(name, field, tmp_path):
    d = fixture_dir(name)
    proof = json.loads((d / "proof.json").read_text())
    public = json.loads((d / "public.json").read_text())
    if field == "public":
        public[2] = str(int(public[2]) + 1)
    else:
        TAMPERS[field](proof)
    (tmp_path / "proof.json").write_text(json.dumps(proof))
    (tmp_path / "public.json").write_text(json.dumps(public))
    proc = zkqueue("verify", d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "INVALID" in proc.stdout
    # snarkjs agrees that it is invalid
    assert not snarkjs_verifies(d / "verification_key.json", tmp_path / "public.json", tmp_path / "proof.json")


def test_verify_unreadable_input_exits_2(tmp_path):
    d = fixture_dir("bn128_chain_10")
    (tmp_path / "proof.json").write_text("{not json")
    proc = zkqueue("verify", d / "verification_key.json", d / "public.json", tmp_path / "proof.json")
    assert proc.returncode == 2
    assert "proof.json" in proc.stderr and "not valid JSON" in proc.stderr
    shutil.copy(d / "public.json", tmp_path / "public.json")
    proc = zkqueue("verify", d / "verification_key.json", tmp_path / "public.json", tmp_path / "missing.json")
    assert proc.returncode == 2 and "missing.json" in proc.stderr

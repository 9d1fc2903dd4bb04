"""Readers and writers against the real snarkjs fixtures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURE_NAMES, fixture_dir
from zkqueue.groth16.formats import jsonfiles, r1cs, wtns, zkey


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_zkey_embeds_the_published_verification_key(name):
    d = fixture_dir(name)
    key = zkey.read_zkey(d / "circuit_final.zkey")
    info = json.loads((d / "info.json").read_text())
    assert key.curve.name == info["curve"]
    assert key.n_vars == info["nWires"]
    assert key.n_public == info["nOutputs"] + info["nPubInputs"]
    assert key.domain_size == 1 << info["log2"]
    assert key.verification_key == jsonfiles.load_verification_key(d / "verification_key.json")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_witness_public_signals_and_r1cs(name):
    d = fixture_dir(name)
    w = wtns.read_wtns(d / "witness.wtns")
    key = zkey.read_zkey(d / "circuit_final.zkey")
    assert w.public_signals(key.n_public) == jsonfiles.load_public(d / "public.json", key.curve)
    system = r1cs.read_r1cs(d / "circuit.r1cs")
    values = [wtns.words_to_int(v) for v in w.values]
    assert system.n_public == key.n_public
    assert system.first_unsatisfied(values) is None
    values[-1] += 1
    assert system.first_unsatisfied(values) is not None


@pytest.mark.parametrize("name", ["bn128_chain_10", "bls12381_poseidon_10"])
def test_proof_json_round_trips_byte_for_byte(name, tmp_path):
    d = fixture_dir(name)
    proof = jsonfiles.load_proof(d / "proof.json")
    jsonfiles.write_json(tmp_path / "proof.json", jsonfiles.proof_json(proof))
    assert (tmp_path / "proof.json").read_text() == (d / "proof.json").read_text()
    public = jsonfiles.load_public(d / "public.json", proof.curve)
    jsonfiles.write_public(tmp_path / "public.json", public)
    assert (tmp_path / "public.json").read_text() == (d / "public.json").read_text()


@pytest.mark.parametrize("obj", [
    {"pi_a": ["1", "2", "1"], "pi_b": [["1", "2"], ["3", "4"], ["1", "0"]], "protocol": "groth16", "curve": "bn128"},
    ["123", "0"], [], {}, "", ["a\"b", "\\", "\n", "é", "\x7f"], {"k": [1, 2.5, None, True, {"x": []}]},
    [[["1"]], [], {}], {1: "one"}, {"é": ["1"]}])
def test_write_json_writes_what_json_dumps_writes(obj, tmp_path):
    """write_json's own writer (json is not imported by `zkqueue prove`) agrees with
    json.dumps(obj, indent=1), also for what it hands to json.dumps."""
    jsonfiles.write_json(tmp_path / "x.json", obj)
    assert (tmp_path / "x.json").read_text() == json.dumps(obj, indent=1)


def test_json_errors_name_the_field(tmp_path):
    d = fixture_dir("bn128_chain_10")
    proof = json.loads((d / "proof.json").read_text())
    proof["pi_c"][0] = "12x"
    (tmp_path / "p.json").write_text(json.dumps(proof))
    with pytest.raises(jsonfiles.FormatError, match=r"p\.json: pi_c\[0\]: expected a decimal string"):
        jsonfiles.load_proof(tmp_path / "p.json")
    proof = json.loads((d / "proof.json").read_text())
    proof["curve"] = "secp256k1"
    (tmp_path / "p.json").write_text(json.dumps(proof))
    with pytest.raises(jsonfiles.FormatError, match="unsupported curve 'secp256k1'"):
        jsonfiles.load_proof(tmp_path / "p.json")


def test_a_parsed_proof_object_is_read_as_strictly_as_a_file(tmp_path):
    """proof_from_json (a proof a worker recorded in a job's results) is load_proof's own
    parser: the same Proof, the same FormatError naming its source and field."""
    d = fixture_dir("bn128_chain_10")
    obj = json.loads((d / "proof.json").read_text())
    assert jsonfiles.proof_from_json(obj) == jsonfiles.load_proof(d / "proof.json")
    for field, value, message in [
            ("pi_a", ["1", "x", "1"], r"pi_a\[1\]: expected a decimal string, found 'x'"),
            ("pi_c", ["1", "2", "3"], r"pi_c: expected an affine point \(z = 1 or 0\), found z = 3"),
            ("pi_b", [["1", "2"]], r"pi_b: expected a G2 point"),
            ("protocol", "plonk", r"protocol is 'plonk', expected \"groth16\""),
            ("curve", "secp256k1", "unsupported curve 'secp256k1'")]:
        with pytest.raises(jsonfiles.FormatError, match=rf"^partition 3's proof: {message}"):
            jsonfiles.proof_from_json(dict(obj, **{field: value}), source="partition 3's proof")
    with pytest.raises(jsonfiles.FormatError, match=r"^proof\.json: missing \"pi_c\""):
        jsonfiles.proof_from_json({k: v for k, v in obj.items() if k != "pi_c"})
    with pytest.raises(jsonfiles.FormatError, match=r"^proof\.json: expected a proof object"):
        jsonfiles.proof_from_json(["not", "an", "object"])


def test_importing_the_core_loads_no_queue_libraries():
    code = "import sys, zkqueue.groth16.prover, zkqueue.groth16.verifier, zkqueue.groth16.cli; " \
           "print(sorted(m for m in ('celery', 'redis', 'kombu') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_records_behave_as_dataclasses():
    """groth16.record.Record (the classes on `zkqueue prove`'s path, without dataclasses):
    fields by position or keyword, defaults (a mutable one fresh for each instance),
    field-wise ==, and a frozen record immutable and hashable."""
    from zkqueue.groth16.curves import BN128
    from zkqueue.groth16.prover import ProveResult

    a, b = ProveResult("p", [1]), ProveResult(proof="p", public_signals=[1])
    assert a == b and a.timings_s == {} and a.timings_s is not b.timings_s
    a.timings_s["x"] = 1.0
    assert a != b and b.timings_s == {}
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(TypeError, match="missing argument 'public_signals'"):
        ProveResult("p")
    with pytest.raises(TypeError):
        ProveResult("p", [1], {}, "extra")
    assert hash(BN128) == hash(BN128) and {BN128: 1}[BN128] == 1
    with pytest.raises(AttributeError):
        BN128.q = 3
    assert repr(BN128).startswith("Curve(name='bn128', native_id=0, q=")
